/* The daemon's file copies: workers take 4 MiB pieces in turn, read the
 * source into a pinned staging buffer and copy it to the device (or the
 * reverse), each on a stream of the core's. Pieces are aligned and stay
 * within the source's data (SEEK_DATA), so holes cost nothing. */
#include "fs/file.h"
#include "fs/copysrv.h"
#include "core/transfer.h"
#include "fs/readahead.h"
#include "fs/wbehind.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* 4 MiB: two per thread of 16 stay within the default 128 MiB staging
 * cache, so a second copy pins nothing anew. */
#define PIECE (4u << 20)
#define THREADS_MAX 16

typedef struct piece {
	uint64_t off, len;
} piece;

typedef struct run {
	vy_fs *fs;
	bool direct; /* the source is read with O_DIRECT: no page cache filled */
	const vy_copysrv_job *job;
	vy_core *core; /* the file's device */
	vy_handle buf;
	piece *pieces;
	size_t npieces;
	_Atomic size_t next;
	_Atomic uint64_t done;
	_Atomic unsigned finished;
	_Atomic bool stop;
	pthread_mutex_t lock;
	pthread_cond_t ended; /* a worker finished */
	vy_err rc;
	vy_error e;
} run;

static void run_fail(run *r, vy_err rc, const vy_error *e)
{
	pthread_mutex_lock(&r->lock);
	if (r->rc == VY_OK) {
		r->rc = rc;
		r->e = *e;
	}
	pthread_mutex_unlock(&r->lock);
	atomic_store(&r->stop, true);
}

/* Whole reads and writes; a source that shrank reads as zeros. */
static bool io_all(bool reading, int fd, char *buf, uint64_t len, uint64_t off)
{
	uint64_t got = 0;
	while (got < len) {
		ssize_t n = reading ? pread(fd, buf + got, len - got, (off_t)(off + got))
				    : pwrite(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return false;
		if (n == 0) {
			if (!reading)
				return false;
			memset(buf + got, 0, len - got);
			break;
		}
		got += (uint64_t)n;
	}
	return true;
}

static void *worker(void *arg)
{
	run *r = arg;
	pthread_setname_np(pthread_self(), "vy-copy");
	vy_core *c = r->core;
	vy_staging_buf sb = {0};
	vy_error e;
	vy_err rc = vy_staging_acquire(c->staging, PIECE, &sb, &e);
	if (rc != VY_OK)
		run_fail(r, rc, &e);
	for (size_t i; rc == VY_OK && !atomic_load(&r->stop) && (i = atomic_fetch_add(&r->next, 1)) < r->npieces;) {
		piece p = r->pieces[i];
		if (r->job->into) {
			/* O_DIRECT reads whole blocks: the tail's length rounded
			 * up (the piece buffer has room), the read stops at EOF. */
			uint64_t want = r->direct ? (p.len + 4095) / 4096 * 4096 : p.len;
			if (!io_all(true, r->job->other, sb.ptr, want, p.off))
				rc = vy_fail(&e, VY_EINVAL, "check the source file", "reading the source at %llu: %s",
					     (unsigned long long)p.off, strerror(errno));
			else
				rc = vy_upload_pinned(c, r->buf, p.off, sb.ptr, p.len, &e);
		} else {
			rc = vy_readback_pinned(c, r->buf, p.off, sb.ptr, p.len, &e);
			if (rc == VY_OK && !io_all(false, r->job->other, sb.ptr, p.len, p.off))
				rc = vy_fail(&e, errno == ENOSPC ? VY_ENOSPC : VY_EINVAL, "check the destination's filesystem",
					     "writing the destination at %llu: %s", (unsigned long long)p.off, strerror(errno));
		}
		if (rc != VY_OK)
			run_fail(r, rc, &e);
		else
			atomic_fetch_add(&r->done, p.len);
	}
	if (sb.ptr)
		vy_staging_release(c->staging, &sb);
	pthread_mutex_lock(&r->lock);
	atomic_fetch_add(&r->finished, 1);
	pthread_cond_signal(&r->ended);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* The data of fd's first `size` bytes (all of it when holes are not
 * looked for), or of the mount's file `in` (its holes and tail skipped),
 * in pieces of at most PIECE aligned to PIECE. The list grows with the
 * data, never with the size (a 1 TiB sparse file plans nothing). */
static vy_err pieces_of(vy_fs *fs, vy_inode *in, int fd, uint64_t size, bool skip_holes, piece **out, size_t *n,
			vy_error *e)
{
	size_t cap = 16, count = 0;
	piece *p = malloc(cap * sizeof(*p));
	if (!p)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot plan the copy");
	for (uint64_t off = 0; off < size;) {
		uint64_t data = off, hole = size;
		if (in) {
			if (vy_file_seek(fs, in, off, true, &data) != 0 || vy_file_seek(fs, in, data, false, &hole) != 0)
				break; /* a hole to the end */
			hole = hole > data ? hole : size;
		} else if (skip_holes) {
			off_t d = lseek(fd, (off_t)off, SEEK_DATA);
			if (d < 0 && errno == ENXIO)
				break; /* a hole to the end */
			if (d >= 0) {
				off_t h = lseek(fd, d, SEEK_HOLE);
				data = (uint64_t)d < size ? (uint64_t)d : size;
				hole = h > d && (uint64_t)h < size ? (uint64_t)h : size;
			}
		}
		for (uint64_t at = data; at < hole;) {
			uint64_t end = (at / PIECE + 1) * PIECE;
			end = end < hole ? end : hole;
			if (count == cap) {
				piece *q = realloc(p, (cap *= 2) * sizeof(*p));
				if (!q) {
					free(p);
					return vy_fail(e, VY_ENOMEM, "free host memory", "cannot plan the copy");
				}
				p = q;
			}
			p[count++] = (piece){at, end - at};
			at = end;
		}
		off = hole > off ? hole : size;
	}
	*out = p;
	*n = count;
	return VY_OK;
}

vy_err vy_copysrv_run(vy_fs *fs, const vy_copysrv_job *job, uint64_t *done, uint64_t *total, vy_error *e)
{
	vy_inode *in = job->in;
	*done = 0;
	if (job->into)
		pthread_rwlock_wrlock(&in->lock);
	else
		pthread_rwlock_rdlock(&in->lock);
	/* Every byte written through the mount on the device first; no
	 * readahead copy left to go stale. */
	vy_err rc = vy_wbehind_settle(fs, in, e);
	if (rc == VY_OK && job->into)
		vy_readahead_forget(in);
	uint64_t size = job->into ? job->size : in->size;
	*total = size;
	if (rc == VY_OK && job->into && size > in->size)
		rc = vy_fail(e, VY_EINVAL, "size the file first (libvyrefs does: ftruncate)",
			     "%llu bytes do not fit the %llu-byte file", (unsigned long long)size,
			     (unsigned long long)in->size);
	run r = {.fs = fs, .job = job, .core = vy_fs_core(fs, in), .buf = in->buf};
	if (rc == VY_OK && size > 0)
		rc = pieces_of(fs, job->into ? NULL : in, job->other, size, job->into, &r.pieces, &r.npieces, e);
	/* Into the mount: memory behind every byte that comes (the file was
	 * sized with holes); the source's holes stay holes. */
	for (size_t i = 0, j; rc == VY_OK && job->into && i < r.npieces; i = j) {
		for (j = i + 1; j < r.npieces && r.pieces[j].off == r.pieces[j - 1].off + r.pieces[j - 1].len; j++)
			; /* one run of data at a time: one piece of memory */
		rc = vy_file_back(fs, in, r.pieces[i].off, r.pieces[j - 1].off + r.pieces[j - 1].len, e);
	}
	r.buf = in->buf;
	/* Read a source with O_DIRECT where its filesystem takes it, so a
	 * large copy does not push the host's page cache out (pieces and
	 * staging buffers are aligned). Its flags are put back after. */
	int flags = job->into ? fcntl(job->other, F_GETFL) : -1;
	if (flags >= 0 && !(flags & O_DIRECT) && fcntl(job->other, F_SETFL, flags | O_DIRECT) == 0)
		r.direct = true;
	unsigned threads = job->threads ? job->threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	threads = threads < 1 ? 1 : threads > THREADS_MAX ? THREADS_MAX : threads;
	if (threads > r.npieces)
		threads = r.npieces ? (unsigned)r.npieces : 1;
	pthread_t t[THREADS_MAX];
	unsigned started = 0;
	if (rc == VY_OK && r.npieces) {
		pthread_mutex_init(&r.lock, NULL);
		pthread_cond_init(&r.ended, NULL);
		for (; started < threads; started++)
			if (pthread_create(&t[started], NULL, worker, &r) != 0)
				break;
		if (!started)
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot start a copy thread");
		pthread_mutex_lock(&r.lock);
		while (atomic_load(&r.finished) < started) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 50 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			if (pthread_cond_timedwait(&r.ended, &r.lock, &ts) == ETIMEDOUT && job->tick) {
				pthread_mutex_unlock(&r.lock);
				if (job->tick(job->ctx, atomic_load(&r.done), size))
					atomic_store(&r.stop, true);
				pthread_mutex_lock(&r.lock);
			}
		}
		pthread_mutex_unlock(&r.lock);
		for (unsigned i = 0; i < started; i++)
			pthread_join(t[i], NULL);
		if (rc == VY_OK && r.rc != VY_OK) {
			rc = r.rc;
			*e = r.e;
		} else if (rc == VY_OK && atomic_load(&r.stop)) {
			rc = vy_fail(e, VY_EINVAL, "run the copy again", "the copy was stopped: its client went away");
		}
		pthread_cond_destroy(&r.ended);
		pthread_mutex_destroy(&r.lock);
	}
	free(r.pieces);
	/* Out of the mount, only data was written: the holes and the tail
	 * are the destination's size. */
	if (rc == VY_OK && !job->into && ftruncate(job->other, (off_t)size) != 0)
		rc = vy_fail(e, VY_EINVAL, "check the destination's filesystem", "sizing the destination to %llu bytes: %s",
			     (unsigned long long)size, strerror(errno));
	if (r.direct)
		fcntl(job->other, F_SETFL, flags);
	*done = atomic_load(&r.done);
	if (job->into && *done)
		in->written = true;
	pthread_rwlock_unlock(&in->lock);
	if (job->into && *done) {
		vy_inode_touch(in, true);
		if (fs->se) /* the kernel may hold pages of the old bytes */
			fuse_lowlevel_notify_inval_inode(fs->se, in->ino, 0, 0);
	}
	return rc;
}
