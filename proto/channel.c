/* Framing and fd passing for the daemon <-> launcher channel. */
#include "proto/channel.h"

#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PARTS_MAX 8

vy_err vy_chan_send(int sock, uint16_t opcode, uint64_t unique, const void *const *parts, const size_t *lens,
		    unsigned nparts, const int *fds, unsigned nfds, vy_error *e)
{
	if (nparts > PARTS_MAX || nfds > VY_PROTO_FDS_MAX)
		return vy_fail(e, VY_EINTERNAL, "report this bug", "a message of %u parts and %u fds", nparts, nfds);
	uint64_t total = sizeof(vy_msg_header);
	for (unsigned i = 0; i < nparts; i++)
		total += lens[i];
	if (total > VY_PROTO_MSG_MAX)
		return vy_fail(e, VY_EINVAL, "send less at once", "a message of %llu bytes is over the channel's %u",
			       (unsigned long long)total, VY_PROTO_MSG_MAX);
	vy_msg_header h = {.len = (uint32_t)total, .opcode = opcode, .nfds = (uint16_t)nfds, .unique = unique};
	struct iovec iov[PARTS_MAX + 1];
	iov[0] = (struct iovec){.iov_base = &h, .iov_len = sizeof(h)};
	unsigned niov = 1;
	for (unsigned i = 0; i < nparts; i++)
		if (lens[i])
			iov[niov++] = (struct iovec){.iov_base = (void *)parts[i], .iov_len = lens[i]};
	union {
		char buf[CMSG_SPACE(sizeof(int) * VY_PROTO_FDS_MAX)];
		struct cmsghdr align;
	} ctrl;
	memset(&ctrl, 0, sizeof(ctrl));
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = niov};
	if (nfds) {
		mh.msg_control = ctrl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	uint64_t sent = 0;
	while (sent < total) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return vy_fail(e, VY_EDEVICE, "the launcher is restarted for the next sequence",
				       "cannot write to the launcher: %s", n < 0 ? strerror(errno) : "closed");
		sent += (uint64_t)n;
		/* The fds went with the first byte; move past what was sent. */
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		size_t skip = (size_t)n;
		while (mh.msg_iovlen && skip >= mh.msg_iov[0].iov_len) {
			skip -= mh.msg_iov[0].iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + skip;
			mh.msg_iov[0].iov_len -= skip;
		}
	}
	return VY_OK;
}

static vy_err broken(vy_error *e, const char *what)
{
	return vy_fail(e, VY_EDEVICE, "the launcher is restarted for the next sequence", "the launcher's channel %s",
		       what);
}

/* Read exactly n bytes (the rest of a message that has begun). */
static vy_err read_all(int sock, void *buf, size_t n, vy_error *e)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(sock, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return broken(e, r == 0 ? "closed in the middle of a message" : strerror(errno));
		got += (size_t)r;
	}
	return VY_OK;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

vy_err vy_chan_recv(int sock, int timeout_ms, unsigned spin_us, vy_msg *m, vy_error *e)
{
	memset(m, 0, sizeof(*m));
	struct pollfd p = {.fd = sock, .events = POLLIN};
	bool ready = false;
	if (spin_us) {
		uint64_t until = now_ns() + (uint64_t)spin_us * 1000u;
		do
			ready = poll(&p, 1, 0) > 0;
		while (!ready && now_ns() < until);
	}
	for (; !ready;) {
		int r = poll(&p, 1, timeout_ms);
		if (r > 0)
			break;
		if (r == 0)
			return vy_fail(e, VY_ETIMEDOUT, "raise launch_timeout, or make the work shorter",
				       "no answer within %d ms", timeout_ms);
		if (errno != EINTR)
			return broken(e, strerror(errno));
	}
	union {
		char buf[CMSG_SPACE(sizeof(int) * VY_PROTO_FDS_MAX)];
		struct cmsghdr align;
	} ctrl;
	struct iovec iov = {.iov_base = &m->h, .iov_len = sizeof(m->h)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl.buf, .msg_controllen = sizeof(ctrl.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return broken(e, "closed (the launcher exited)");
	if (n < 0)
		return broken(e, strerror(errno));
	/* Take every fd that came, whatever the header says, so none leaks. */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (m->nfds < VY_PROTO_FDS_MAX)
				m->fds[m->nfds++] = fd;
			else
				close(fd);
		}
	}
	vy_err rc = VY_OK;
	if (mh.msg_flags & MSG_CTRUNC)
		rc = broken(e, "carried more descriptors than a message may");
	if (rc == VY_OK && (size_t)n < sizeof(m->h))
		rc = read_all(sock, (char *)&m->h + n, sizeof(m->h) - (size_t)n, e);
	if (rc == VY_OK && (m->h.len < sizeof(m->h) || m->h.len > VY_PROTO_MSG_MAX || m->h.nfds != m->nfds))
		rc = broken(e, "sent a malformed header");
	if (rc == VY_OK) {
		m->len = m->h.len - sizeof(m->h);
		if (m->len) {
			m->body = malloc(m->len);
			rc = m->body ? read_all(sock, m->body, m->len, e)
				     : vy_fail(e, VY_ENOMEM, "free host memory", "cannot receive a message of %zu bytes", m->len);
		}
	}
	if (rc != VY_OK)
		vy_msg_free(m);
	return rc;
}

void vy_msg_free(vy_msg *m)
{
	free(m->body);
	m->body = NULL;
	for (unsigned i = 0; i < m->nfds; i++)
		if (m->fds[i] >= 0)
			close(m->fds[i]);
	m->nfds = 0;
}

int vy_msg_take_fd(vy_msg *m, unsigned i)
{
	if (i >= m->nfds)
		return -1;
	int fd = m->fds[i];
	m->fds[i] = -1;
	return fd;
}
