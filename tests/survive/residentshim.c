/* LD_PRELOAD shim for resend_test: RESIDENTSHIM_LOG=FILE checks every read
 * of /dev/fuse (mincore) for a page of its buffer not present.
 *
 * Why: the kernel copies a request into the reader's buffer through
 * get_user_pages, which cannot fault a page in once a SIGKILL is pending;
 * the request then ends in EIO for the program that asked, instead of
 * waiting for the successor's resend (daemon/session.c, buffer_present).
 * No test can time a kill into that copy, so the test checks the condition.
 *
 * FILE gets "checked PID" at a process's first checked read, then one line
 * per read with pages missing, at most 16 per process: a bound on what a
 * test writes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void note(const char *log, const char *line)
{
	int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	dprintf(fd, "%s\n", line);
	close(fd);
}

/* Pages of [buf, buf + len) not present; 0 when mincore cannot say. */
static size_t missing(void *buf, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), at = (uintptr_t)buf & ~(page - 1);
	uintptr_t end = (uintptr_t)buf + len;
	size_t none = 0;
	unsigned char vec[256];
	while (at < end) {
		size_t n = (end - at + page - 1) / page;
		if (n > sizeof(vec))
			n = sizeof(vec);
		if (mincore((void *)at, n * page, vec) != 0)
			return 0;
		for (size_t i = 0; i < n; i++)
			none += !(vec[i] & 1);
		at += n * page;
	}
	return none;
}

ssize_t read(int fd, void *buf, size_t len)
{
	static ssize_t (*real)(int, void *, size_t);
	static _Atomic int told, said;
	if (!real)
		real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	const char *log = getenv("RESIDENTSHIM_LOG");
	struct stat st;
	if (log && len && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(10, 229)) {
		char line[128];
		if (told++ == 0) {
			snprintf(line, sizeof(line), "checked %d", (int)getpid());
			note(log, line);
		}
		size_t none = missing(buf, len);
		if (none && said++ < 16) {
			snprintf(line, sizeof(line), "missing %d: %zu pages of a %zu-byte read buffer", (int)getpid(), none,
				 len);
			note(log, line);
		}
	}
	return real(fd, buf, len);
}
