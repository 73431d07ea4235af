/* A backing mount's bytes (backed.h): which units of a file are on the
 * device, loading the missing ones from DIR, dirty marks, and giving
 * device memory back from the least recently used clean files. A file
 * not yet loaded has its size and no buffer: every byte past the buffer
 * is the tail (fs/file.c), so nothing here may read the device for a
 * unit that is not present: reads ask vy_backed_present first. */
#include "fs/backed.h"
#include "core/clock.h"
#include "core/parallel.h"
#include "core/place.h"
#include "core/transfer.h"
#include "daemon/log.h"
#include "fs/file.h"
#include "fs/readahead.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

/* Bytes read from DIR and uploaded per step. */
#define LOAD_CHUNK ((size_t)16 << 20)
/* Units a reader in order has loaded ahead of it (64 MiB). */
#define AHEAD_UNITS 32

int vy_backed_prepare(vy_fs *fs, vy_inode *in)
{
	vy_tier_item *it = in->tier;
	if (!fs->tier || !it || in->kind != VY_FILE)
		return 0;
	pthread_mutex_lock(&fs->ns);
	int err = 0;
	if (it->fd < 0) {
		const char *name;
		int pfd = vy_backed_where(fs, in, &name);
		int fd = pfd >= 0 ? vy_tier_open(pfd, name, O_RDWR, 0) : pfd;
		if (fd == -EACCES || fd == -EROFS || fd == -EPERM || fd == -ETXTBSY)
			fd = vy_tier_open(pfd, name, O_RDONLY, 0); /* reads still load; write-back says why */
		/* By name: it must still be the file of DIR's the mount knows
		 * (a successor's first open; a save by rename behind the mount
		 * since). Else its units would mix two files: ESTALE until the
		 * next open takes DIR's new file (a clean one) or the bytes
		 * are copied out (vyrefs cp) and it is written again. */
		struct stat st;
		if (fd >= 0 && it->ino && (fstat(fd, &st) != 0 || st.st_ino != it->ino || st.st_dev != it->dev)) {
			vy_log(LOG_WARNING, "inode %" PRIu64 " (%s): another file holds its name in the backing directory; not "
					    "used for it (Fix: open it again to read the new file, or copy the mount's bytes out)",
			       in->ino, name);
			close(fd);
			fd = -ESTALE;
		}
		if (fd >= 0)
			it->fd = fd;
		else
			err = -fd;
		/* Loads read with O_DIRECT where DIR takes it (not tmpfs before
		 * Linux 6.6, not every FUSE filesystem). */
		int dfd = fd >= 0 ? vy_tier_open(pfd, name, O_RDONLY | O_DIRECT, 0) : -1;
		it->dfd = dfd >= 0 ? dfd : -1;
	}
	pthread_mutex_unlock(&fs->ns);
	return err;
}

bool vy_backed_present(const vy_inode *in, uint64_t off, uint64_t end)
{
	const vy_tier_item *it = in->tier;
	if (!it || in->kind != VY_FILE)
		return true;
	/* By units: a unit that begins below src holds DIR's bytes, even
	 * where [off, end) begins past src (an append in src's last unit). */
	uint64_t u0 = vy_tier_unit_of(off), u1 = vy_tier_units_to(end), last = vy_tier_units_to(it->src);
	return vy_tier_units_all(&it->present, u0, u1 < last ? u1 : last);
}

/* A load of DIR's bytes [from, to) onto the device at the same offsets,
 * the memory there already: 16 MiB chunks read and uploaded by up to 8
 * threads (core/parallel.h), O_DIRECT where DIR takes it, so a cold load
 * reads the storage with many requests in flight and never fills the page
 * cache. */
typedef struct loading {
	vy_fs *fs;
	vy_inode *in;
	uint64_t from, to;
	uint64_t *sums; /* a unit's sum, indexed from `from`'s unit */
	pthread_mutex_t lock;
	vy_err rc;
	vy_error e;
} loading;

static void load_chunks(void *ctx, unsigned worker, size_t lo, size_t hi)
{
	(void)worker;
	loading *l = ctx;
	vy_core *core = vy_fs_core(l->fs, l->in);
	vy_tier_item *it = l->in->tier;
	vy_staging_buf buf = {0};
	vy_error e;
	vy_err rc = vy_staging_acquire(core->staging, LOAD_CHUNK, &buf, &e);
	for (size_t c = lo; rc == VY_OK && c < hi; c++) {
		uint64_t at = l->from + (uint64_t)c * LOAD_CHUNK;
		size_t n = l->to - at < LOAD_CHUNK ? (size_t)(l->to - at) : LOAD_CHUNK;
		/* O_DIRECT reads whole blocks: past the end they read short, and
		 * the rest is zeros (vy_tier_pread). */
		size_t whole = (n + 4095) & ~(size_t)4095;
		int err = it->dfd >= 0 && whole <= buf.size ? vy_tier_pread_direct(it->dfd, buf.ptr, whole, at)
							    : vy_tier_pread(it->fd, buf.ptr, n, at);
		if (err) {
			atomic_fetch_add(&l->fs->tier->stats.errors, 1);
			rc = vy_fail(&e, VY_EDEVICE, "check the backing directory (dmesg, its server)",
				     "reading inode %" PRIu64 " from the backing directory: %s", l->in->ino, strerror(err));
			break;
		}
		/* What DIR holds, unit by unit: a write-back after a mapping
		 * compares with it rather than write what did not change. */
		for (size_t u = 0; u < n; u += VY_TIER_UNIT)
			l->sums[(at + u - l->from) / VY_TIER_UNIT] =
				XXH3_64bits((char *)buf.ptr + u, vy_tier_unit_len(n, u));
		rc = vy_upload_pinned(core, l->in->buf, at, buf.ptr, n, &e);
	}
	vy_staging_release(core->staging, &buf);
	if (rc != VY_OK) {
		pthread_mutex_lock(&l->lock);
		if (l->rc == VY_OK) {
			l->rc = rc;
			l->e = e;
		}
		pthread_mutex_unlock(&l->lock);
	}
}

static vy_err upload_run(vy_fs *fs, vy_inode *in, uint64_t from, uint64_t to, vy_error *e)
{
	uint64_t units = vy_tier_units_to(to - from), chunks = (to - from + LOAD_CHUNK - 1) / LOAD_CHUNK;
	loading l = {.fs = fs, .in = in, .from = from, .to = to, .sums = calloc(units, sizeof(uint64_t))};
	if (!l.sums || pthread_mutex_init(&l.lock, NULL) != 0) {
		free(l.sums);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot load inode %" PRIu64, in->ino);
	}
	unsigned workers = vy_parallel_workers(chunks, 1);
	vy_parallel_run(chunks, 1, workers < 8 ? workers : 8, load_chunks, &l);
	pthread_mutex_destroy(&l.lock);
	for (uint64_t u = 0; l.rc == VY_OK && u < units; u++)
		vy_tier_item_sum(in->tier, vy_tier_unit_of(from) + u, l.sums[u]);
	free(l.sums);
	if (l.rc != VY_OK) {
		if (e)
			*e = l.e;
		return l.rc;
	}
	atomic_fetch_add(&fs->tier->stats.loaded_bytes, to - from);
	return VY_OK;
}

/* A file's first bytes decide where its byte 0 sits (core/place.h),
 * before its first buffer: the load places it as a write from its start
 * would. */
static void place_from_dir(vy_inode *in)
{
	uint8_t head[VY_PLACE_HEAD];
	if (in->buf || in->tier->src < VY_PLACE_HEAD || vy_tier_pread(in->tier->fd, head, sizeof(head), 0) != 0)
		return;
	in->lead = (uint16_t)vy_place_lead(head);
}

vy_err vy_backed_load(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e)
{
	vy_tier_item *it = in->tier;
	if (!it || in->kind != VY_FILE || vy_backed_present(in, off, end))
		return VY_OK;
	if (it->fd < 0)
		return vy_fail(e, VY_EBUSY, "open the file again", "inode %" PRIu64 " lost its file in the backing directory",
			       in->ino);
	uint64_t u0 = vy_tier_unit_of(off), u1 = vy_tier_units_to(end), last = vy_tier_units_to(it->src);
	u1 = u1 < last ? u1 : last;
	/* A small file, or a device that maps no holes: all of it at once. */
	vy_core *core = vy_fs_core(fs, in);
	if (it->src <= 2 * VY_TIER_UNIT || !core->dev->share || core->dev->info.share_granularity != VY_TIER_UNIT) {
		u0 = 0;
		u1 = vy_tier_units_to(it->src);
	}
	uint64_t t0 = vy_monotonic_ns(), was = it->present.count;
	place_from_dir(in);
	vy_err rc = VY_OK;
	for (uint64_t a = vy_tier_units_next(&it->present, u0, u1, false); rc == VY_OK && a < u1;) {
		uint64_t b = vy_tier_units_next(&it->present, a, u1, true);
		uint64_t from = a * VY_TIER_UNIT, to = b * VY_TIER_UNIT < it->src ? b * VY_TIER_UNIT : it->src;
		rc = vy_file_back(fs, in, from, to, e);
		if (rc == VY_OK)
			rc = upload_run(fs, in, from, to, e);
		if (rc == VY_OK && !vy_tier_units_set(&it->present, a, b))
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot record what is loaded");
		if (rc == VY_OK)
			atomic_fetch_add(&fs->tier->stats.loads, 1);
		a = b < u1 ? vy_tier_units_next(&it->present, b, u1, false) : u1;
	}
	/* A readahead chunk copied before may hold zeros of a unit loaded
	 * now: none is served again. */
	vy_readahead_forget(in);
	atomic_fetch_add(&fs->tier->stats.load_us, (vy_monotonic_ns() - t0) / 1000);
	if (it->present.count != was)
		vy_backed_keep(fs, in);
	if (in->buf)
		vy_tier_cache_touch(&fs->tier->cache, it);
	return rc;
}

uint64_t vy_backed_ahead(const vy_inode *in, uint64_t off, uint64_t end)
{
	/* A read that continues a loaded unit is a reader going in order:
	 * 64 MiB at once, read by the loader's threads, instead of 2 MiB a
	 * round trip. A read elsewhere waits for its own units only. */
	const vy_tier_item *it = in->tier;
	uint64_t u = vy_tier_unit_of(off);
	if (!it || u == 0 || !vy_tier_units_has(&it->present, u - 1))
		return end;
	uint64_t ahead = (u + AHEAD_UNITS) * VY_TIER_UNIT;
	ahead = ahead < in->size ? ahead : in->size;
	return ahead > end ? ahead : end;
}

vy_err vy_backed_read_direct(vy_fs *fs, vy_inode *in, uint64_t off, size_t len, void *buf, vy_error *e)
{
	vy_tier_item *it = in->tier;
	vy_err rc = VY_OK;
	char *dst = buf;
	for (uint64_t at = off, end = off + len; rc == VY_OK && at < end;) {
		uint64_t unit = vy_tier_unit_of(at);
		uint64_t next = (unit + 1) * VY_TIER_UNIT < end ? (unit + 1) * VY_TIER_UNIT : end;
		size_t n = (size_t)(next - at);
		if (vy_backed_present(in, at, next)) {
			uint64_t dend = in->size < in->cap ? in->size : in->cap;
			size_t dev = at < dend ? (size_t)(dend - at < n ? dend - at : n) : 0;
			if (dev)
				rc = vy_readback_many(vy_fs_core(fs, in),
						      &(vy_readback){.handle = in->buf, .offset = at, .dst = dst, .len = dev}, 1, e);
			memset(dst + dev, 0, n - dev);
		} else if (it->fd < 0 || vy_tier_pread(it->fd, dst, n, at) != 0) {
			atomic_fetch_add(&fs->tier->stats.errors, 1);
			rc = vy_fail(e, VY_EDEVICE, "check the backing directory (dmesg, its server)",
				     "reading inode %" PRIu64 " from the backing directory failed", in->ino);
		}
		dst += n;
		at = next;
	}
	if (rc == VY_OK)
		atomic_fetch_add(&fs->tier->stats.direct_reads, 1);
	return rc;
}

static uint64_t now_ns(void)
{
	return vy_monotonic_ns();
}

/* Units [u0, u1) changed while a write-back runs (the write lock held):
 * they stay due at its end (tier/item.h). */
static void changed_in_pass(vy_tier_item *it, uint64_t u0, uint64_t u1)
{
	if (it->passing && !vy_tier_units_set(&it->again, u0, u1))
		it->again_all = true;
}

void vy_backed_wrote(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end)
{
	vy_tier_item *it = in->tier;
	if (!it || in->kind != VY_FILE || end <= off)
		return;
	uint64_t u0 = vy_tier_unit_of(off), u1 = vy_tier_units_to(end), was = it->dirty.count, had = it->present.count;
	/* Written units are the mount's (the write loaded what it did not
	 * cover): present, and dirty. */
	changed_in_pass(it, u0, u1);
	if (!vy_tier_units_set(&it->dirty, u0, u1) || !vy_tier_units_set(&it->present, u0, u1))
		vy_log(LOG_ERR, "inode %" PRIu64 ": out of memory marking written bytes: they may not reach the backing "
				"directory", in->ino);
	if (it->dirty.count > was)
		atomic_fetch_add(&fs->tier->stats.dirty_bytes, (it->dirty.count - was) * VY_TIER_UNIT);
	if (it->dirty.count != was || it->present.count != had)
		vy_backed_keep(fs, in); /* before the write is answered */
	vy_tier_cache_dirty(&fs->tier->cache, it, now_ns());
	if (in->buf)
		vy_tier_cache_touch(&fs->tier->cache, it);
}

vy_err vy_backed_whole(vy_fs *fs, vy_inode *in, vy_error *e)
{
	if (!in->tier || in->kind != VY_FILE)
		return VY_OK;
	return vy_backed_load(fs, in, 0, in->size, e);
}

void vy_backed_suspect(vy_fs *fs, vy_inode *in)
{
	vy_tier_item *it = in->tier;
	if (!fs->tier || !it || in->kind != VY_FILE || !in->size)
		return;
	changed_in_pass(it, 0, vy_tier_units_to(in->size));
	if (!vy_tier_units_set(&it->suspect, 0, vy_tier_units_to(in->size))) {
		vy_backed_wrote(fs, in, 0, in->size); /* no memory to compare later: written whole */
		return;
	}
	vy_backed_keep(fs, in);
	vy_tier_cache_dirty(&fs->tier->cache, it, now_ns());
}

int vy_backed_resize(vy_fs *fs, vy_inode *in, uint64_t size)
{
	vy_tier_item *it = in->tier;
	if (!it || in->kind != VY_FILE)
		return 0;
	if (it->fd < 0)
		return ENOENT;
	if (size > INT64_MAX)
		return EFBIG;
	if (ftruncate(it->fd, (off_t)size) != 0)
		return errno;
	if (size < it->src) {
		/* The bytes past it are gone in DIR too: nothing to load there. */
		it->src = size;
	}
	uint64_t units = vy_tier_units_to(size), was = it->dirty.count;
	vy_tier_units_clear(&it->dirty, units, UINT64_MAX);
	vy_tier_units_clear(&it->summed, vy_tier_unit_of(size), UINT64_MAX); /* DIR's bytes there changed */
	if (was > it->dirty.count)
		atomic_fetch_sub(&fs->tier->stats.dirty_bytes, (was - it->dirty.count) * VY_TIER_UNIT);
	struct stat st;
	if (fstat(it->fd, &st) == 0 && !it->dirty.count)
		vy_tier_item_saw(it, &st);
	vy_backed_keep(fs, in);
	return 0;
}

void vy_backed_used(vy_fs *fs, vy_inode *in)
{
	if (fs->tier && in->tier && in->buf)
		vy_tier_cache_touch(&fs->tier->cache, in->tier);
}

/* Its device memory back (the write lock held, clean, nothing maps it). */
static void evict_locked(vy_fs *fs, vy_inode *in)
{
	uint64_t bytes = in->cap - in->holes;
	vy_file_drop(fs, in);
	/* Clean: DIR holds every byte of it now, written ones too. */
	in->tier->src = in->size;
	vy_tier_units_clear(&in->tier->present, 0, UINT64_MAX);
	vy_tier_cache_remove(&fs->tier->cache, in->tier);
	vy_backed_keep(fs, in);
	atomic_fetch_add(&fs->tier->stats.evictions, 1);
	atomic_fetch_add(&fs->tier->stats.evicted_bytes, bytes);
}

/* Whether it may give its memory back now (write lock held). */
static bool evictable(vy_fs *fs, vy_inode *in)
{
	vy_tier_item *it = in->tier;
	return it && in->buf && !it->dirty.count && !it->suspect.count && !it->pinned && !in->maps && !in->opens &&
	       vy_store_inflight(vy_fs_core(fs, in)->store, in->buf) == 0;
}

vy_inode *vy_backed_hold(vy_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->ns);
	vy_inode *in = vy_u64map_get(&fs->inodes, ino);
	if (in)
		in->holds++;
	pthread_mutex_unlock(&fs->ns);
	return in;
}

void vy_backed_let_go(vy_fs *fs, vy_inode *in)
{
	pthread_mutex_lock(&fs->ns);
	in->holds--;
	vy_inode_reap(fs, in);
	pthread_mutex_unlock(&fs->ns);
}

bool vy_backed_evict(vy_fs *fs, unsigned dev, uint64_t want)
{
	if (!fs->tier)
		return false;
	uint64_t inos[64], got = 0;
	bool any = false;
	/* The whole order, oldest first, 64 at a time: open, dirty and pinned
	 * files are passed over, however many there are. */
	for (size_t skip = 0, n; got < want && (n = vy_tier_cache_oldest(&fs->tier->cache, skip, inos, 64)) > 0; skip += n)
	for (size_t i = 0; i < n && got < want; i++) {
		vy_inode *in = vy_backed_hold(fs, inos[i]);
		if (!in)
			continue;
		if (in->dev == dev && pthread_rwlock_trywrlock(&in->lock) == 0) {
			if (evictable(fs, in)) {
				got += in->cap - in->holes;
				evict_locked(fs, in);
				any = true;
			}
			pthread_rwlock_unlock(&in->lock);
		}
		vy_backed_let_go(fs, in);
	}
	return any;
}

int vy_backed_evict_one(vy_fs *fs, vy_inode *in)
{
	if (!fs->tier || !in->tier || in->kind != VY_FILE)
		return EINVAL;
	pthread_rwlock_wrlock(&in->lock);
	int err = 0;
	/* Asked for by name through its own open (the ioctl's): another open
	 * (a copy running into it), dirty, mapped, pinned or in use by a
	 * sequence keeps it. */
	vy_tier_item *it = in->tier;
	if (in->buf && !it->dirty.count && !it->suspect.count && !it->pinned && !in->maps && in->opens <= 1 &&
	    vy_store_inflight(vy_fs_core(fs, in)->store, in->buf) == 0)
		evict_locked(fs, in);
	else if (in->buf)
		err = EBUSY;
	pthread_rwlock_unlock(&in->lock);
	return err;
}

void vy_backed_revalidate(vy_fs *fs, vy_inode *in)
{
	vy_tier_item *it = in->tier;
	if (!fs->tier || !it || in->kind != VY_FILE)
		return;
	uint64_t gen = __atomic_load_n(&it->saw_gen, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&fs->ns);
	const char *name;
	int pfd = vy_backed_where(fs, in, &name);
	struct stat st;
	bool seen = pfd >= 0 && vy_tier_stat(pfd, name, &st) == 0 && S_ISREG(st.st_mode);
	pthread_mutex_unlock(&fs->ns);
	/* What DIR said at the last write-back is the flush's to change. A
	 * write-back running now had bytes not yet in DIR, which win over
	 * DIR's anyway, and ends agreeing with DIR: the open does not wait
	 * for it. One that ended since the stat made the stat stale. */
	if (pthread_mutex_trylock(&it->flushing) != 0)
		return;
	if (!seen || !vy_tier_item_changed(it, &st) || __atomic_load_n(&it->saw_gen, __ATOMIC_ACQUIRE) != gen) {
		pthread_mutex_unlock(&it->flushing);
		return;
	}
	pthread_rwlock_wrlock(&in->lock);
	if (it->dirty.count || it->suspect.count || in->maps ||
	    (in->buf && vy_store_inflight(vy_fs_core(fs, in)->store, in->buf))) {
		vy_log(LOG_WARNING, "inode %" PRIu64 " (%s) changed in the backing directory while the mount has bytes "
				    "of it not yet written back: the mount's bytes win",
		       in->ino, it->name ? it->name : "?");
	} else {
		if (in->buf)
			evict_locked(fs, in);
		vy_tier_units_clear(&it->present, 0, UINT64_MAX); /* none of DIR's new bytes is here */
		if (it->fd >= 0 && (it->dev != st.st_dev || it->ino != st.st_ino)) {
			close(it->fd); /* another file now: opened again by name */
			it->fd = -1;
			if (it->dfd >= 0)
				close(it->dfd);
			it->dfd = -1;
		}
		vy_tier_item_saw(it, &st);
		it->src = (uint64_t)st.st_size;
		in->size = it->src;
		vy_tier_units_clear(&it->summed, 0, UINT64_MAX);
		vy_tier_units_clear(&it->suspect, 0, UINT64_MAX);
		pthread_mutex_lock(&in->meta);
		in->mode = (in->mode & S_IFMT) | (st.st_mode & 07777);
		in->uid = st.st_uid;
		in->gid = st.st_gid;
		in->mtime = st.st_mtim;
		in->ctime = st.st_ctim;
		pthread_mutex_unlock(&in->meta);
		vy_backed_keep(fs, in);
		atomic_fetch_add(&fs->tier->stats.reloads, 1);
	}
	bool reloaded = !it->dirty.count && !it->suspect.count && !in->maps && !in->buf;
	pthread_rwlock_unlock(&in->lock);
	pthread_mutex_unlock(&it->flushing);
	if (reloaded && fs->se) /* after the lock: the kernel may call back */
		fuse_lowlevel_notify_inval_inode(fs->se, in->ino, 0, 0);
}

int vy_backed_pin(vy_fs *fs, vy_inode *in, bool pin)
{
	if (!fs->tier || !in->tier || in->kind != VY_FILE)
		return EPERM; /* vyrefs's own name, as every user.vyre.* */
	pthread_rwlock_wrlock(&in->lock);
	in->tier->pinned = pin;
	vy_backed_keep(fs, in);
	pthread_rwlock_unlock(&in->lock);
	return 0;
}

bool vy_backed_xattr(const vy_inode *in, const char *name, char *out, size_t cap)
{
	const vy_tier_item *it = in->tier;
	if (!it || in->kind != VY_FILE)
		return false;
	if (!strcmp(name, VY_PIN_XATTR) && it->pinned) {
		snprintf(out, cap, "1");
		return true;
	}
	if (!strcmp(name, "user.vyre.resident")) {
		uint64_t units = vy_tier_units_to(it->src);
		if (!it->src || (in->buf && it->present.count >= units))
			snprintf(out, cap, "yes");
		else if (!in->buf || !it->present.count)
			snprintf(out, cap, "no");
		else
			snprintf(out, cap, "partial %" PRIu64, it->present.count * VY_TIER_UNIT < it->src
								       ? it->present.count * VY_TIER_UNIT
								       : it->src);
		return true;
	}
	if (!strcmp(name, "user.vyre.dirty")) {
		snprintf(out, cap, "%" PRIu64, it->dirty.count * VY_TIER_UNIT < in->size ? it->dirty.count * VY_TIER_UNIT
											 : in->size);
		return true;
	}
	return false;
}

vy_err vy_backed_load_room(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e)
{
	if (!in->tier || in->kind != VY_FILE)
		return VY_OK;
	vy_err rc = VY_OK;
	for (int tries = 0;; tries++) {
		pthread_rwlock_wrlock(&in->lock);
		rc = vy_backed_load(fs, in, off, end, e);
		unsigned dev = in->dev;
		pthread_rwlock_unlock(&in->lock);
		/* No room: the least recently used clean files give theirs. */
		if (rc != VY_ENOSPC || tries == 3 || !vy_backed_evict(fs, dev, end > off ? end - off : VY_TIER_UNIT))
			return rc;
	}
}
