/* vy_copy_file: files into and out of a vyrefs mount around FUSE. Into a mount:
 * the destination is created through the mount, given its size, mapped
 * (libvyrefs), and filled by threads that read the source into pinned
 * buffers while asynchronous copies move the previous buffer to the device.
 * Out of a mount the same in reverse. FUSE's one-request-at-a-time write
 * path (about 1 GB/s) is not in the way. */
#include "client/mapping.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define CHUNK (16u << 20) /* one read and one copy; two per thread in flight */
#define THREADS_MAX 16

typedef struct piece {
	uint64_t off, len;
} piece;

typedef struct job {
	bool in;          /* into the mount (else out of it) */
	int fd, fd_direct; /* the file on the other side; fd_direct -1 if none */
	vy_device *dev;
	vy_dptr base;
	piece *pieces;
	size_t npieces;
	_Atomic size_t next;
	_Atomic uint64_t done;
	_Atomic unsigned finished;
	pthread_mutex_t lock;
	int rc; /* the first failure (-errno), its message in vy_last_error of the caller */
	char msg[600];
} job;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void job_fail(job *j, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void job_fail(job *j, int err, const char *fmt, ...)
{
	pthread_mutex_lock(&j->lock);
	if (!j->rc) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
		va_end(ap);
		j->rc = -err;
	}
	pthread_mutex_unlock(&j->lock);
}

static bool failed(job *j)
{
	pthread_mutex_lock(&j->lock);
	bool f = j->rc != 0;
	pthread_mutex_unlock(&j->lock);
	return f;
}

/* Whole reads and writes, EINTR and short counts taken care of. */
static ssize_t io_all(bool reading, int fd, char *buf, uint64_t len, uint64_t off)
{
	uint64_t got = 0;
	while (got < len) {
		ssize_t n = reading ? pread(fd, buf + got, len - got, (off_t)(off + got))
				    : pwrite(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) { /* the source shrank: the rest reads as zeros */
			memset(buf + got, 0, len - got);
			break;
		}
		got += (uint64_t)n;
	}
	return (ssize_t)len;
}

static void *worker(void *arg)
{
	job *j = arg;
	vy_device *d = j->dev;
	vy_error e;
	vy_stream *s = NULL;
	void *buf[2] = {NULL, NULL};
	bool pending = false;
	int k = 0;
	if (d->ops->stream_create(d, &s, &e) != VY_OK || d->ops->host_alloc(d, CHUNK, &buf[0], &e) != VY_OK ||
	    d->ops->host_alloc(d, CHUNK, &buf[1], &e) != VY_OK) {
		job_fail(j, ENOMEM, "vyrefs: cannot set up a copy thread: %s", e.msg);
		goto out;
	}
	for (size_t i; !failed(j) && (i = atomic_fetch_add(&j->next, 1)) < j->npieces;) {
		piece p = j->pieces[i];
		if (j->in) {
			/* The other buffer's copy may still run; this one's is done
			 * once the stream has caught up to it. */
			if (pending && d->ops->stream_sync(d, s, &e) != VY_OK) {
				job_fail(j, EIO, "vyrefs: %s", e.msg);
				break;
			}
			bool direct = j->fd_direct >= 0 && p.off % 4096 == 0 && p.len % 4096 == 0;
			if (io_all(true, direct ? j->fd_direct : j->fd, buf[k], p.len, p.off) < 0) {
				job_fail(j, errno, "vyrefs: reading the source at %llu: %s", (unsigned long long)p.off,
					 strerror(errno));
				break;
			}
			if (d->ops->copy_htod(d, s, j->base + p.off, buf[k], p.len, &e) != VY_OK) {
				job_fail(j, EIO, "vyrefs: %s", e.msg);
				break;
			}
			pending = true;
			k ^= 1;
		} else {
			if (d->ops->copy_dtoh(d, s, buf[0], j->base + p.off, p.len, &e) != VY_OK ||
			    d->ops->stream_sync(d, s, &e) != VY_OK) {
				job_fail(j, EIO, "vyrefs: %s", e.msg);
				break;
			}
			if (io_all(false, j->fd, buf[0], p.len, p.off) < 0) {
				job_fail(j, errno, "vyrefs: writing the destination at %llu: %s", (unsigned long long)p.off,
					 strerror(errno));
				break;
			}
		}
		atomic_fetch_add(&j->done, p.len);
	}
	if (s && d->ops->stream_sync(d, s, &e) != VY_OK)
		job_fail(j, EIO, "vyrefs: %s", e.msg);
out:
	for (int b = 0; b < 2; b++)
		if (buf[b])
			d->ops->host_free(d, buf[b], NULL);
	if (s)
		d->ops->stream_destroy(d, s, NULL);
	atomic_fetch_add(&j->finished, 1);
	return NULL;
}

/* The data of fd's first `size` bytes in pieces of at most CHUNK, aligned
 * to CHUNK; holes (SEEK_HOLE) left out. */
static int pieces_of(int fd, uint64_t size, bool skip_holes, piece **out, size_t *n)
{
	size_t cap = size / CHUNK + 16, count = 0;
	piece *p = malloc(cap * sizeof(*p));
	if (!p)
		return vy_client_fail(ENOMEM, "vyrefs: out of memory");
	uint64_t off = 0;
	while (off < size) {
		uint64_t data = off, hole = size;
		if (skip_holes) {
			off_t d = lseek(fd, (off_t)off, SEEK_DATA);
			if (d < 0 && errno == ENXIO)
				break; /* a hole to the end */
			if (d >= 0) {
				off_t h = lseek(fd, d, SEEK_HOLE);
				data = (uint64_t)d;
				hole = h > d && (uint64_t)h < size ? (uint64_t)h : size;
			}
		}
		for (uint64_t at = data; at < hole;) {
			uint64_t end = (at / CHUNK + 1) * CHUNK;
			if (end > hole)
				end = hole;
			if (count == cap) {
				piece *q = realloc(p, (cap *= 2) * sizeof(*p));
				if (!q) {
					free(p);
					return vy_client_fail(ENOMEM, "vyrefs: out of memory");
				}
				p = q;
			}
			p[count++] = (piece){at, end - at};
			at = end;
		}
		off = hole;
	}
	*out = p;
	*n = count;
	return 0;
}

static int threads_default(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > THREADS_MAX ? THREADS_MAX : (int)n;
}

/* Run `threads` workers over the pieces, reporting progress meanwhile. */
static int run_job(job *j, int threads, uint64_t total, void (*progress)(uint64_t, uint64_t, void *), void *ctx)
{
	pthread_t t[THREADS_MAX];
	int started = 0;
	for (; started < threads; started++)
		if (pthread_create(&t[started], NULL, worker, j) != 0)
			break;
	if (!started)
		return vy_client_fail(EAGAIN, "vyrefs: cannot start a copy thread");
	double last = 0;
	while (atomic_load(&j->finished) < (unsigned)started) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
		if (progress && now_s() - last > 0.2) {
			progress(atomic_load(&j->done), total, ctx);
			last = now_s();
		}
	}
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	if (progress)
		progress(atomic_load(&j->done), total, ctx);
	if (j->rc)
		return vy_client_fail(-j->rc, "%s", j->msg);
	return 0;
}

/* Whether fd's file is on a vyrefs mount that maps files. */
static bool on_vyrefs(const char *path, int fd)
{
	struct stat st;
	char root[4096], sock[4200];
	if (fstat(fd, &st) != 0 || vy_client_mount_root(path, st.st_dev, root, sizeof(root)) != 0)
		return false;
	snprintf(sock, sizeof(sock), "%s/.vyre/socket", strcmp(root, "/") ? root : "");
	struct stat ss;
	return stat(sock, &ss) == 0 && ss.st_dev == st.st_dev;
}

static int plain_copy(int in, int out, uint64_t total, void (*progress)(uint64_t, uint64_t, void *), void *ctx,
		      bool kernel_copy)
{
	uint64_t done = 0;
	char *buf = kernel_copy ? NULL : malloc(1 << 20);
	if (!kernel_copy && !buf)
		return vy_client_fail(ENOMEM, "vyrefs: out of memory");
	double last = 0;
	for (;;) {
		ssize_t n;
		if (kernel_copy) {
			n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		} else {
			n = read(in, buf, 1 << 20);
			if (n > 0 && io_all(false, out, buf, (uint64_t)n, done) < 0)
				n = -1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int err = errno;
			free(buf);
			return vy_client_fail(err, "vyrefs: copying: %s", strerror(err));
		}
		if (n == 0)
			break;
		done += (uint64_t)n;
		if (progress && now_s() - last > 0.2) {
			progress(done, total, ctx);
			last = now_s();
		}
	}
	free(buf);
	if (progress)
		progress(done, total, ctx);
	return 0;
}

API int vy_copy_file(const char *src, const char *dst, int threads, void (*progress)(uint64_t, uint64_t, void *), void *ctx,
		int *how)
{
	if (!src || !dst)
		return vy_client_fail(EINVAL, "vyrefs: vy_copy_file needs a source and a destination");
	if (threads <= 0)
		threads = threads_default();
	if (threads > THREADS_MAX)
		threads = THREADS_MAX;
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return vy_client_fail(errno, "vyrefs: cannot open '%s': %s", src, strerror(errno));
	struct stat st;
	if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(in);
		return vy_client_fail(EINVAL, "vyrefs: '%s' is not a regular file (Fix: copy directories with -r)", src);
	}
	/* Writable by us until the end (a mapping opens it for writing); its
	 * own mode comes last. */
	int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		int err = errno;
		close(in);
		return vy_client_fail(err, "vyrefs: cannot create '%s': %s", dst, strerror(err));
	}
	struct stat dt;
	uint64_t size = (uint64_t)st.st_size;
	bool src_mount = on_vyrefs(src, in), dst_mount = on_vyrefs(dst, out);
	int rc = 0, way = VY_COPY_PLAIN;
	vy_mapping *m = NULL;
	if (fstat(out, &dt) == 0 && dt.st_dev == st.st_dev && dst_mount) {
		way = VY_COPY_IN_MOUNT;
		rc = plain_copy(in, out, size, progress, ctx, true);
	} else if (size && (dst_mount || src_mount)) {
		job j = {.in = dst_mount, .fd = dst_mount ? in : out, .fd_direct = -1};
		if (dst_mount && ftruncate(out, (off_t)size) != 0)
			rc = vy_client_fail(errno, "vyrefs: cannot size '%s': %s", dst, strerror(errno));
		if (!rc && !dst_mount && ftruncate(out, (off_t)size) != 0)
			rc = vy_client_fail(errno, "vyrefs: cannot size '%s': %s", dst, strerror(errno));
		if (!rc && vy_map(dst_mount ? dst : src, 0, &m) == 0) {
			way = VY_COPY_MAPPED;
			if (dst_mount)
				j.fd_direct = open(src, O_RDONLY | O_DIRECT | O_CLOEXEC);
			j.dev = vy_mapping_dev(m);
			j.base = vy_mapping_ptr(m);
			pthread_mutex_init(&j.lock, NULL);
			rc = pieces_of(in, size, dst_mount, &j.pieces, &j.npieces);
			if (!rc)
				rc = run_job(&j, threads, size, progress, ctx);
			free(j.pieces);
			if (j.fd_direct >= 0)
				close(j.fd_direct);
			pthread_mutex_destroy(&j.lock);
			int u = vy_unmap(m); /* syncs, and drops the mount's cached pages */
			if (!rc)
				rc = u;
		} else if (!rc) {
			/* No mapping (no write access to the mount's file, an old
			 * mount): the plain way, which vy_last_error says why. */
			rc = plain_copy(in, out, size, progress, ctx, false);
		}
	} else if (size) {
		rc = plain_copy(in, out, size, progress, ctx, false);
	}
	if (!rc && fchmod(out, st.st_mode & 07777) != 0)
		rc = vy_client_fail(errno, "vyrefs: cannot set the mode of '%s': %s", dst, strerror(errno));
	if (close(out) != 0 && !rc)
		rc = vy_client_fail(errno, "vyrefs: closing '%s': %s", dst, strerror(errno));
	close(in);
	if (how)
		*how = way;
	return rc;
}
