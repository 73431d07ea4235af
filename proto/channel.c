/* Framing and fd passing for the daemon's channels: to its launchers, and
 * to clients over the client socket (sock/mapsrv.c, client/). */
#include "proto/channel.h"

#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PARTS_MAX 8

/* Who is at the other end, for messages. */
static const char *peer_of(const vy_chan *c)
{
	return c->peer ? c->peer : "the launcher";
}

static vy_err broken(const vy_chan *c, vy_error *e, const char *what)
{
	if (!c->peer)
		return vy_fail(e, VY_EDEVICE, "the launcher is restarted for the next sequence",
			       "the launcher's channel %s", what);
	return vy_fail(e, VY_EDEVICE, "check that the other side is alive, then try again", "the channel to %s %s",
		       c->peer, what);
}

static vy_err sock_send(const vy_chan *ch, uint16_t opcode, uint64_t unique, const void *const *parts, const size_t *lens,
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
		ssize_t n = sendmsg(ch->sock, &mh, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			char what[128];
			snprintf(what, sizeof(what), "cannot be written: %s", n < 0 ? strerror(errno) : "closed");
			return broken(ch, e, what);
		}
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

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Read exactly n bytes (the rest of a message that has begun), by
 * `until_ns` when it is not 0: a peer that stops in the middle of a
 * message holds what it sent only that long. */
static vy_err read_all(const vy_chan *c, void *buf, size_t n, uint64_t until_ns, vy_error *e)
{
	size_t got = 0;
	while (got < n) {
		if (until_ns) {
			uint64_t now = now_ns();
			struct pollfd p = {.fd = c->sock, .events = POLLIN};
			int r = now < until_ns ? poll(&p, 1, (int)((until_ns - now + 999999u) / 1000000u)) : 0;
			if (r < 0 && errno == EINTR)
				continue;
			if (r == 0) {
				char what[96];
				snprintf(what, sizeof(what), "did not finish a message within %d ms", c->msg_ms);
				return broken(c, e, what);
			}
		}
		ssize_t r = read(c->sock, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return broken(c, e, r == 0 ? "closed in the middle of a message" : strerror(errno));
		got += (size_t)r;
	}
	return VY_OK;
}

/* One message from the socket, which has begun to arrive (or will, at
 * once: the sender wrote it before it said so). The control buffer has
 * room for max_fds: the kernel closes any fd past it (MSG_CTRUNC), so a
 * peer cannot fill this process's fd table. */
static vy_err sock_recv(const vy_chan *ch, const vy_msg_header *known, vy_msg *m, vy_error *e)
{
	int sock = ch->sock;
	uint32_t max_len = ch->max_len;
	unsigned max_fds = ch->max_fds && ch->max_fds < VY_PROTO_FDS_MAX ? ch->max_fds : VY_PROTO_FDS_MAX;
	memset(m, 0, sizeof(*m));
	union {
		char buf[CMSG_SPACE(sizeof(int) * VY_PROTO_FDS_MAX)];
		struct cmsghdr align;
	} ctrl;
	/* A message seen whole (vy_chan_peek) is taken in one call: a process
	 * killed around it has taken all of it or none. */
	size_t limit = max_len ? max_len : VY_PROTO_MSG_MAX;
	struct iovec iov[2] = {{.iov_base = &m->h, .iov_len = sizeof(m->h)}};
	if (known && known->len > sizeof(m->h) && known->len <= limit) {
		m->body = malloc(known->len - sizeof(m->h));
		if (!m->body)
			return vy_fail(e, VY_ENOMEM, "free host memory", "cannot receive a message of %u bytes", known->len);
		iov[1] = (struct iovec){.iov_base = m->body, .iov_len = known->len - sizeof(m->h)};
	}
	struct msghdr mh = {.msg_iov = iov,
			    .msg_iovlen = m->body ? 2 : 1,
			    .msg_control = ctrl.buf,
			    .msg_controllen = CMSG_SPACE(sizeof(int) * max_fds)};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		char what[96];
		snprintf(what, sizeof(what), "closed (%s exited or hung up)", peer_of(ch));
		vy_err rc = broken(ch, e, n == 0 ? what : strerror(errno));
		vy_msg_free(m);
		return rc;
	}
	uint64_t until = ch->msg_ms > 0 ? now_ns() + (uint64_t)ch->msg_ms * 1000000u : 0;
	/* Take every fd that came, whatever the header says, so none leaks. */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (m->nfds < max_fds)
				m->fds[m->nfds++] = fd;
			else
				close(fd);
		}
	}
	vy_err rc = VY_OK;
	if (mh.msg_flags & MSG_CTRUNC)
		rc = broken(ch, e, "carried more descriptors than a message may");
	size_t body_got = (size_t)n > sizeof(m->h) ? (size_t)n - sizeof(m->h) : 0;
	if (rc == VY_OK && (size_t)n < sizeof(m->h))
		rc = read_all(ch, (char *)&m->h + n, sizeof(m->h) - (size_t)n, until, e);
	if (rc == VY_OK && (m->h.len < sizeof(m->h) || m->h.len > limit || m->h.nfds != m->nfds ||
			    (known && memcmp(known, &m->h, sizeof(m->h)) != 0)))
		rc = broken(ch, e, "sent a malformed header");
	if (rc == VY_OK) {
		m->len = m->h.len - sizeof(m->h);
		if (m->len && !m->body)
			m->body = malloc(m->len);
		if (m->len && !m->body)
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot receive a message of %zu bytes", m->len);
		else if (m->len > body_got)
			rc = read_all(ch, (char *)m->body + body_got, m->len - body_got, until, e);
	}
	if (rc != VY_OK)
		vy_msg_free(m);
	return rc;
}

vy_err vy_chan_peek(vy_chan *c, int timeout_ms, vy_msg_header *h, void *body, size_t cap, size_t *got, vy_error *e)
{
	struct pollfd p = {.fd = c->sock, .events = POLLIN};
	for (;;) {
		int r = poll(&p, 1, timeout_ms);
		if (r > 0)
			break;
		if (r == 0)
			return vy_fail(e, VY_ETIMEDOUT, "send a request sooner", "no message within %d ms", timeout_ms);
		if (errno != EINTR)
			return broken(c, e, strerror(errno));
	}
	uint8_t buf[sizeof(*h) + VY_CHAN_PEEK_MAX];
	size_t want = sizeof(*h) + (cap < VY_CHAN_PEEK_MAX ? cap : VY_CHAN_PEEK_MAX);
	uint64_t until = c->msg_ms > 0 ? now_ns() + (uint64_t)c->msg_ms * 1000000u : 0;
	uint32_t limit = c->max_len ? c->max_len : VY_PROTO_MSG_MAX;
	for (;;) {
		/* No control buffer: the fds stay with the message (the kernel
		 * drops the copies a peek would give). */
		ssize_t n = recv(c->sock, buf, want, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0) {
			char what[96];
			snprintf(what, sizeof(what), "closed (%s exited or hung up)", peer_of(c));
			return broken(c, e, what);
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return broken(c, e, strerror(errno));
		if (n >= (ssize_t)sizeof(*h)) {
			memcpy(h, buf, sizeof(*h));
			if (h->len < sizeof(*h) || h->len > limit)
				return broken(c, e, "sent a malformed header");
			size_t body_len = h->len - sizeof(*h), need = body_len < want - sizeof(*h) ? body_len : want - sizeof(*h);
			if ((size_t)n >= sizeof(*h) + need) {
				memcpy(body, buf + sizeof(*h), need);
				*got = need;
				return VY_OK;
			}
		}
		/* Begun, not whole: the readable socket would wake a poll at
		 * once, so look again shortly, up to the message's bound. */
		if (until && now_ns() >= until) {
			char what[96];
			snprintf(what, sizeof(what), "did not finish a message within %d ms", c->msg_ms);
			return broken(c, e, what);
		}
		usleep(1000);
	}
}

vy_err vy_chan_take(vy_chan *c, const vy_msg_header *h, vy_msg *m, vy_error *e)
{
	memset(m, 0, sizeof(*m));
	return sock_recv(c, h, m, e);
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

/* ---- the mailbox ---------------------------------------------------------- */

#define SLOT_BYTES (1u << 20) /* a sequence of most shell scripts fits */
#define SLOT_AT(i) (4096u + (i) * (size_t)SLOT_BYTES)
#define MAILBOX_BYTES SLOT_AT(2)
/* A sleeping receiver looks at the socket this often, for a peer that died
 * without a word. */
#define SLICE_MS 20

struct vy_mailbox {
	/* [0] requests (the daemon's), [1] replies; each number on a cache
	 * line of its own, beside the flag saying its receiver sleeps. */
	struct {
		_Alignas(64) _Atomic uint32_t seq;
		_Atomic uint32_t sleeping;
	} dir[2];
	/* Set by the daemon to stop the running sequence at its next step. */
	_Alignas(64) _Atomic uint32_t stop;
};

typedef struct slot_header {
	uint32_t via_socket; /* 1: the message is on the socket */
	uint32_t pad;
	vy_msg_header h;
} slot_header;

static void *slot(vy_chan *c, int dir)
{
	return (char *)c->mb + SLOT_AT(dir);
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *timeout)
{
	return syscall(SYS_futex, addr, op, val, timeout, NULL, 0);
}

static vy_err map_mailbox(vy_chan *c, int fd, vy_error *e)
{
	void *p = mmap(NULL, MAILBOX_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot map the launcher's mailbox: %s", strerror(errno));
	c->mb = p;
	return VY_OK;
}

vy_err vy_chan_open_daemon(vy_chan *c, int sock, vy_error *e)
{
	*c = (vy_chan){.sock = sock, .mb_fd = -1, .daemon = true};
	const char *only = getenv("VY_CHANNEL");
	if (only && !strcmp(only, "socket"))
		return VY_OK;
	int fd = memfd_create("vyrefs-mailbox", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, MAILBOX_BYTES) != 0) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot make the launcher's mailbox: %s", strerror(err));
	}
	vy_err rc = map_mailbox(c, fd, e);
	if (rc != VY_OK) {
		close(fd);
		return rc;
	}
	c->mb_fd = fd;
	return VY_OK;
}

static bool peer_gone(int sock);

/* HELLO, which brought the mailbox, is the daemon's first message: its
 * number is 1 once the daemon has counted it. The daemon counts it after
 * the socket write we have already read, so a load here may still see 0;
 * taking that 0 as seen makes HELLO's late bump read as a second message,
 * via the socket (its slot says so): the launcher then waits in recvmsg
 * while the next request comes through the mailbox, and the daemon waits
 * out launch_timeout. Wait for the count. */
static vy_err wait_hello_counted(vy_chan *c, vy_error *e)
{
	_Atomic uint32_t *seq = &c->mb->dir[0].seq;
	while (atomic_load(seq) == 0) {
		if (peer_gone(c->sock))
			return broken(c, e, "closed (the other process exited)");
		struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000L};
		futex(seq, FUTEX_WAIT, 0, &ts);
	}
	c->seen = 1;
	return VY_OK;
}

vy_err vy_chan_open_launcher(vy_chan *c, int sock, int mb_fd, vy_error *e)
{
	*c = (vy_chan){.sock = sock, .mb_fd = -1};
	struct stat st;
	if (mb_fd < 0)
		return VY_OK;
	if (fstat(mb_fd, &st) != 0 || st.st_size != (off_t)MAILBOX_BYTES)
		return vy_fail(e, VY_EINVAL, "run one vyrefs binary for the daemon and its launcher",
			       "the mailbox is not %zu bytes", (size_t)MAILBOX_BYTES);
	vy_err rc = map_mailbox(c, mb_fd, e);
	if (rc == VY_OK)
		rc = wait_hello_counted(c, e);
	return rc;
}

void vy_chan_set_stop(vy_chan *c, uint32_t v)
{
	if (c->mb)
		atomic_store(&c->mb->stop, v);
}

_Atomic uint32_t *vy_chan_stop_flag(vy_chan *c)
{
	return c->mb ? &c->mb->stop : NULL;
}

void vy_chan_close(vy_chan *c)
{
	if (c->mb)
		munmap(c->mb, MAILBOX_BYTES);
	if (c->mb_fd >= 0)
		close(c->mb_fd);
	if (c->sock >= 0)
		close(c->sock);
	c->mb = NULL;
	c->mb_fd = -1;
	c->sock = -1;
}

vy_err vy_chan_send(vy_chan *c, uint16_t opcode, uint64_t unique, const void *const *parts, const size_t *lens,
		    unsigned nparts, const int *fds, unsigned nfds, vy_error *e)
{
	if (!c->mb)
		return sock_send(c, opcode, unique, parts, lens, nparts, fds, nfds, e);
	int dir = c->daemon ? 0 : 1;
	uint64_t total = sizeof(vy_msg_header);
	for (unsigned i = 0; i < nparts; i++)
		total += lens[i];
	slot_header *sh = slot(c, dir);
	if (nfds || total > SLOT_BYTES - sizeof(slot_header) + sizeof(vy_msg_header)) {
		vy_err rc = sock_send(c, opcode, unique, parts, lens, nparts, fds, nfds, e);
		if (rc != VY_OK)
			return rc;
		sh->via_socket = 1;
	} else {
		sh->via_socket = 0;
		sh->h = (vy_msg_header){.len = (uint32_t)total, .opcode = opcode, .unique = unique};
		char *at = (char *)(sh + 1);
		for (unsigned i = 0; i < nparts; i++) {
			if (lens[i])
				memcpy(at, parts[i], lens[i]);
			at += lens[i];
		}
	}
	atomic_fetch_add(&c->mb->dir[dir].seq, 1); /* seq_cst: the slot is written before */
	if (atomic_load(&c->mb->dir[dir].sleeping))
		futex(&c->mb->dir[dir].seq, FUTEX_WAKE, 1, NULL);
	return VY_OK;
}

/* Whether the peer hung up: EOF on the socket, where nothing else is
 * expected while we wait on the mailbox. */
static bool peer_gone(int sock)
{
	struct pollfd p = {.fd = sock, .events = POLLIN};
	if (poll(&p, 1, 0) <= 0)
		return false;
	if (p.revents & (POLLHUP | POLLERR))
		return true;
	char b;
	return recv(sock, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Wait until the peer bumps the sequence number of `dir`. */
static vy_err mailbox_wait(vy_chan *c, int dir, int timeout_ms, unsigned spin_us, vy_error *e)
{
	_Atomic uint32_t *seq = &c->mb->dir[dir].seq;
	uint64_t start = now_ns();
	uint64_t until = start + (uint64_t)spin_us * 1000u;
	while (atomic_load_explicit(seq, memory_order_acquire) == c->seen && now_ns() < until)
		;
	if (atomic_load(seq) != c->seen)
		return VY_OK;
	atomic_store(&c->mb->dir[dir].sleeping, 1);
	vy_err rc = VY_OK;
	while (atomic_load(seq) == c->seen) {
		uint64_t waited_ms = (now_ns() - start) / 1000000u;
		if (timeout_ms >= 0 && waited_ms >= (uint64_t)timeout_ms) {
			rc = vy_fail(e, VY_ETIMEDOUT, "raise launch_timeout, or make the work shorter",
				     "no answer within %d ms", timeout_ms);
			break;
		}
		if (peer_gone(c->sock)) {
			rc = broken(c, e, "closed (the other process exited)");
			break;
		}
		uint64_t slice = SLICE_MS;
		if (timeout_ms >= 0 && (uint64_t)timeout_ms - waited_ms < slice)
			slice = (uint64_t)timeout_ms - waited_ms;
		struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(slice ? slice : 1) * 1000000L};
		futex(seq, FUTEX_WAIT, c->seen, &ts);
	}
	atomic_store(&c->mb->dir[dir].sleeping, 0);
	return rc;
}

vy_err vy_chan_recv(vy_chan *c, int timeout_ms, unsigned spin_us, vy_msg *m, vy_error *e)
{
	memset(m, 0, sizeof(*m));
	if (!c->mb) {
		struct pollfd p = {.fd = c->sock, .events = POLLIN};
		bool ready = false;
		if (spin_us) {
			uint64_t until = now_ns() + (uint64_t)spin_us * 1000u;
			do
				ready = poll(&p, 1, 0) > 0;
			while (!ready && now_ns() < until);
		}
		while (!ready) {
			int r = poll(&p, 1, timeout_ms);
			if (r > 0)
				break;
			if (r == 0)
				return vy_fail(e, VY_ETIMEDOUT, "raise launch_timeout, or make the work shorter",
					       "no answer within %d ms", timeout_ms);
			if (errno != EINTR)
				return broken(c, e, strerror(errno));
		}
		return sock_recv(c, NULL, m, e);
	}
	int dir = c->daemon ? 1 : 0;
	vy_err rc = mailbox_wait(c, dir, timeout_ms, spin_us, e);
	if (rc != VY_OK)
		return rc;
	c->seen = atomic_load(&c->mb->dir[dir].seq);
	slot_header sh;
	memcpy(&sh, slot(c, dir), sizeof(sh));
	if (sh.via_socket)
		return sock_recv(c, NULL, m, e);
	if (sh.h.len < sizeof(sh.h) || sh.h.len - sizeof(sh.h) > SLOT_BYTES - sizeof(slot_header) || sh.h.nfds)
		return broken(c, e, "sent a malformed header");
	m->h = sh.h;
	m->len = sh.h.len - sizeof(sh.h);
	if (m->len) {
		m->body = malloc(m->len);
		if (!m->body)
			return vy_fail(e, VY_ENOMEM, "free host memory", "cannot receive a message of %zu bytes", m->len);
		memcpy(m->body, (char *)slot(c, dir) + sizeof(slot_header), m->len);
	}
	return VY_OK;
}
