/* The keeper protocol's framing: one fixed-size message, its fds in
 * SCM_RIGHTS (wire.h). Linked into the keeper and the daemon. */
#include "keeper/wire.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define CMSG_SPACE_MAX CMSG_SPACE(sizeof(int) * VY_KEEPER_BATCH)

void vy_keeper_msg_init(vy_keeper_msg *m, enum vy_keeper_op op)
{
	memset(m, 0, sizeof(*m));
	m->magic = VY_KEEPER_MAGIC;
	m->version = VY_KEEPER_VERSION;
	m->op = (uint16_t)op;
}

static bool carries_fds(uint16_t op)
{
	return op == VY_KEEPER_ADD || op == VY_KEEPER_ADOPT || op == VY_KEEPER_STATE;
}

int vy_keeper_send(int sock, const vy_keeper_msg *m, const int *fds)
{
	if (m->count > VY_KEEPER_BATCH) {
		errno = EINVAL;
		return -1;
	}
	union {
		char buf[CMSG_SPACE_MAX];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	size_t nfds = carries_fds(m->op) && fds ? m->count : 0;
	if (nfds) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n == (ssize_t)sizeof(*m))
			return 0;
		if (n >= 0) {
			errno = EPROTO; /* a seqpacket message goes whole or not at all */
			return -1;
		}
		if (errno != EINTR)
			return -1;
	}
}

/* Close what came, so a refused message keeps no fd. */
static void close_all(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

int vy_keeper_recv(int sock, vy_keeper_msg *m, int *fds)
{
	for (unsigned i = 0; i < VY_KEEPER_BATCH; i++)
		fds[i] = -1;
	union {
		char buf[CMSG_SPACE_MAX];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
	ssize_t n;
	/* ECONNRESET: the peer closed with a message of ours unread, and the
	 * kernel says so once, before the messages the peer sent last (its
	 * LEAVING: taking it for a hangup made a clean unmount a death, issue
	 * "posix 3"); they follow, then 0. */
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && (errno == EINTR || errno == ECONNRESET));
	if (n < 0)
		return -1;
	if (n == 0)
		return 0;
	unsigned got = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfd; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < VY_KEEPER_BATCH)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	bool ok = n == (ssize_t)sizeof(*m) && !(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
		  m->magic == VY_KEEPER_MAGIC && m->version == VY_KEEPER_VERSION && m->count <= VY_KEEPER_BATCH &&
		  m->op >= VY_KEEPER_ADD && m->op <= VY_KEEPER_RELEASED &&
		  got == (carries_fds(m->op) ? m->count : 0);
	if (!ok) {
		close_all(fds, got);
		errno = EPROTO;
		return -1;
	}
	return 1;
}
