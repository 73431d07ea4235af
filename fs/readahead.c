/* Readahead chunks of one file (see readahead.h). */
#include "fs/readahead.h"
#include "core/async.h"
#include "daemon/log.h"

#include <stdlib.h>

typedef struct ra_chunk {
	vy_staging_buf buf; /* ptr NULL: no memory held */
	uint64_t start, len;
	uint64_t gen;   /* the file's generation when it was copied */
	bool valid;     /* holds [start, start+len) of generation gen, maybe in flight */
	vy_async copy;  /* its copy from the device */
	unsigned users; /* replies being made from it */
} ra_chunk;

struct vy_readahead {
	pthread_mutex_t lock;
	ra_chunk chunk[2];
	uint64_t gen;  /* bumped whenever the file's bytes change */
	uint64_t next; /* where the last read ended: a read from there continues it */
};

static struct vy_readahead *state(vy_inode *in)
{
	struct vy_readahead *ra = atomic_load(&in->ra);
	if (ra)
		return ra;
	/* Readers hold the inode lock shared: the first to publish wins. */
	ra = calloc(1, sizeof(*ra));
	if (!ra || pthread_mutex_init(&ra->lock, NULL) != 0) {
		free(ra);
		return NULL;
	}
	struct vy_readahead *none = NULL;
	if (!atomic_compare_exchange_strong(&in->ra, &none, ra)) {
		pthread_mutex_destroy(&ra->lock);
		free(ra);
		return none;
	}
	return ra;
}

static bool current(const struct vy_readahead *ra, const ra_chunk *c)
{
	return c->valid && c->gen == ra->gen;
}

/* Wait for the chunk's copy; false when it failed (the chunk is dropped). */
static bool landed(vy_fs *fs, vy_inode *in, ra_chunk *c)
{
	vy_error why;
	if (vy_async_wait(vy_fs_core(fs, in), &c->copy, &why) == VY_OK)
		return true;
	vy_log(LOG_NOTICE, "inode %llu: readahead: %s", (unsigned long long)in->ino, why.msg);
	c->valid = false;
	return false;
}

/* Pinned memory for the chunk, within the fs-wide cap. */
static bool hold(vy_fs *fs, vy_inode *in, ra_chunk *c)
{
	return c->buf.ptr || vy_staging_acquire_counted(vy_fs_core(fs, in)->staging, VY_RA_CHUNK, &fs->ra_chunks, VY_RA_CHUNKS, &c->buf);
}

/* Queue the copy of the file's bytes from `at` into chunk c (not in use). */
static bool fetch(vy_fs *fs, vy_inode *in, struct vy_readahead *ra, ra_chunk *c, uint64_t at)
{
	if (c->copy.inflight)
		landed(fs, in, c);
	c->valid = false;
	/* Only what the buffer holds: the tail past it is read as zeros. */
	uint64_t end = in->size < in->cap ? in->size : in->cap;
	if (at >= end || !hold(fs, in, c))
		return false;
	uint64_t len = end - at < VY_RA_CHUNK ? end - at : VY_RA_CHUNK;
	vy_error why;
	if (vy_async_dtoh(vy_fs_core(fs, in), &c->copy, in->buf, at, c->buf.ptr, len, &why) != VY_OK) {
		vy_log(LOG_NOTICE, "inode %llu: readahead: %s", (unsigned long long)in->ino, why.msg);
		return false;
	}
	vy_telemetry_add(vy_fs_core(fs, in)->tel, ra_copies, 1);
	c->start = at;
	c->len = len;
	c->gen = ra->gen;
	c->valid = true;
	return true;
}

static ra_chunk *holding(struct vy_readahead *ra, uint64_t off, size_t len)
{
	for (int k = 0; k < 2; k++) {
		ra_chunk *c = &ra->chunk[k];
		if (current(ra, c) && off >= c->start && off - c->start <= c->len && len <= c->len - (off - c->start))
			return c;
	}
	return NULL;
}

/* A chunk free for a new copy: one not in use, a stale one first, else the
 * one further back in the file. */
static ra_chunk *spare(struct vy_readahead *ra)
{
	ra_chunk *a = &ra->chunk[0], *b = &ra->chunk[1];
	if (a->users && b->users)
		return NULL;
	if (a->users || b->users)
		return a->users ? b : a;
	if (!current(ra, a) || !current(ra, b))
		return !current(ra, a) ? a : b;
	return a->start <= b->start ? a : b;
}

bool vy_readahead_get(vy_fs *fs, vy_inode *in, uint64_t off, size_t len, vy_ra_hit *hit)
{
	if (!fs->cfg.readahead || len == 0 || len > VY_RA_CHUNK)
		return false;
	struct vy_readahead *ra = state(in);
	if (!ra)
		return false;
	pthread_mutex_lock(&ra->lock);
	ra_chunk *c = holding(ra, off, len);
	if (!c && off == ra->next) { /* continues the last read: fetch from here */
		c = spare(ra);
		if (c && !fetch(fs, in, ra, c, off))
			c = NULL;
	}
	ra->next = off + len;
	if (!c || !landed(fs, in, c)) {
		pthread_mutex_unlock(&ra->lock);
		return false;
	}
	c->users++;
	hit->chunk = c;
	hit->data = (const char *)c->buf.ptr + (off - c->start);
	hit->len = len;
	vy_telemetry_add(vy_fs_core(fs, in)->tel, ra_hits, 1);
	/* The next chunk's copy runs while this one is consumed. */
	uint64_t end = c->start + c->len;
	ra_chunk *n = &ra->chunk[c == &ra->chunk[0]];
	if (c->len == VY_RA_CHUNK && end < in->size && !(current(ra, n) && n->start == end) && !n->users)
		fetch(fs, in, ra, n, end);
	pthread_mutex_unlock(&ra->lock);
	return true;
}

void vy_readahead_put(vy_fs *fs, vy_inode *in, vy_ra_hit *hit)
{
	(void)fs;
	struct vy_readahead *ra = atomic_load(&in->ra);
	pthread_mutex_lock(&ra->lock);
	hit->chunk->users--;
	pthread_mutex_unlock(&ra->lock);
	hit->chunk = NULL;
}

void vy_readahead_forget(vy_inode *in)
{
	struct vy_readahead *ra = atomic_load(&in->ra);
	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	ra->gen++;
	pthread_mutex_unlock(&ra->lock);
}

void vy_readahead_release(vy_fs *fs, vy_inode *in)
{
	struct vy_readahead *ra = atomic_load(&in->ra);
	if (!ra)
		return;
	pthread_mutex_lock(&ra->lock);
	for (int k = 0; k < 2; k++) {
		ra_chunk *c = &ra->chunk[k];
		if (c->copy.inflight)
			landed(fs, in, c);
		c->valid = false;
		vy_staging_release_counted(vy_fs_core(fs, in)->staging, &fs->ra_chunks, &c->buf);
	}
	pthread_mutex_unlock(&ra->lock);
}

void vy_readahead_free(vy_fs *fs, vy_inode *in)
{
	struct vy_readahead *ra = atomic_load(&in->ra);
	if (!ra)
		return;
	vy_readahead_release(fs, in);
	for (int k = 0; k < 2; k++) {
		vy_error why;
		if (vy_async_destroy(vy_fs_core(fs, in), &ra->chunk[k].copy, &why) != VY_OK)
			vy_log(LOG_WARNING, "inode %llu: %s", (unsigned long long)in->ino, why.msg);
	}
	atomic_store(&in->ra, NULL);
	pthread_mutex_destroy(&ra->lock);
	free(ra);
}
