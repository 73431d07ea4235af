/* Finding, trusting and asking a mount's daemon. The socket is the one the
 * mount ROOT's .vyre/socket names (the root by /proc/self/mountinfo,
 * client/mountinfo.c), and the server behind it must be the uid that
 * mounted it (SO_PEERCRED) before anything is sent: a process never hands
 * its fds to a server a user set up. Failures say which side failed: the
 * daemon refused, went away, or could not be reached. */
#include "client/mapping.h"
#include "proto/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define NAME_MAX_BYTES 128 /* "@name" or "/path", one line */
#define DYING_MS 3000      /* a daemon that closed a connection unanswered and lives on after this did not die */
#define SUCCESSOR_MS 60000 /* the longest a client waits for a successor to answer (survive=on) */

/* n bytes read into name (cap): one line, "@NAME" (an abstract socket)
 * or "/PATH", that fits a unix socket address; made a string. */
static bool good_name(char *name, ssize_t n, size_t cap)
{
	if (n <= 0 || (size_t)n >= cap)
		return false;
	size_t len = (size_t)n;
	name[len] = '\0';
	if (name[len - 1] == '\n')
		name[--len] = '\0';
	return len >= 2 && len == strlen(name) && !strchr(name, '\n') && (name[0] == '@' || name[0] == '/') &&
	       len < sizeof(((struct sockaddr_un *)0)->sun_path);
}

/* The one line of ROOT/.vyre/socket, from the mount itself: the root and
 * the socket file are on the mount's device, the file no symlink (and
 * the root's .vyre is the daemon's: no user can make one there). One fd
 * at a time, so a process short of fds learns so where it needs most. */
static int socket_name(const vy_client_mount *m, dev_t dev, char *name, size_t cap)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/.vyre/socket", strcmp(m->root, "/") ? m->root : "");
	struct stat d, s;
	int fd = stat(m->root, &d) == 0 && d.st_dev == dev ? open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	int err = errno, rc = 0;
	if (fd >= 0 && (fstat(fd, &s) != 0 || s.st_dev != dev || !S_ISREG(s.st_mode))) {
		close(fd);
		fd = -1;
		err = ENODEV;
	}
	ssize_t n = fd >= 0 ? read(fd, name, cap) : -1;
	if (fd < 0 && (err == EMFILE || err == ENFILE))
		rc = vy_client_fail_fds(err, "reading the mount's .vyre/socket");
	else if (fd < 0)
		rc = vy_client_fail(ENOTSUP, "vyrefs: %s has no .vyre/socket of its own (%s), so it maps and copies no "
					     "files (Fix: use a mount of vyrefs 0.2 or newer)",
				    m->root, strerror(err));
	else if (!good_name(name, n, cap))
		rc = vy_client_fail(EPROTO, "vyrefs: %s does not name a socket (Fix: remount %s)", path, m->root);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The server must run as the uid that mounted the filesystem. */
static int check_peer(vy_client_conn *c, uid_t want, const char *name)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(c->sock, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof(cr))
		return vy_client_fail(EPERM, "vyrefs: cannot tell who serves %s (%s): refused (Fix: use a kernel with "
					     "SO_PEERCRED on unix sockets)",
				      name, strerror(errno));
	c->uid = cr.uid;
	c->pid = cr.pid;
	if (cr.uid != want)
		return vy_client_fail(EPERM, "vyrefs: the server of %s (uid %u, pid %d) is not the daemon of %s (uid %u, "
					     "who mounted it): refused, and nothing was sent to it (Fix: another process "
					     "holds the socket the mount names: find it with `ss -xlp | grep -F %s`, and remount)",
				      name, (unsigned)cr.uid, (int)cr.pid, c->root, (unsigned)want, name);
	return 0;
}

int vy_client_connect(const char *file, dev_t dev, vy_client_conn *c)
{
	vy_client_mount m;
	bool is_vyrefs;
	c->sock = -1;
	c->unique = 0;
	int rc = vy_client_mount_root(file, dev, &m, &is_vyrefs);
	char name[NAME_MAX_BYTES];
	if (!rc)
		rc = socket_name(&m, dev, name, sizeof(name));
	if (rc)
		return rc;
	snprintf(c->root, sizeof(c->root), "%s", m.root);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	size_t n = strlen(name);
	socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	if (name[0] == '@')
		memcpy(addr.sun_path + 1, name + 1, n - 1); /* abstract: a NUL first */
	else
		memcpy(addr.sun_path, name, n);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		int err = errno;
		rc = vy_client_fail_fds(err, "a socket to the daemon");
		return rc ? rc : vy_client_fail(err, "vyrefs: socket: %s", strerror(err));
	}
	if (connect(s, (struct sockaddr *)&addr, alen) != 0) {
		int err = errno;
		close(s);
		return vy_client_fail(err, "vyrefs: cannot reach the daemon of %s at %s: %s (Fix: check that the mount is "
					   "alive: ls %s; if it is, remount it)",
				      m.root, name, strerror(err), m.root);
	}
	c->sock = s;
	rc = check_peer(c, m.user, name);
	if (rc)
		vy_client_close(c);
	return rc;
}

void vy_client_close(vy_client_conn *c)
{
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
}

/* Whether process `pid` has ended (gone, or a zombie not yet reaped). */
static bool exited(pid_t pid)
{
	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return true;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* Until process `pid` has exited (a zombie counts), at most `ms`; false
 * where it has not, or cannot be told (a pid of another namespace: 0). */
static bool wait_exited(pid_t pid, int ms)
{
	if (pid <= 0)
		return false;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return errno == ESRCH || exited(pid);
	struct pollfd p = {.fd = fd, .events = POLLIN}; /* readable once it exits */
	int n;
	while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
		;
	close(fd);
	return n > 0 || exited(pid);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Whether the mount holding `file` is gone: out of this process's
 * mountinfo, or its FUSE connection ended (the keeper gave up). */
static bool mount_gone(const char *file, dev_t dev, char *root, size_t cap)
{
	vy_client_mount m;
	bool is_vyrefs;
	struct stat st;
	if (vy_client_mount_root(file, dev, &m, &is_vyrefs) != 0)
		return true;
	snprintf(root, cap, "%s", m.root);
	return stat(m.root, &st) != 0 && (errno == ENOTCONN || errno == ECONNABORTED);
}

int vy_client_connect_successor(const char *file, dev_t dev, pid_t dead, vy_client_conn *c, bool *died)
{
	c->sock = -1;
	*died = wait_exited(dead, DYING_MS);
	if (!*died)
		return -ECONNRESET;
	uint64_t until = now_ms() + SUCCESSOR_MS;
	char root[PATH_MAX];
	snprintf(root, sizeof(root), "%s", file);
	for (unsigned tries = 0;; tries++) {
		int rc = vy_client_connect(file, dev, c);
		if (!rc && c->pid != dead)
			return 0;
		if (!rc)
			vy_client_close(c);
		if (rc == -EPERM || rc == -EMFILE || rc == -ENFILE)
			return rc; /* a server not the mount's, or no fd: no waiting mends these */
		if (mount_gone(file, dev, root, sizeof(root)))
			return vy_client_fail(ENOTCONN, "vyrefs: the daemon of %s (pid %d) has exited and no successor took "
							 "over: the mount is gone (Fix: mount it again, then run this again; "
							 "the daemon's log says why it ended)",
					      root, (int)dead);
		if (now_ms() >= until)
			return vy_client_fail(ETIMEDOUT, "vyrefs: the daemon of %s (pid %d) has exited, and no successor "
							 "answered within %d s (Fix: check that the mount is alive: ls %s; "
							 "its log says what it is doing)",
					      root, (int)dead, SUCCESSOR_MS / 1000, root);
		/* The daemon that named its socket died before it answered
		 * (its successor's name is read next, once one serves), or one
		 * serving refused: a pause, growing, not a spin. */
		struct timespec pause = {.tv_nsec = (tries < 10 ? 1 + tries : 20) * 1000000L};
		nanosleep(&pause, NULL);
	}
}

/* The channel failed (proto/channel.c's text is about its own peer):
 * say what happened from what this side can see. */
static int channel_failed(vy_client_conn *c, const vy_error *e)
{
	if (e->code == VY_ETIMEDOUT)
		return vy_client_fail(ETIMEDOUT, "vyrefs: the daemon of %s (pid %d) did not answer within a minute (Fix: "
						 "check that the mount is alive: ls %s; its log says what it is doing)",
				      c->root, (int)c->pid, c->root);
	if (e->code == VY_ENOMEM)
		return vy_client_fail_vy(e);
	struct pollfd p = {.fd = c->sock, .events = POLLIN | POLLRDHUP};
	bool gone = poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
	if (!gone && vy_client_fds_short(VY_PROTO_FDS_MAX))
		return vy_client_fail_fds(EMFILE, "receiving the daemon's answer");
	if (gone)
		return vy_client_fail(ECONNRESET, "vyrefs: the daemon of %s (pid %d) %s (Fix: check that the mount is "
						  "alive: ls %s; the daemon's log says why)",
				      c->root, (int)c->pid, exited(c->pid) ? "has exited" : "closed the connection",
				      c->root);
	return vy_client_fail(EPROTO, "vyrefs: the daemon of %s (pid %d) sent a message this library cannot read "
				      "(Fix: use libvyrefs of the mount's version)",
			      c->root, (int)c->pid);
}

int vy_client_call(vy_client_conn *c, uint16_t op, const void *in, size_t len, const int *fds, unsigned nfds,
		   size_t min, void (*progress)(uint64_t, uint64_t, void *), void *ctx, vy_msg *r)
{
	vy_chan ch = {.sock = c->sock, .mb_fd = -1};
	const void *parts[1] = {in};
	size_t lens[1] = {len};
	vy_error e;
	uint64_t unique = ++c->unique;
	if (vy_chan_send(&ch, op, unique, parts, lens, 1, nfds ? fds : NULL, nfds, &e) != VY_OK)
		return channel_failed(c, &e);
	for (;;) {
		/* A copy's progress comes first; a map's answer within a minute. */
		if (vy_chan_recv(&ch, progress ? -1 : 60000, 0, r, &e) != VY_OK)
			return channel_failed(c, &e);
		/* A daemon that took over this connection (survive=on) may
		 * answer a request again whose answer came already. */
		if (r->h.unique < unique) {
			vy_msg_free(r);
			continue;
		}
		if (r->h.opcode != VY_OP_CLIENT_PROGRESS)
			break;
		vy_client_progress p;
		if (r->len == sizeof(p) && progress) {
			memcpy(&p, r->body, sizeof(p));
			progress(p.done, p.total, ctx);
		}
		vy_msg_free(r);
	}
	if (r->h.opcode != (op | VY_OP_REPLY) || r->len < min || r->len < sizeof(vy_status)) {
		vy_msg_free(r);
		return vy_client_fail(EPROTO, "vyrefs: the daemon of %s answered out of turn (Fix: use libvyrefs of the "
					      "mount's version)",
				      c->root);
	}
	vy_status st;
	memcpy(&st, r->body, sizeof(st));
	st.msg[sizeof(st.msg) - 1] = '\0';
	if (st.rc != VY_OK) {
		vy_err code = st.rc > 0 && st.rc <= VY_ERR_LAST ? (vy_err)st.rc : VY_EINTERNAL;
		vy_msg_free(r);
		int err = vy_err_errno(code);
		return vy_client_fail(err ? err : EIO, "vyrefs: the daemon refused: %s", st.msg);
	}
	return 0;
}
