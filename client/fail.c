/* The client library's failures: vy_last_error's text, and errno values
 * that say what ran out (a process's fd table is EMFILE, never ENOMEM).
 * Below every other file of client/: each reports through it. */
#include "client/mapping.h"
#include "proto/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

static _Thread_local char last_error[VY_ERROR_MSG_MAX + 128];

int vy_client_fail(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return -err;
}

int vy_client_fail_vy(const vy_error *e)
{
	snprintf(last_error, sizeof(last_error), "vyrefs: %s", e->msg);
	int err = vy_err_errno(e->code);
	return -(err ? err : EIO);
}

API const char *vy_last_error(void)
{
	return last_error;
}

bool vy_client_fds_short(unsigned need)
{
	int fds[VY_PROTO_FDS_MAX];
	unsigned got = 0;
	bool shortage = false;
	if (need > VY_PROTO_FDS_MAX)
		need = VY_PROTO_FDS_MAX;
	while (got < need) {
		int fd = open("/", O_PATH | O_CLOEXEC);
		if (fd < 0) {
			shortage = errno == EMFILE || errno == ENFILE;
			break;
		}
		fds[got++] = fd;
	}
	while (got)
		close(fds[--got]);
	return shortage;
}

int vy_client_fail_fds(int err, const char *what)
{
	if (err == EMFILE)
		return vy_client_fail(EMFILE, "vyrefs: %s: too many open files in this process (Fix: raise the open-file "
					      "limit, ulimit -n, or close files)",
				      what);
	if (err == ENFILE)
		return vy_client_fail(ENFILE, "vyrefs: %s: too many open files on this machine (Fix: close files, or raise "
					      "fs.file-max)",
				      what);
	return 0;
}

int vy_client_fail_local(const vy_error *e)
{
	if (e->code == VY_ENOMEM && vy_client_fds_short(1))
		return vy_client_fail_fds(EMFILE, e->msg);
	return vy_client_fail_vy(e);
}

