/* vy_copy_file: files into and out of a vyrefs mount around FUSE. Into a
 * mount the destination is created through the mount and given its size;
 * then the daemon (sock/copysrv.c) reads the source through the fd passed to
 * it, with threads, pinned memory it keeps and its own streams, and copies
 * to the device. Out of a mount the reverse. FUSE's one request at a time
 * (about 1 GB/s) is not in the way, and this process needs no CUDA context
 * (starting one costs more than copying a few GiB). */
#include "client/mapping.h"
#include "core/place.h"
#include "proto/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define THREADS_MAX 16
#define TAKEOVERS_MAX 8 /* daemons that may die under one copy (survive=on) before it fails */

/* One try of daemon_copy, on a connection `c` to a daemon (closed here). */
static int copy_on(vy_client_conn *c, int mount_fd, int other_fd, bool into, uint64_t size, int threads,
		   void (*progress)(uint64_t, uint64_t, void *), void *ctx, bool *asked)
{
	int rc;
	/* The other file is this process's, not the mount's: only a daemon
	 * with no less than our authority over it (root's, or our own uid's)
	 * gets its fd. A mount another user made is copied the plain way. */
	if (c->uid != 0 && c->uid != geteuid()) {
		rc = vy_client_fail(EPERM, "vyrefs: the daemon of %s runs as uid %u, neither root nor you (uid %u): it is "
					   "not given your file, so the copy went through the mount (Fix: none needed; to "
					   "copy around FUSE, copy as uid %u or use a mount of your own or root's)",
				    c->root, (unsigned)c->uid, (unsigned)geteuid(), (unsigned)c->uid);
		vy_client_close(c);
		return rc;
	}
	vy_msg r;
	vy_hello_in hello = {.major = VY_PROTO_MAJOR, .minor = VY_PROTO_MINOR};
	rc = vy_client_call(c, VY_OP_CLIENT_HELLO, &hello, sizeof(hello), NULL, 0, sizeof(vy_client_hello_out), NULL,
			    NULL, &r);
	if (!rc) {
		vy_msg_free(&r);
		*asked = true;
		vy_client_copy_in in = {.direction = into ? VY_COPY_INTO : VY_COPY_OUT,
					.threads = threads > 0 ? (uint32_t)threads : 0,
					.size = size};
		int fds[2] = {mount_fd, other_fd};
		rc = vy_client_call(c, VY_OP_CLIENT_COPY, &in, sizeof(in), fds, 2, sizeof(vy_client_copy_out), progress,
				    ctx, &r);
		if (!rc) {
			vy_client_copy_out out;
			memcpy(&out, r.body, sizeof(out));
			if (progress)
				progress(out.done, out.total, ctx);
			vy_msg_free(&r);
		}
	}
	vy_client_close(c);
	return rc;
}

/* The daemon copies: between the mount's file (fd 0) and the other (fd 1),
 * with its threads, pinned memory and streams; progress comes meanwhile.
 * *asked is false when the daemon was not asked (an old mount, or one
 * whose daemon is not to be given this process's file). A daemon that dies
 * under the copy (survive=on): the copy waits for its successor, as a FUSE
 * request does (client/daemon.c), and starts again, whole, with it (every
 * byte is written again: no part of the file is trusted to a daemon that
 * did not answer for it). */
static int daemon_copy(const char *mount_path, int mount_fd, int other_fd, bool into, uint64_t size, int threads,
		       void (*progress)(uint64_t, uint64_t, void *), void *ctx, bool *asked)
{
	struct stat st;
	*asked = false;
	if (fstat(mount_fd, &st) != 0)
		return vy_client_fail(errno, "vyrefs: fstat: %s", strerror(errno));
	vy_client_conn c = {.sock = -1};
	int rc = vy_client_connect(mount_path, st.st_dev, &c);
	pid_t dead = c.pid;
	if (!rc)
		rc = copy_on(&c, mount_fd, other_fd, into, size, threads, progress, ctx, asked);
	for (int takeovers = 0; rc == -ECONNRESET && *asked && takeovers < TAKEOVERS_MAX; takeovers++) {
		char why[VY_ERROR_MSG_MAX + 128];
		snprintf(why, sizeof(why), "%s", vy_last_error());
		bool died;
		rc = vy_client_connect_successor(mount_path, st.st_dev, dead, &c, &died);
		if (!died) { /* it lives: not a takeover, and what it did is the answer */
			rc = vy_client_fail(ECONNRESET, "%s", why);
			break;
		}
		if (rc)
			break;
		dead = c.pid;
		rc = copy_on(&c, mount_fd, other_fd, into, size, threads, progress, ctx, asked);
	}
	return rc;
}

mode_t vy_client_umask(void)
{
	/* /proc/self/status has it since Linux 4.7; umask(2) twice otherwise. */
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	unsigned mask;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Umask: %o", &mask) == 1) {
			fclose(f);
			return (mode_t)(mask & 0777);
		}
	if (f)
		fclose(f);
	mode_t old = umask(022);
	umask(old);
	return old;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whole writes, EINTR and short counts taken care of. */
static bool write_all(int fd, const char *buf, uint64_t len, uint64_t off)
{
	for (uint64_t got = 0; got < len;) {
		ssize_t n = pwrite(fd, buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		got += (uint64_t)n;
	}
	return true;
}

/* Whether fd's file is on a vyrefs mount whose root this process sees
 * (client/mountinfo.c); if not, vy_last_error says why when it is on one. */
static bool on_vyrefs(const char *path, int fd)
{
	struct stat st;
	vy_client_mount m;
	bool is_vyrefs = false;
	char why[VY_ERROR_MSG_MAX + 128];
	snprintf(why, sizeof(why), "%s", vy_last_error());
	if (fstat(fd, &st) == 0 && vy_client_mount_root(path, st.st_dev, &m, &is_vyrefs) == 0)
		return true;
	if (!is_vyrefs) /* no news: keep what the other side said */
		vy_client_fail(0, "%s", why);
	return false;
}

/* Progress at most every 0.2 s. */
static void tick(void (*progress)(uint64_t, uint64_t, void *), void *ctx, uint64_t done, uint64_t total, double *last)
{
	if (progress && now_s() - *last > 0.2) {
		progress(done, total, ctx);
		*last = now_s();
	}
}

static int plain_copy(int in, int out, uint64_t total, void (*progress)(uint64_t, uint64_t, void *), void *ctx,
		      bool kernel_copy)
{
	uint64_t done = 0;
	double last = 0;
	if (kernel_copy) {
		for (;;) {
			ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				return vy_client_fail(errno, "vyrefs: copying: %s", strerror(errno));
			if (n == 0)
				break;
			done += (uint64_t)n;
			tick(progress, ctx, done, total, &last);
		}
		if (progress)
			progress(done, total, ctx);
		return 0;
	}
	char *buf = malloc(1 << 20);
	if (!buf)
		return vy_client_fail(ENOMEM, "vyrefs: out of memory");
	/* The source's data only (SEEK_DATA), each at its offset: its holes
	 * stay holes, as cp's --sparse=auto keeps them; the size last. */
	int err = 0;
	for (uint64_t off = 0; off < total && !err;) {
		off_t d = lseek(in, (off_t)off, SEEK_DATA);
		if (d < 0 && errno == ENXIO)
			break; /* a hole to the end */
		if (d < 0)
			d = (off_t)off; /* no SEEK_DATA here: every byte */
		off_t h = lseek(in, d, SEEK_HOLE);
		uint64_t end = h < 0 || (uint64_t)h > total ? total : (uint64_t)h;
		for (uint64_t at = (uint64_t)d; at < end;) {
			uint64_t want = end - at < (1u << 20) ? end - at : (1u << 20);
			ssize_t n = pread(in, buf, want, (off_t)at);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0 || !write_all(out, buf, (uint64_t)n, at)) {
				err = n == 0 ? EIO : errno; /* the source shrank under the copy, or an error */
				break;
			}
			at += (uint64_t)n;
			done += (uint64_t)n;
			tick(progress, ctx, done, total, &last);
		}
		off = end > (uint64_t)d ? end : (uint64_t)d + 1;
	}
	free(buf);
	if (!err && ftruncate(out, (off_t)total) != 0)
		err = errno;
	if (err)
		return vy_client_fail(err, "vyrefs: copying: %s", strerror(err));
	if (progress)
		progress(done, total, ctx);
	return 0;
}

/* A source of a format the mount places (core/place.h): its first bytes
 * through the mount before the file is sized, so the mount places it from
 * them as it does a file written from its start (a sized file already has
 * its memory). Other files cost nothing more. */
static int first_bytes(int in, int out, const char *dst)
{
	uint8_t head[VY_PLACE_HEAD];
	ssize_t n = pread(in, head, sizeof(head), 0);
	if (n < 0)
		return vy_client_fail(errno, "vyrefs: cannot read the source: %s", strerror(errno));
	if (n != (ssize_t)sizeof(head) || vy_place_lead(head) == 0)
		return 0;
	errno = 0;
	if (pwrite(out, head, sizeof(head), 0) != (ssize_t)sizeof(head))
		return vy_client_fail(errno ? errno : EIO, "vyrefs: cannot write '%s': %s", dst, strerror(errno ? errno : EIO));
	return 0;
}

API int vy_copy_file(const char *src, const char *dst, int threads, void (*progress)(uint64_t, uint64_t, void *), void *ctx,
		int *how)
{
	if (!src || !dst)
		return vy_client_fail(EINVAL, "vyrefs: vy_copy_file needs a source and a destination");
	if (threads > THREADS_MAX)
		threads = THREADS_MAX; /* 0: the daemon's choice, one per core */
	int in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return vy_client_fail(errno, "vyrefs: cannot open '%s': %s", src, strerror(errno));
	struct stat st;
	if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(in);
		return vy_client_fail(EINVAL, "vyrefs: '%s' is not a regular file (Fix: copy directories with -r)", src);
	}
	/* A file made here is ours alone until the end (the daemon writes it
	 * through our fd), then gets src's permission bits less the umask, as
	 * cp's: never setuid, setgid or sticky. An existing file keeps its
	 * mode. (-p's owner and mode are client/cp.c's.) */
	bool made = true;
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0 && errno == EEXIST) {
		made = false;
		out = open(dst, O_WRONLY | O_TRUNC | O_CLOEXEC);
	}
	if (out < 0) {
		int err = errno;
		close(in);
		return vy_client_fail(err, "vyrefs: cannot create '%s': %s", dst, strerror(err));
	}
	struct stat dt;
	uint64_t size = (uint64_t)st.st_size;
	vy_client_fail(0, "%s", ""); /* -v's "plain copy: WHY" */
	bool src_mount = on_vyrefs(src, in), dst_mount = on_vyrefs(dst, out);
	int rc = 0, way = VY_COPY_PLAIN;
	if (fstat(out, &dt) == 0 && dt.st_dev == st.st_dev && dst_mount) {
		way = VY_COPY_IN_MOUNT;
		rc = plain_copy(in, out, size, progress, ctx, true);
	} else if (size && (dst_mount || src_mount)) {
		/* The daemon moves the bytes; the destination on the mount is
		 * sized first, so the copy lands in memory it already has. */
		bool asked = false;
		if (dst_mount)
			rc = first_bytes(in, out, dst);
		if (!rc && dst_mount && ftruncate(out, (off_t)size) != 0)
			rc = vy_client_fail(errno, "vyrefs: cannot size '%s': %s", dst, strerror(errno));
		if (!rc)
			rc = daemon_copy(dst_mount ? dst : src, dst_mount ? out : in, dst_mount ? in : out, dst_mount, size,
					 threads, progress, ctx, &asked);
		if (!rc) {
			way = VY_COPY_DAEMON;
		} else if (asked && rc != -EXDEV) {
			/* Part of the bytes at the whole size would look
			 * complete; empty, it does not. */
			char why[VY_ERROR_MSG_MAX + 128];
			snprintf(why, sizeof(why), "%s", vy_last_error());
			if (ftruncate(out, 0) != 0)
				vy_client_fail(-rc, "%s; '%s' holds part of its bytes (Fix: remove it)", why, dst);
		} else {
			/* No daemon to ask (an old mount), or one that cannot
			 * see the other file's filesystem (EXDEV: a chroot's
			 * root is not in its mountinfo): the plain way, as cp
			 * after copy_file_range's EXDEV; vy_last_error says why. */
			char why[VY_ERROR_MSG_MAX + 128];
			snprintf(why, sizeof(why), "%s", vy_last_error());
			if (lseek(in, 0, SEEK_SET) == 0 && ftruncate(out, 0) == 0)
				rc = plain_copy(in, out, size, progress, ctx, false);
			if (!rc)
				vy_client_fail(0, "%s", why);
		}
	} else if (size) {
		rc = plain_copy(in, out, size, progress, ctx, false);
	}
	if (!rc && made && fchmod(out, st.st_mode & 0777 & ~vy_client_umask()) != 0)
		rc = vy_client_fail(errno, "vyrefs: cannot set the mode of '%s': %s", dst, strerror(errno));
	if (close(out) != 0 && !rc)
		rc = vy_client_fail(errno, "vyrefs: closing '%s': %s", dst, strerror(errno));
	if (rc && made)
		unlink(dst); /* a file this copy made and could not fill: nothing is left */
	close(in);
	if (how)
		*how = way;
	return rc;
}
