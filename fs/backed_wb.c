/* A backing mount's write-back (backed.h): dirty units are read back from
 * the device and written to DIR, then DIR's fsync; a thread does it
 * writeback_delay after a file's first dirty byte, fsync does it at once,
 * and the unmount for every file. A failure keeps the bytes dirty and on
 * the device, says DIR's errno to fsync and the log, and is tried again a
 * delay later: nothing is dropped. */
#include "fs/backed.h"
#include "core/clock.h"
#include "core/transfer.h"
#include "daemon/log.h"
#include "fs/file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#define FLUSH_CHUNK ((size_t)16 << 20)

/* Whether unit i must be looked at: written, or maybe changed. */
static bool due_unit(const vy_tier_item *it, uint64_t i)
{
	return vy_tier_units_has(&it->dirty, i) || vy_tier_units_has(&it->suspect, i);
}

/* Bytes [at, at + n) read back (the read lock held), and which of their
 * units go to DIR (bit u: the unit at at + u * VY_TIER_UNIT): dirty ones,
 * and suspect ones whose bytes are not what DIR holds. Their sums are
 * recorded now, as DIR's to be. A suspect unit with no sum (a successor
 * keeps none) is put in *ask: DIR's own bytes tell (ask_dir). 0 or errno. */
static int read_chunk(vy_fs *fs, vy_inode *in, void *buf, uint64_t at, size_t n, uint32_t *send, uint32_t *ask)
{
	vy_tier_item *it = in->tier;
	vy_error e;
	uint64_t dend = in->size < in->cap ? in->size : in->cap; /* past it: the tail, zeros */
	size_t dev = at < dend ? (size_t)(dend - at < n ? dend - at : n) : 0;
	if (dev && vy_readback_pinned(vy_fs_core(fs, in), in->buf, at, buf, dev, &e) != VY_OK) {
		vy_log(LOG_ERR, "write-back of inode %" PRIu64 ": %s", in->ino, e.msg);
		return EIO;
	}
	memset((char *)buf + dev, 0, n - dev);
	*send = *ask = 0;
	for (size_t u = 0; u < n; u += VY_TIER_UNIT) {
		uint64_t i = vy_tier_unit_of(at + u);
		size_t len = vy_tier_unit_len(n, u);
		uint64_t sum = XXH3_64bits((char *)buf + u, len);
		if (!due_unit(it, i) || (!vy_tier_units_has(&it->dirty, i) && vy_tier_item_same(it, i, sum)))
			continue; /* unchanged since DIR got it */
		if (!vy_tier_units_has(&it->dirty, i) && !vy_tier_units_has(&it->summed, i)) {
			*ask |= (uint32_t)1 << (u / VY_TIER_UNIT);
			continue;
		}
		if (!vy_tier_item_sum(it, i, sum))
			vy_tier_units_clear(&it->summed, i, i + 1); /* no memory: compared as changed next time */
		*send |= (uint32_t)1 << (u / VY_TIER_UNIT);
	}
	return 0;
}

/* The units in `ask` (the read lock held): each whose bytes DIR holds
 * already is left, the others go into *send; every one's sum is recorded,
 * as what DIR holds or is about to. A read of DIR that fails counts as
 * changed; past DIR's end it reads zeros, as the file's size set after
 * (sync_file) makes them. */
static void ask_dir(vy_inode *in, const void *buf, uint64_t at, size_t n, uint32_t ask, uint32_t *send, void *theirs)
{
	vy_tier_item *it = in->tier;
	for (size_t u = 0; u < n; u += VY_TIER_UNIT) {
		uint32_t bit = (uint32_t)1 << (u / VY_TIER_UNIT);
		if (!(ask & bit))
			continue;
		size_t len = vy_tier_unit_len(n, u);
		if (vy_tier_pread(it->fd, theirs, len, at + u) != 0 || memcmp(theirs, (const char *)buf + u, len))
			*send |= bit;
		vy_tier_item_sum(it, vy_tier_unit_of(at + u), XXH3_64bits((const char *)buf + u, len)); /* no memory: asked again */
	}
}

/* The chunk's units in `send` into DIR's file (the read lock held): 0 or
 * errno. */
static int write_chunk(vy_tier_item *it, const void *buf, uint64_t at, size_t n, uint32_t send, uint64_t *written)
{
	for (size_t u = 0; u < n; u += VY_TIER_UNIT) {
		if (!(send >> (u / VY_TIER_UNIT) & 1))
			continue;
		size_t len = vy_tier_unit_len(n, u);
		int err = vy_tier_pwrite(it->fd, (const char *)buf + u, len, at + u);
		if (err)
			return err;
		*written += len;
	}
	return 0;
}

/* The first due unit at or after `a` (the read lock held). */
static uint64_t next_due(const vy_tier_item *it, uint64_t a, uint64_t units)
{
	uint64_t d = vy_tier_units_next(&it->dirty, a, units, true), s = vy_tier_units_next(&it->suspect, a, units, true);
	return d < s ? d : s;
}

/* The dirty and suspect units into DIR, a chunk at a time: the read lock
 * is held while a chunk is read back and written to DIR (a truncate in
 * between would see old bytes land after it), not between chunks nor
 * through DIR's fsync, so a writer or a mapping waits for one chunk at
 * most. 0 or errno. */
static int write_units(vy_fs *fs, vy_inode *in, uint64_t *written)
{
	vy_tier_item *it = in->tier;
	vy_core *core = vy_fs_core(fs, in);
	vy_staging_buf buf = {0};
	vy_error e;
	void *theirs = NULL; /* DIR's unit, for ask_dir */
	if (vy_staging_acquire(core->staging, FLUSH_CHUNK, &buf, &e) != VY_OK) {
		vy_log(LOG_ERR, "write-back of inode %" PRIu64 ": %s", in->ino, e.msg);
		return ENOMEM;
	}
	int err = 0;
	for (uint64_t a = 0; !err;) {
		pthread_rwlock_rdlock(&in->lock);
		uint64_t units = vy_tier_units_to(in->size);
		a = next_due(it, a, units);
		if (a >= units || in->nlink == 0) {
			pthread_rwlock_unlock(&in->lock);
			break;
		}
		uint64_t b = a;
		while (b < units && due_unit(it, b) && (b - a) * VY_TIER_UNIT < FLUSH_CHUNK)
			b++;
		uint64_t from = a * VY_TIER_UNIT, to = b * VY_TIER_UNIT < in->size ? b * VY_TIER_UNIT : in->size;
		uint32_t send = 0, ask = 0;
		err = read_chunk(fs, in, buf.ptr, from, (size_t)(to - from), &send, &ask);
		if (!err && ask && !theirs && !(theirs = malloc(VY_TIER_UNIT)))
			send |= ask; /* no memory to compare: written */
		else if (!err && ask)
			ask_dir(in, buf.ptr, from, (size_t)(to - from), ask, &send, theirs);
		if (!err)
			err = write_chunk(it, buf.ptr, from, (size_t)(to - from), send, written);
		if (err) /* DIR may not hold them: compared as changed next time */
			vy_tier_units_clear(&it->summed, a, b);
		pthread_rwlock_unlock(&in->lock);
		a = b;
	}
	vy_staging_release(core->staging, &buf);
	free(theirs);
	return err;
}

/* DIR's file under the item's name was replaced behind the mount (a save
 * by rename on another host) while the mount holds bytes DIR lacks: the
 * mount's bytes win, written whole to the file now there, where every
 * unit is on the device; else ESTALE, the bytes kept. 0 when not replaced.
 * No lock held. */
static int replaced(vy_fs *fs, vy_inode *in)
{
	vy_tier_item *it = in->tier;
	struct stat byname, byfd;
	const char *name;
	pthread_mutex_lock(&fs->ns);
	int pfd = vy_backed_where(fs, in, &name);
	bool named = pfd >= 0 && vy_tier_stat(pfd, name, &byname) == 0 && S_ISREG(byname.st_mode);
	int fd = named ? vy_tier_open(pfd, name, O_RDWR, 0) : -1;
	pthread_mutex_unlock(&fs->ns);
	if (!named || it->fd < 0 || fstat(it->fd, &byfd) != 0 ||
	    (byfd.st_nlink > 0 && byfd.st_ino == byname.st_ino && byfd.st_dev == byname.st_dev)) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	pthread_rwlock_wrlock(&in->lock);
	int err = 0;
	if (fd < 0 || !vy_backed_present(in, 0, in->size)) {
		err = ESTALE;
		vy_log(LOG_ERR, "write-back of inode %" PRIu64 " (%s): the backing directory's file was replaced behind "
				"the mount, and the mount has only part of its bytes: not written (Fix: read it whole through "
				"the mount, e.g. vyrefs prefetch, then fsync, or copy it out with vyrefs cp)",
		       in->ino, it->name ? it->name : "?");
		if (fd >= 0)
			close(fd);
	} else {
		/* The mount's bytes win: all of them, to the file now there. */
		close(it->fd);
		if (it->dfd >= 0)
			close(it->dfd);
		it->fd = fd;
		it->dfd = -1;
		vy_tier_units_clear(&it->summed, 0, UINT64_MAX);
		vy_backed_wrote(fs, in, 0, in->size);
		vy_log(LOG_WARNING, "inode %" PRIu64 " (%s): the backing directory's file was replaced behind the mount; "
				    "the mount's bytes are written over it",
		       in->ino, it->name ? it->name : "?");
	}
	pthread_rwlock_unlock(&in->lock);
	return err;
}

/* DIR's file as long as the mount's, its mtime the bytes' (not the
 * write-back's), then DIR's fsync, and what DIR says of it after: 0 or
 * errno. The lock only while the size and times are read and set. */
static int sync_file(vy_inode *in, struct stat *st)
{
	vy_tier_item *it = in->tier;
	int err = 0;
	pthread_rwlock_rdlock(&in->lock);
	if (fstat(it->fd, st) != 0 || ((uint64_t)st->st_size != in->size && ftruncate(it->fd, (off_t)in->size) != 0))
		err = errno;
	if (!err) {
		pthread_mutex_lock(&in->meta);
		struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, in->mtime};
		pthread_mutex_unlock(&in->meta);
		if (futimens(it->fd, ts) != 0)
			err = errno;
	}
	/* Its own fd for the fsync: replaced() may swap the item's meanwhile. */
	int fd = err ? -1 : fcntl(it->fd, F_DUPFD_CLOEXEC, 0);
	if (!err && fd < 0)
		err = errno;
	pthread_rwlock_unlock(&in->lock);
	if (!err && fsync(fd) != 0)
		err = errno;
	if (!err && fstat(fd, st) != 0)
		err = errno;
	if (fd >= 0)
		close(fd);
	return err;
}

/* The pass over (the write lock held: a reader may look at the counts): on success what was due when it
 * began is clean, but what changed since; on failure all stays due. */
static void pass_done(vy_fs *fs, vy_inode *in, int err, const struct stat *st)
{
	vy_tier_item *it = in->tier;
	if (!err) {
		uint64_t before = it->dirty.count;
		if (!it->again_all) {
			vy_tier_units_keep_only(&it->dirty, &it->again);
			vy_tier_units_keep_only(&it->suspect, &it->again);
		}
		atomic_fetch_sub(&fs->tier->stats.dirty_bytes, (before - it->dirty.count) * VY_TIER_UNIT);
		vy_tier_item_saw(it, st);
		it->wb_err = 0;
		vy_backed_keep(fs, in); /* a death before this finds them dirty: written again */
		vy_tier_cache_clean(&fs->tier->cache, it);
		if (in->nlink && (it->dirty.count || it->suspect.count)) /* changed meanwhile: due a delay from now */
			vy_tier_cache_dirty(&fs->tier->cache, it, vy_monotonic_ns());
		atomic_fetch_add(&fs->tier->stats.writebacks, 1);
	} else {
		if (it->wb_err != err)
			vy_log(LOG_ERR, "write-back of inode %" PRIu64 " (%s) to the backing directory failed: %s; its bytes "
					"stay on the device and dirty, and are tried again (Fix: make room in, or mend, %s)",
			       in->ino, it->name ? it->name : "?", strerror(err), fs->tier->dir.path);
		it->wb_err = err;
		vy_tier_units_clear(&it->summed, 0, UINT64_MAX); /* DIR may not hold what they say */
		atomic_fetch_add(&fs->tier->stats.errors, 1);
		/* Due again a second and a delay from now, behind the others. */
		vy_tier_cache_clean(&fs->tier->cache, it);
		vy_tier_cache_dirty(&fs->tier->cache, it, vy_monotonic_ns() + 1000000000ull);
	}
	it->passing = false;
	it->again_all = false;
	vy_tier_units_clear(&it->again, 0, UINT64_MAX);
}

int vy_backed_flush(vy_fs *fs, vy_inode *in)
{
	vy_tier_item *it = in->tier;
	if (!fs->tier || !it || in->kind != VY_FILE)
		return 0;
	int err = vy_backed_prepare(fs, in);
	if (!err && (it->dirty.count || it->suspect.count) && in->nlink > 0)
		err = replaced(fs, in);
	pthread_mutex_lock(&it->flushing);
	pthread_rwlock_rdlock(&in->lock);
	vy_error e;
	uint64_t written = 0;
	if (in->nlink == 0) /* unlinked, still open: its bytes are nobody's in DIR any more */
		vy_tier_gone(fs->tier, it);
	if ((!it->dirty.count && !it->suspect.count) || in->nlink == 0) {
		pthread_rwlock_unlock(&in->lock);
		pthread_mutex_unlock(&it->flushing);
		return 0;
	}
	if (!err && vy_file_settle(fs, in, &e) != VY_OK) {
		vy_log(LOG_ERR, "write-back of inode %" PRIu64 ": %s", in->ino, e.msg);
		err = EIO;
	}
	it->passing = true; /* writers wait for the read lock: none missed */
	pthread_rwlock_unlock(&in->lock);
	struct stat st;
	if (!err)
		err = write_units(fs, in, &written);
	if (!err)
		err = sync_file(in, &st);
	pthread_rwlock_wrlock(&in->lock);
	pass_done(fs, in, err, &st);
	atomic_fetch_add(&fs->tier->stats.written_bytes, written);
	pthread_rwlock_unlock(&in->lock);
	pthread_mutex_unlock(&it->flushing);
	return err;
}

/* Each of `n` files by number: held, written back, let go; the first
 * errno; *done: how many were written back. */
static int flush_these(vy_fs *fs, const uint64_t *inos, size_t n, size_t *done)
{
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		vy_inode *in = vy_backed_hold(fs, inos[i]);
		if (!in)
			continue;
		int err = vy_backed_flush(fs, in);
		if (err && !first)
			first = err;
		*done += !err;
		vy_backed_let_go(fs, in);
	}
	return first;
}

int vy_backed_flush_all(vy_fs *fs)
{
	if (!fs->tier)
		return 0;
	int first = 0;
	/* A file that fails goes behind the others: one pass over what is
	 * dirty now, in batches, ends. */
	size_t left = fs->tier->cache.ndirty;
	while (left) {
		uint64_t inos[64];
		size_t n = vy_tier_cache_due(&fs->tier->cache, UINT64_MAX, inos, left < 64 ? left : 64), done = 0;
		if (!n)
			break;
		int err = flush_these(fs, inos, n, &done);
		if (err && !first)
			first = err;
		left -= n;
	}
	return first;
}

static void *wb_main(void *arg)
{
	vy_fs *fs = arg;
	uint64_t delay = fs->tier->delay_ms * 1000000ull;
	pthread_mutex_lock(&fs->wb_lock);
	while (!fs->wb_stop) {
		pthread_mutex_unlock(&fs->wb_lock);
		uint64_t now = vy_monotonic_ns(), inos[64];
		size_t n = vy_tier_cache_due(&fs->tier->cache, now > delay ? now - delay : 0, inos, 64), done = 0;
		flush_these(fs, inos, n, &done);
		pthread_mutex_lock(&fs->wb_lock);
		if (fs->wb_stop || n == 64)
			continue; /* more are due: at once */
		/* The next look: a tenth of the delay (a file is written back
		 * at most that late), 10 ms to 1 s: a look is a short walk of
		 * the dirty list, so no writer needs to wake the thread. */
		uint64_t wait_ms = fs->tier->delay_ms / 10;
		wait_ms = wait_ms < 10 ? 10 : wait_ms > 1000 ? 1000 : wait_ms;
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += (time_t)(wait_ms / 1000);
		until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&fs->wb_wake, &fs->wb_lock, &until);
	}
	pthread_mutex_unlock(&fs->wb_lock);
	return NULL;
}

vy_err vy_backed_wb_start(vy_fs *fs, vy_error *e)
{
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&fs->wb_wake, &ca) != 0)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot start the write-back thread");
	pthread_condattr_destroy(&ca);
	if (pthread_mutex_init(&fs->wb_lock, NULL) != 0) {
		pthread_cond_destroy(&fs->wb_wake);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot start the write-back thread");
	}
	fs->wb_stop = false;
	int err = pthread_create(&fs->writeback, NULL, wb_main, fs);
	if (err) {
		pthread_mutex_destroy(&fs->wb_lock);
		pthread_cond_destroy(&fs->wb_wake);
		return vy_fail(e, VY_ENOMEM, "raise the process limit (ulimit -u)", "cannot start the write-back thread: %s",
			       strerror(err));
	}
	fs->wb_started = true;
	return VY_OK;
}

void vy_backed_wb_stop(vy_fs *fs)
{
	if (!fs->wb_started)
		return;
	pthread_mutex_lock(&fs->wb_lock);
	fs->wb_stop = true;
	pthread_cond_signal(&fs->wb_wake);
	pthread_mutex_unlock(&fs->wb_lock);
	pthread_join(fs->writeback, NULL);
	pthread_mutex_destroy(&fs->wb_lock);
	pthread_cond_destroy(&fs->wb_wake);
	fs->wb_started = false;
}
