/* The daemon's file copies: workers take 4 MiB pieces in turn and move each
 * between the client's fd and the device through a pinned staging buffer,
 * each on a stream of the core's. Pieces are aligned and stay within the
 * source's data (SEEK_DATA), so holes cost nothing.
 *
 * The client's fd is the client's: it may stall (a file on a FUSE
 * filesystem whose daemon stopped). No lock of the file is held while a
 * worker reads or writes it: only the device side of each piece runs under
 * the file's lock. A copy whose client I/O makes no progress for STALL_MS
 * is abandoned: its caller answers, and a thread still stuck in the
 * client's fd finishes on its own later (the run is reference-counted).
 * The caller (a connection's thread) only waits: planning (SEEK_DATA on
 * the client's fd) and the workers run in threads of the run's own. */
#include "fs/file.h"
#include "fs/backed.h"
#include "fs/op.h"
#include "ns/setid.h"
#include "sock/copysrv.h"
#include "persist/writer.h"
#include "sock/clientfd.h"
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
#define STALL_MS 20000

typedef struct piece {
	uint64_t off, len;
} piece;

typedef struct run {
	vy_fs *fs;
	vy_inode *in; /* held (opens) until the run's last reference goes */
	bool direct;  /* the source is read with O_DIRECT: no page cache filled */
	bool set_direct; /* this run set it: the flags go back at the end */
	int flags;    /* the other fd's status flags, put back at the end */
	bool into;
	int other;    /* a dup of the client's fd, the run's own */
	vy_core *core; /* the file's device */
	piece *pieces;
	size_t npieces;
	_Atomic size_t next;
	_Atomic uint64_t done;
	_Atomic uint64_t moved_ns; /* when client I/O last moved (or began) */
	_Atomic unsigned in_client; /* workers in the client's fd now */
	_Atomic unsigned finished;
	_Atomic bool stop;
	_Atomic bool abandoned; /* stalled: a late read lands nowhere */
	_Atomic unsigned refs; /* the caller, the coordinator and each worker */
	vy_clientcred cred; /* whose write the client's fd gets (out of the mount) */
	uint64_t size;     /* the bytes to copy */
	unsigned threads;  /* asked for (0: one per core) */
	bool complete;     /* the coordinator is done (lock) */
	pthread_mutex_t lock;
	pthread_cond_t ended; /* a worker finished */
	vy_err rc;
	vy_error e;
} run;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void hold(vy_fs *fs, vy_inode *in)
{
	pthread_mutex_lock(&fs->ns);
	in->opens++;
	pthread_mutex_unlock(&fs->ns);
}

/* Drop one reference; the last frees the run and lets the file go. */
static void run_put(run *r)
{
	if (atomic_fetch_sub(&r->refs, 1) != 1)
		return;
	vy_fs *fs = r->fs;
	pthread_mutex_lock(&fs->ns);
	r->in->opens--;
	vy_inode_reap(fs, r->in);
	pthread_mutex_unlock(&fs->ns);
	if (r->set_direct)
		fcntl(r->other, F_SETFL, r->flags);
	vy_clientfd_close(r->other);
	free(r->pieces);
	pthread_cond_destroy(&r->ended);
	pthread_mutex_destroy(&r->lock);
	free(r);
	atomic_fetch_sub(&fs->copy_runs, 1);
}

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

/* Whole reads and writes of the client's fd; a source that shrank reads
 * as zeros. */
static bool io_all(run *r, bool reading, char *buf, uint64_t len, uint64_t off)
{
	uint64_t got = 0;
	atomic_fetch_add(&r->in_client, 1);
	while (got < len && !atomic_load(&r->stop)) {
		ssize_t n = reading ? pread(r->other, buf + got, len - got, (off_t)(off + got))
				    : pwrite(r->other, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (n == 0 && !reading))
			break;
		atomic_store(&r->moved_ns, now_ns());
		if (n == 0) {
			memset(buf + got, 0, len - got);
			got = len;
			break;
		}
		got += (uint64_t)n;
	}
	int err = errno;
	atomic_fetch_sub(&r->in_client, 1);
	errno = err;
	return got >= len;
}

/* The device side of one piece, under the file's lock: the file may have
 * changed since the copy began (a truncate, a punch, a move), so the piece
 * is cut to the file's size and its memory made sure of each time. Pieces
 * go to the device side by side under the read lock (they are disjoint,
 * and writers through the mount take the write lock); only a piece whose
 * memory must be made takes the write lock. */
static vy_err device_side(run *r, piece p, void *staged, vy_error *e)
{
	vy_fs *fs = r->fs;
	vy_inode *in = r->in;
	pthread_rwlock_rdlock(&in->lock);
	uint64_t len = p.off >= in->size ? 0 : in->size - p.off < p.len ? in->size - p.off : p.len;
	/* A write through the mount since the copy began may be gathered:
	 * on the device first, so this piece reads it, or lands after it
	 * (and no kept slot of it outlives this piece's bytes). */
	vy_err rc = vy_wbehind_settle(fs, in, e);
	if (rc == VY_OK && len && r->into && in->holes && !vy_store_backed(vy_fs_core(fs, in)->store, in->buf, p.off, len)) {
		pthread_rwlock_unlock(&in->lock);
		pthread_rwlock_wrlock(&in->lock);
		len = p.off >= in->size ? 0 : in->size - p.off < p.len ? in->size - p.off : p.len;
		if (len)
			rc = vy_file_back(fs, in, p.off, p.off + len, e);
	}
	if (rc == VY_OK && len && vy_fs_core(fs, in) != r->core)
		rc = vy_fail(e, VY_EBUSY, "run the copy again", "the file moved to another device during the copy");
	if (rc == VY_OK && len)
		rc = r->into ? vy_upload_pinned(r->core, in->buf, p.off, staged, len, e)
			     : vy_readback_pinned(r->core, in->buf, p.off, staged, len, e);
	if (!r->into && len < p.len) /* past a shrunk end: zeros */
		memset((char *)staged + len, 0, p.len - len);
	pthread_rwlock_unlock(&in->lock);
	return rc;
}

/* This thread writes the client's fd from now on as the client would. */
static vy_err as_client(run *r, vy_error *e)
{
	int err = vy_clientcred_become(&r->cred);
	if (!err)
		return VY_OK;
	vy_err rc = vy_fail(e, VY_EINVAL, "report this bug (the daemon could not take the client's credentials)",
			    "acting as uid %u to write the destination: %s", (unsigned)r->cred.uid, strerror(err));
	run_fail(r, rc, e);
	return rc;
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
	if (rc == VY_OK && !r->into)
		rc = as_client(r, &e); /* the client's fd is written as she would write it */
	for (size_t i; rc == VY_OK && !atomic_load(&r->stop) && (i = atomic_fetch_add(&r->next, 1)) < r->npieces;) {
		piece p = r->pieces[i];
		if (r->into) {
			/* O_DIRECT reads whole blocks: the tail's length rounded
			 * up (the piece buffer has room), the read stops at EOF. */
			uint64_t want = r->direct ? (p.len + 4095) / 4096 * 4096 : p.len;
			if (!io_all(r, true, sb.ptr, want, p.off))
				rc = vy_fail(&e, VY_EINVAL, "check the source file", "reading the source at %llu: %s",
					     (unsigned long long)p.off, strerror(errno));
			else if (!atomic_load(&r->abandoned)) /* a piece read is a piece written */
				rc = device_side(r, p, sb.ptr, &e);
		} else {
			rc = device_side(r, p, sb.ptr, &e);
			if (rc == VY_OK && !io_all(r, false, sb.ptr, p.len, p.off))
				rc = vy_fail(&e, errno == ENOSPC ? VY_ENOSPC : VY_EINVAL, "check the destination's filesystem",
					     "writing the destination at %llu: %s", (unsigned long long)p.off, strerror(errno));
		}
		if (rc != VY_OK)
			run_fail(r, rc, &e);
		else if (!atomic_load(&r->abandoned))
			atomic_fetch_add(&r->done, p.len);
	}
	if (sb.ptr)
		vy_staging_release(c->staging, &sb);
	pthread_mutex_lock(&r->lock);
	atomic_fetch_add(&r->finished, 1);
	pthread_cond_broadcast(&r->ended);
	pthread_mutex_unlock(&r->lock);
	run_put(r);
	return NULL;
}

/* The data of fd's first `size` bytes (all of it when holes are not
 * looked for), or of the mount's file `in` (its holes and tail skipped;
 * its read lock held), in pieces of at most PIECE aligned to PIECE. The
 * list grows with the data, never with the size (a 1 TiB sparse file
 * plans nothing). */
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
				piece *q = cap <= SIZE_MAX / 2 / sizeof(*p) ? realloc(p, cap * 2 * sizeof(*p)) : NULL;
				if (!q) {
					free(p);
					return vy_fail(e, VY_ENOMEM, "free host memory", "cannot plan the copy");
				}
				p = q;
				cap *= 2;
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

/* Before any client I/O, under the file's lock: every byte written through
 * the mount on the device, no readahead copy left to go stale, and (into
 * the mount) memory behind every run of the source's data. */
static vy_err prepare(run *r, vy_error *e)
{
	vy_fs *fs = r->fs;
	vy_inode *in = r->in;
	/* backing=DIR: every byte of it on the device (what a copy in does
	 * not cover stays DIR's). */
	vy_err rc = vy_backed_prepare(fs, in) ? vy_fail(e, VY_EBUSY, "open the file again", "the file is gone from the "
									      "backing directory")
					      : vy_backed_load_room(fs, in, 0, in->size, e);
	if (rc != VY_OK)
		return rc;
	pthread_rwlock_wrlock(&in->lock);
	rc = vy_backed_whole(fs, in, e);
	if (rc == VY_OK)
		rc = vy_wbehind_settle(fs, in, e);
	if (rc == VY_OK && r->into)
		vy_readahead_forget(in);
	if (rc == VY_OK && r->into && r->size > in->size)
		rc = vy_fail(e, VY_EINVAL, "size the file first (libvyrefs does: ftruncate)",
			     "%llu bytes do not fit the %llu-byte file", (unsigned long long)r->size,
			     (unsigned long long)in->size);
	for (size_t i = 0, j; rc == VY_OK && r->into && i < r->npieces; i = j) {
		for (j = i + 1; j < r->npieces && r->pieces[j].off == r->pieces[j - 1].off + r->pieces[j - 1].len; j++)
			; /* one run of data at a time: one piece of memory */
		rc = vy_file_back(fs, in, r->pieces[i].off, r->pieces[j - 1].off + r->pieces[j - 1].len, e);
	}
	r->core = vy_fs_core(fs, in);
	pthread_rwlock_unlock(&in->lock);
	return rc;
}

/* Start up to r->threads workers (detached, a reference each); how many. */
static unsigned start_workers(run *r)
{
	unsigned threads = r->threads ? r->threads : (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	threads = threads < 1 ? 1 : threads > THREADS_MAX ? THREADS_MAX : threads;
	if (threads > r->npieces)
		threads = (unsigned)r->npieces;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	unsigned started = 0;
	for (; started < threads; started++) {
		pthread_t t;
		atomic_fetch_add(&r->refs, 1);
		if (pthread_create(&t, &attr, worker, r) != 0) {
			atomic_fetch_sub(&r->refs, 1);
			break;
		}
	}
	pthread_attr_destroy(&attr);
	return started;
}

/* The copy itself, in a thread of the run's own: plan from the client's
 * fd, prepare the file, run the workers and wait for them. */
static void *coordinate(void *arg)
{
	run *r = arg;
	pthread_setname_np(pthread_self(), "vy-copy");
	vy_error e;
	vy_err rc = VY_OK;
	if (r->size > 0 && r->into) { /* the client's file: SEEK_DATA may stall */
		atomic_fetch_add(&r->in_client, 1);
		rc = pieces_of(r->fs, NULL, r->other, r->size, true, &r->pieces, &r->npieces, &e);
		atomic_fetch_sub(&r->in_client, 1);
	} else if (r->size > 0) { /* the mount's file: its holes, under its lock */
		/* backing=DIR: loaded first, or its units not loaded look like holes */
		if (r->in->tier)
			rc = vy_backed_prepare(r->fs, r->in) ? vy_fail(&e, VY_EBUSY, "open the file again",
								       "the file is gone from the backing directory")
							     : vy_backed_load_room(r->fs, r->in, 0, r->in->size, &e);
		pthread_rwlock_rdlock(&r->in->lock);
		if (rc == VY_OK && !vy_backed_present(r->in, 0, r->in->size))
			rc = vy_fail(&e, VY_EBUSY, "run the copy again", "the file's bytes went back while the copy began");
		if (rc == VY_OK)
			rc = pieces_of(r->fs, r->in, r->other, r->size, false, &r->pieces, &r->npieces, &e);
		pthread_rwlock_unlock(&r->in->lock);
	}
	atomic_store(&r->moved_ns, now_ns());
	if (rc == VY_OK && !atomic_load(&r->stop))
		rc = prepare(r, &e);
	/* Read a source with O_DIRECT where its filesystem takes it, so a
	 * large copy does not push the host's page cache out (pieces and
	 * staging buffers are aligned). Its flags are put back when the
	 * run's last thread is done with it. */
	r->flags = r->into ? fcntl(r->other, F_GETFL) : -1;
	if (r->flags >= 0 && !(r->flags & O_DIRECT) && fcntl(r->other, F_SETFL, r->flags | O_DIRECT) == 0)
		r->set_direct = true;
	/* O_DIRECT however it came (the flags are the client's open file's:
	 * a daemon that died in a copy left it set for its successor's retry,
	 * issue "survive 2" item 8b): every read is then of whole blocks. */
	r->direct = r->set_direct || (r->flags >= 0 && (r->flags & O_DIRECT));
	unsigned started = 0;
	if (rc == VY_OK && r->npieces && !atomic_load(&r->stop)) {
		started = start_workers(r);
		if (!started)
			rc = vy_fail(&e, VY_ENOMEM, "free host memory", "cannot start a copy thread");
	}
	if (rc != VY_OK)
		run_fail(r, rc, &e);
	pthread_mutex_lock(&r->lock);
	while (atomic_load(&r->finished) < started)
		pthread_cond_wait(&r->ended, &r->lock);
	bool sized = rc == VY_OK && r->rc == VY_OK && !atomic_load(&r->stop);
	pthread_mutex_unlock(&r->lock);
	if (r->into && started) { /* backing=DIR: what the pieces wrote goes back */
		pthread_rwlock_wrlock(&r->in->lock);
		vy_backed_wrote(r->fs, r->in, 0, r->size < r->in->size ? r->size : r->in->size);
		pthread_rwlock_unlock(&r->in->lock);
	}
	/* Out of the mount, only data was written: the holes and the tail
	 * are the destination's size. */
	if (sized && !r->into && as_client(r, &e) == VY_OK) {
		atomic_fetch_add(&r->in_client, 1);
		if (ftruncate(r->other, (off_t)r->size) != 0) {
			vy_fail(&e, VY_EINVAL, "check the destination's filesystem", "sizing the destination to %llu bytes: %s",
				(unsigned long long)r->size, strerror(errno));
			run_fail(r, VY_EINVAL, &e);
		}
		atomic_fetch_sub(&r->in_client, 1);
	}
	pthread_mutex_lock(&r->lock);
	r->complete = true;
	pthread_cond_broadcast(&r->ended);
	pthread_mutex_unlock(&r->lock);
	run_put(r);
	return NULL;
}

/* Wait for the copy, reporting progress; stop it when its client goes
 * away or the server stops (each worker ends its piece, then stops), and
 * abandon it when the client's fd moves no byte for STALL_MS. True when
 * it stalled. */
static bool wait_copy(run *r, const vy_copysrv_job *job)
{
	bool stalled = false;
	pthread_mutex_lock(&r->lock);
	while (!r->complete) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_cond_timedwait(&r->ended, &r->lock, &ts) != ETIMEDOUT)
			continue;
		pthread_mutex_unlock(&r->lock);
		if (job->tick && job->tick(job->ctx, atomic_load(&r->done), r->size))
			atomic_store(&r->stop, true);
		uint64_t still = now_ns() - atomic_load(&r->moved_ns);
		if (atomic_load(&r->in_client) && still > (uint64_t)STALL_MS * 1000000u) {
			atomic_store(&r->abandoned, true);
			atomic_store(&r->stop, true);
			stalled = true;
		}
		pthread_mutex_lock(&r->lock);
		/* Stalled: answer now; a thread stuck in the client's fd ends on
		 * its own. Stopped (the client went, or unmounting): the pieces
		 * in flight end, then the workers (a stall is still caught). */
		if (stalled)
			break;
	}
	pthread_mutex_unlock(&r->lock);
	return stalled;
}

static bool cred_in_group(void *ctx)
{
	const vy_clientcred *c = ((const void **)ctx)[0];
	const vy_inode *in = ((const void **)ctx)[1];
	return vy_clientcred_in_group(c, in->gid);
}

/* A copy into the mount's file changes its bytes as the client's write(2)
 * would: set-id bits go by the kernel's rule, file capabilities go, and
 * the kernel's cached mode with them, before any byte lands. */
static void lose_set_id(vy_fs *fs, vy_inode *in, const vy_clientcred *c)
{
	const void *ctx[2] = {c, in};
	pthread_rwlock_wrlock(&in->lock);
	vy_op_kill_caps(fs, in);
	pthread_mutex_lock(&in->meta);
	mode_t was = in->mode;
	in->mode = vy_mode_kill_suid(in->mode, c->uid == 0, false, cred_in_group, (void *)ctx);
	bool changed = in->mode != was;
	pthread_mutex_unlock(&in->meta);
	pthread_rwlock_unlock(&in->lock);
	if (!changed)
		return;
	vy_persist_inode(fs, in);
	if (fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, in->ino, -1, 0);
}

vy_err vy_copysrv_run(vy_fs *fs, const vy_copysrv_job *job, uint64_t *done, uint64_t *total, vy_error *e)
{
	*done = 0;
	*total = 0;
	run *r = calloc(1, sizeof(*r));
	if (!r) {
		vy_clientfd_close(job->other);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot start a copy");
	}
	*r = (run){.fs = fs,
		   .in = job->in,
		   .into = job->into,
		   .other = job->other, /* the run's now */
		   .threads = job->threads,
		   .cred = *job->cred,
		   .refs = 1};
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->ended, NULL);
	atomic_fetch_add(&fs->copy_runs, 1);
	hold(fs, r->in);
	pthread_rwlock_rdlock(&job->in->lock);
	r->size = job->into ? job->size : job->in->size;
	pthread_rwlock_unlock(&job->in->lock);
	*total = r->size;
	if (job->into && r->size)
		lose_set_id(fs, job->in, job->cred);
	atomic_store(&r->moved_ns, now_ns());
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	atomic_fetch_add(&r->refs, 1);
	vy_err rc = VY_OK;
	if (pthread_create(&t, &attr, coordinate, r) != 0) {
		atomic_fetch_sub(&r->refs, 1);
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot start a copy thread");
	}
	pthread_attr_destroy(&attr);
	bool stalled = rc == VY_OK && wait_copy(r, job);
	pthread_mutex_lock(&r->lock);
	if (stalled)
		rc = vy_fail(e, VY_ETIMEDOUT, "check the other file: its filesystem did not answer",
			     "the copy was abandoned: the other file's descriptor moved no byte in %d s", STALL_MS / 1000);
	else if (rc == VY_OK && r->rc != VY_OK) {
		rc = r->rc;
		*e = r->e;
	} else if (rc == VY_OK && atomic_load(&r->stop)) {
		rc = vy_fail(e, VY_EINVAL, "run the copy again", "the copy was stopped: its client went away");
	}
	pthread_mutex_unlock(&r->lock);
	if (stalled)
		vy_telemetry_add(vy_fs_core(fs, job->in)->tel, copy_timeouts, 1);
	*done = atomic_load(&r->done);
	if (job->into && *done) {
		pthread_rwlock_wrlock(&job->in->lock);
		job->in->written = true;
		vy_readahead_forget(job->in); /* reads during the copy may have cached old bytes */
		pthread_rwlock_unlock(&job->in->lock);
		vy_inode_touch(job->in, true);
		vy_persist_inode(fs, job->in);
		if (fs->se) /* the kernel may hold pages of the old bytes */
			fuse_lowlevel_notify_inval_inode(fs->se, job->in->ino, 0, 0);
	}
	run_put(r);
	return rc;
}

bool vy_copysrv_quiet(vy_fs *fs, int wait_ms)
{
	for (int waited = 0; atomic_load(&fs->copy_runs) && waited < wait_ms; waited += 10)
		usleep(10000);
	return atomic_load(&fs->copy_runs) == 0;
}
