/* LD_PRELOAD shim for cp_test's SIGINT test: makes the daemon's copy wait
 * for the test, not for the scheduler. The daemon reads the source of a
 * `vyrefs cp` with pread (sock/copysrv.c); for the file COPYGATE_FILE names:
 *  - the first pread creates COPYGATE_FILE.reading (the test then knows the
 *    copy is under way with nothing copied yet) and blocks;
 *  - it goes on only once the daemon has twice found its client gone: a
 *    poll of one fd, no timeout, that reports a hang-up, as the copy's
 *    look at its client makes (fs/mapsrv.c). After the first such look the
 *    daemon has asked its workers to stop; the second comes after that.
 * So the daemon copies exactly the piece it was reading when the client
 * went, whatever the machine's load. A daemon that never sees its client
 * go is let through after 60 s, and COPYGATE_FILE.timedout says so (the
 * test fails rather than hangs). Every other call passes through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static atomic_int hangups; /* looks at a client that found it gone */

static int gated(int fd)
{
	const char *path = getenv("COPYGATE_FILE");
	struct stat a, b;
	return path && fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static void mark(const char *what)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s.%s", getenv("COPYGATE_FILE"), what);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
}

static void wait_for_the_client_to_go(void)
{
	static atomic_int told, gave_up;
	if (atomic_load(&gave_up))
		return;
	if (!atomic_exchange(&told, 1))
		mark("reading");
	const struct timespec ms = {0, 1000000};
	for (int i = 0; atomic_load(&hangups) < 2; i++) {
		if (i == 60000) {
			atomic_store(&gave_up, 1);
			mark("timedout");
			return;
		}
		nanosleep(&ms, NULL);
	}
}

static ssize_t gate_pread(int fd, void *buf, size_t n, off_t off)
{
	static ssize_t (*real)(int, void *, size_t, off_t);
	if (!real)
		real = (ssize_t(*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread");
	if (gated(fd))
		wait_for_the_client_to_go();
	return real(fd, buf, n, off);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	return gate_pread(fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	return gate_pread(fd, buf, n, off);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	static int (*real)(struct pollfd *, nfds_t, int);
	if (!real)
		real = (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT, "poll");
	int rc = real(fds, n, timeout);
	char b;
	if (rc > 0 && n == 1 && timeout == 0 &&
	    ((fds[0].revents & (POLLHUP | POLLERR)) || recv(fds[0].fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0))
		atomic_fetch_add(&hangups, 1);
	return rc;
}
