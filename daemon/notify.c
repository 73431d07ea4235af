/* sd_notify's datagram (notify.h). The socket is a path ("/run/...") or,
 * with a leading '@', an abstract name; anything else (systemd's vsock
 * form) is said once and ignored. A failed send is logged, never fatal:
 * the mount serves whether or not systemd heard. */
#include "daemon/notify.h"
#include "daemon/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un addr;
static socklen_t addr_len; /* 0: no socket to tell */

void vy_notify_init(void)
{
	const char *v = getenv("NOTIFY_SOCKET");
	if (!v)
		return;
	size_t n = strlen(v);
	if ((v[0] == '/' || v[0] == '@') && n >= 2 && n < sizeof(addr.sun_path)) {
		memset(&addr, 0, sizeof(addr));
		addr.sun_family = AF_UNIX;
		memcpy(addr.sun_path, v, n);
		if (v[0] == '@')
			addr.sun_path[0] = '\0'; /* abstract: the name is the bytes after it, unterminated */
		addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (v[0] == '/'));
	} else {
		vy_log(LOG_WARNING, "NOTIFY_SOCKET=%.200s is not a unix socket path or abstract name: systemd is not told "
				    "when the mount is ready (Fix: run the unit with Type=notify under systemd's own "
				    "NOTIFY_SOCKET, or unset it)", v);
	}
	unsetenv("NOTIFY_SOCKET");
}

static void send_msg(const char *msg)
{
	if (!addr_len)
		return;
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ssize_t sent = s < 0 ? -1 : sendto(s, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&addr, addr_len);
	int err = errno;
	if (s >= 0)
		close(s);
	if (sent != (ssize_t)strlen(msg))
		vy_log(LOG_WARNING, "cannot tell systemd (NOTIFY_SOCKET) '%.40s...': %s", msg,
		       sent < 0 ? strerror(err) : "a short send");
}

void vy_notify_ready(pid_t main_pid, const char *mountpoint)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "READY=1\nMAINPID=%d\nSTATUS=serving %.400s\n", (int)main_pid, mountpoint);
	send_msg(msg);
}

void vy_notify_main(pid_t main_pid, const char *why)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "MAINPID=%d\nSTATUS=%.400s\n", (int)main_pid, why);
	send_msg(msg);
}
