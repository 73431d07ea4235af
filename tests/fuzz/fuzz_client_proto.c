/* libFuzzer target for the receive side of the client socket (issue 25):
 * whatever a client writes, with whatever fds, proto/channel.c's
 * vy_chan_recv under the map server's limits (socket only, 4096-byte
 * messages) returns whole messages that keep the header's promises or an
 * error, never crashes, hangs or leaks, and every fd that came is closed
 * once the message is freed.
 *
 * Input: byte 0 says how many fds ride along (0-3, or 4 to 224 past 200:
 * more than VY_PROTO_FDS_MAX), byte 1 at which byte of the stream they go
 * (0: the first, as a client sends them; else byte1 * 16), the rest is the
 * stream. tests/fuzz/corpus_proto/ holds the attacks of issue 25, made by
 * tests/fuzz/make_corpus_proto.py. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/channel.h"

#define FDS_MAX 224
#define FD_SCAN 1024 /* open fds are counted below this */

static int open_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < FD_SCAN; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/* Write `len` bytes, `nfds` copies of fd riding on byte `at`. */
static void feed(int s, const uint8_t *p, size_t len, int fd, unsigned nfds, size_t at)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * FDS_MAX)];
		struct cmsghdr align;
	} ctrl;
	if (at > len)
		at = len;
	if (at > 0 && write(s, p, at) != (ssize_t)at)
		abort(); /* the socket's buffer holds a whole input */
	struct iovec iov = {.iov_base = (void *)(p + at), .iov_len = len - at};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds) {
		int fds[FDS_MAX];
		for (unsigned i = 0; i < nfds; i++)
			fds[i] = fd;
		mh.msg_control = ctrl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		*c = (struct cmsghdr){.cmsg_len = CMSG_LEN(sizeof(int) * nfds), .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS};
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	/* fds need a byte to ride on: with none left they are not sent. */
	if (len > at && sendmsg(s, &mh, MSG_NOSIGNAL) != (ssize_t)(len - at))
		abort();
}

/* The daemon's decoding of a request's body (sock/mapsrv.c): each opcode's
 * struct when the length is its size; what it reads must lie in the body. */
static void decode(const vy_msg *m)
{
	union {
		vy_hello_in hello;
		vy_client_map_in map;
		vy_client_ref_in ref;
		vy_client_copy_in copy;
	} in;
	size_t want = 0;
	switch (m->h.opcode) {
	case VY_OP_CLIENT_HELLO: want = sizeof(in.hello); break;
	case VY_OP_CLIENT_MAP: want = sizeof(in.map); break;
	case VY_OP_CLIENT_SYNC:
	case VY_OP_CLIENT_UNMAP: want = sizeof(in.ref); break;
	case VY_OP_CLIENT_COPY: want = sizeof(in.copy); break;
	default: return; /* refused by opcode */
	}
	if (m->len == want)
		memcpy(&in, m->body, want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int devnull = -1;
	if (devnull < 0 && (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		abort();
	if (size < 2)
		return 0;
	unsigned nfds = data[0] < 200 ? data[0] % 4u : (data[0] - 200u) * 8u + 4u;
	if (nfds > FDS_MAX)
		nfds = FDS_MAX;
	size_t at = (size_t)data[1] * 16;
	int before = open_fds();
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		abort();
	feed(sv[0], data + 2, size - 2, devnull, nfds, at);
	close(sv[0]); /* the client is done: EOF after its bytes, no wait */
	vy_chan ch = {.sock = sv[1], .mb_fd = -1, .max_len = 4096};
	for (unsigned k = 0; k < 4096; k++) {
		vy_msg m;
		vy_error e;
		if (vy_chan_recv(&ch, 0, 0, &m, &e) != VY_OK) {
			if (!strstr(e.msg, "(Fix: "))
				abort(); /* every refusal says what to do */
			break;
		}
		/* A message keeps its header's promises. */
		if (m.h.len < sizeof(m.h) || m.h.len > 4096 || m.len != m.h.len - sizeof(m.h) || (m.len && !m.body) ||
		    m.h.nfds != m.nfds || m.nfds > VY_PROTO_FDS_MAX)
			abort();
		for (unsigned i = 0; i < m.nfds; i++)
			if (m.fds[i] < 0 || fcntl(m.fds[i], F_GETFD) < 0)
				abort();
		decode(&m);
		vy_msg_free(&m);
	}
	close(sv[1]);
	if (open_fds() != before)
		abort(); /* an fd that came with a message was kept */
	return 0;
}
