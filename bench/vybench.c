/* bench/vybench: the small timed loops the bench script needs, the same code
 * for vyrefs, the null FUSE fs and tmpfs. Each prints `value` lines the
 * script names.
 *   vybench rtt FILE N          median µs of a 1-byte pwrite (a write round trip)
 *   vybench ctl CTL N TEXT      median µs of write(TEXT) + read of the reply, N times
 *   vybench ctlw CTL N TEXT     median µs of write(TEXT) alone: it returns once
 *                               the sequence ran, its status the outcome
 *   vybench churn DIR N SIZE    ops/s of create, ftruncate SIZE, close, unlink
 *   vybench opens FILE N        median µs of open(O_RDONLY) + close of FILE
 *                               (made with 4 KiB when missing): a handle's
 *                               whole life, the small-file workload's cost
 *   vybench readdir DIR N       median µs of opendir, readdir to the end and
 *                               closedir of DIR (its entries as they are)
 *   vybench append FILE BS      append BS-byte writes until the fs is full:
 *                               "BYTES FIRST LAST": bytes written, and µs per
 *                               MiB in the first and the last tenth of them
 *   vybench copy SRC DST        GB/s of copy_file_range from SRC into a new
 *                               DST (as many calls as the fs takes) and an
 *                               fsync of DST; an fs that refuses the call is
 *                               an error, not a read and write as in cp
 *   vybench copyinto SRC DST    the same into DST as it is, from its start,
 *                               not truncated (a file that has its memory)
 *   vybench move FILE DEVICE    GB/s of setting FILE's user.vyre.device to
 *                               DEVICE (the fs moves its bytes there), then
 *                               an fsync of it; the xattr read back must
 *                               name DEVICE
 * Any failure exits 1 with what failed. */
#include "bench/timing.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static void die(const char *what, const char *path)
{
	fprintf(stderr, "vybench: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static long count_arg(const char *s)
{
	char *end;
	errno = 0;
	long n = strtol(s, &end, 10);
	if (errno || *end || n < 1 || n > 100000000) {
		fprintf(stderr, "vybench: bad count %s (Fix: a whole number from 1)\n", s);
		exit(2);
	}
	return n;
}

static double *samples(long n)
{
	double *v = malloc((size_t)n * sizeof(*v));
	if (!v) {
		fprintf(stderr, "vybench: out of memory\n");
		exit(1);
	}
	return v;
}

static void write_all(int fd, const char *text, const char *path)
{
	size_t len = strlen(text);
	ssize_t n = write(fd, text, len);
	if (n != (ssize_t)len)
		die("write to", path);
}

/* The reply of the last sequence written through fd; exits unless "ok". */
static void read_reply(int fd, const char *path, char *reply, size_t cap)
{
	ssize_t n = read(fd, reply, cap - 1);
	if (n < 0)
		die("read of", path);
	reply[n] = 0;
	if (strncmp(reply, "ok", 2)) {
		fprintf(stderr, "vybench: %s replied: %s\n", path, reply);
		exit(1);
	}
}

static int rtt(const char *path, long n)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		die("open", path);
	double *v = samples(n);
	for (long i = 0; i < n; i++) {
		double t0 = now_us();
		if (pwrite(fd, "x", 1, 0) != 1)
			die("pwrite to", path);
		v[i] = now_us() - t0;
	}
	printf("%.2f\n", median(v, (size_t)n));
	free(v);
	return close(fd) ? (die("close", path), 1) : 0;
}

static int ctl(const char *path, long n, const char *text, int read_reply_too)
{
	int fd = open(path, O_RDWR);
	if (fd < 0)
		die("open", path);
	double *v = samples(n);
	char reply[4096];
	for (long i = 0; i < n; i++) {
		double t0 = now_us();
		write_all(fd, text, path);
		if (read_reply_too)
			read_reply(fd, path, reply, sizeof(reply));
		v[i] = now_us() - t0;
	}
	printf("%.2f\n", median(v, (size_t)n));
	free(v);
	return close(fd) ? (die("close", path), 1) : 0;
}

static int opens(const char *path, long n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd >= 0) {
		static const char page[4096];
		if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page) || close(fd))
			die("write of", path);
	} else if (errno != EEXIST) {
		die("create", path);
	}
	double *v = samples(n);
	for (long i = 0; i < n; i++) {
		double t0 = now_us();
		fd = open(path, O_RDONLY);
		if (fd < 0 || close(fd))
			die("open and close", path);
		v[i] = now_us() - t0;
	}
	printf("%.2f\n", median(v, (size_t)n));
	free(v);
	return 0;
}

static int listdir(const char *path, long n)
{
	double *v = samples(n);
	long entries = -1;
	for (long i = 0; i < n; i++) {
		double t0 = now_us();
		DIR *d = opendir(path);
		if (!d)
			die("opendir", path);
		long seen = 0;
		errno = 0;
		while (readdir(d))
			seen++;
		if (errno || closedir(d))
			die("readdir", path);
		v[i] = now_us() - t0;
		if (entries >= 0 && seen != entries) {
			fprintf(stderr, "vybench: %s listed %ld entries, then %ld\n", path, entries, seen);
			exit(1);
		}
		entries = seen;
	}
	printf("%.2f\n", median(v, (size_t)n));
	free(v);
	return 0;
}

static int churn(const char *dir, long n, long size)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/churn", dir) >= (int)sizeof(path)) {
		fprintf(stderr, "vybench: %s is too long\n", dir);
		return 1;
	}
	double t0 = now_us();
	for (long i = 0; i < n; i++) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die("create", path);
		if (ftruncate(fd, size))
			die("ftruncate", path);
		if (close(fd))
			die("close", path);
		if (unlink(path))
			die("unlink", path);
	}
	printf("%.0f\n", (double)n / ((now_us() - t0) / 1e6));
	return 0;
}

/* Growth near a full budget: a file that moves to grow slows down as it
 * nears the end (each move copies it); one that grows in place does not. */
static int append(const char *path, long bs)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char *buf = calloc(1, (size_t)bs);
	size_t cap = 1024, n = 0;
	double *at = malloc(cap * sizeof(*at)); /* when each whole MiB was reached */
	if (fd < 0 || !buf || !at)
		die("open", path);
	memset(buf, 0x5a, (size_t)bs);
	long long bytes = 0;
	at[n++] = now_us();
	for (;;) {
		ssize_t w = write(fd, buf, (size_t)bs);
		if (w < 0 && (errno == ENOSPC || errno == EFBIG))
			break;
		if (w <= 0)
			die("write", path);
		bytes += w;
		if (bytes >> 20 >= (long long)n) {
			if (n == cap && !(at = realloc(at, (cap *= 2) * sizeof(*at))))
				die("realloc", path);
			at[n++] = now_us();
		}
	}
	close(fd);
	size_t mib = n - 1, tenth = mib / 10;
	if (tenth == 0) {
		fprintf(stderr, "vybench: %s took only %lld bytes\n", path, bytes);
		return 1;
	}
	printf("%lld %.1f %.1f\n", bytes, (at[tenth] - at[0]) / (double)tenth,
	       (at[mib] - at[mib - tenth]) / (double)tenth);
	free(at);
	free(buf);
	return unlink(path) ? (die("unlink", path), 1) : 0;
}

static int copy(const char *src, const char *dst, int flags)
{
	struct stat st;
	int in = open(src, O_RDONLY);
	if (in < 0 || fstat(in, &st))
		die("open", src);
	if (st.st_size == 0) {
		fprintf(stderr, "vybench: %s is empty: nothing to copy\n", src);
		return 1;
	}
	int out = open(dst, O_WRONLY | flags, 0644);
	if (out < 0)
		die("open", dst);
	long long left = st.st_size;
	double t0 = now_us();
	while (left > 0) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
		if (n < 0)
			die("copy_file_range into", dst);
		if (n == 0) {
			fprintf(stderr, "vybench: copy_file_range into %s stopped %lld bytes short\n", dst, left);
			return 1;
		}
		left -= n;
	}
	if (fsync(out))
		die("fsync", dst);
	double us = now_us() - t0;
	if (close(out))
		die("close", dst);
	close(in);
	printf("%.3f\n", (double)st.st_size / us / 1e3);
	return 0;
}

#define DEVICE_XATTR "user.vyre.device"

static int move(const char *path, const char *device)
{
	struct stat st;
	if (stat(path, &st))
		die("stat", path);
	double t0 = now_us();
	if (setxattr(path, DEVICE_XATTR, device, strlen(device), 0))
		die("setxattr " DEVICE_XATTR " on", path);
	int fd = open(path, O_RDONLY);
	if (fd < 0 || fsync(fd) || close(fd))
		die("fsync", path);
	double us = now_us() - t0;
	char got[64];
	ssize_t n = getxattr(path, DEVICE_XATTR, got, sizeof(got) - 1);
	if (n < 0)
		die("getxattr " DEVICE_XATTR " of", path);
	while (n > 0 && (got[n - 1] == '\n' || got[n - 1] == '\0'))
		n--;
	got[n] = 0;
	if (strcmp(got, device)) {
		fprintf(stderr, "vybench: %s is on device %s after the move to %s\n", path, got, device);
		return 1;
	}
	printf("%.3f\n", (double)st.st_size / us / 1e3);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "rtt"))
		return rtt(argv[2], count_arg(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "ctl"))
		return ctl(argv[2], count_arg(argv[3]), argv[4], 1);
	if (argc == 5 && !strcmp(argv[1], "ctlw"))
		return ctl(argv[2], count_arg(argv[3]), argv[4], 0);
	if (argc == 5 && !strcmp(argv[1], "churn"))
		return churn(argv[2], count_arg(argv[3]), count_arg(argv[4]));
	if (argc == 4 && !strcmp(argv[1], "opens"))
		return opens(argv[2], count_arg(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "readdir"))
		return listdir(argv[2], count_arg(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "append"))
		return append(argv[2], count_arg(argv[3]));
	if (argc == 4 && !strcmp(argv[1], "copy"))
		return copy(argv[2], argv[3], O_CREAT | O_TRUNC);
	if (argc == 4 && !strcmp(argv[1], "copyinto"))
		return copy(argv[2], argv[3], 0);
	if (argc == 4 && !strcmp(argv[1], "move"))
		return move(argv[2], argv[3]);
	fprintf(stderr, "usage: vybench rtt FILE N | ctl CTL N TEXT | ctlw CTL N TEXT | churn DIR N SIZE | opens FILE N"
			" | readdir DIR N | append FILE BS"
			" | copy SRC DST | copyinto SRC DST | move FILE DEVICE\n");
	return 2;
}
