/* takeover probe: what the keeper (tkkeeper.c), the daemons (tkfs.c) and the
 * driver (tkrun.c) share: the state region's layout, fd passing over a unix
 * socket, and the one-line events every process writes to the driver's pipe. */
#ifndef TK_H
#define TK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define TK_MAGIC 0x746b7374u /* "tkst" */
#define TK_VERSION 1u
#define TK_STATE_SIZE 4096u
#define TK_INIT_MAX 256u /* the kernel's INIT request, header and body */

/* The state region: a memfd the keeper creates and holds; every daemon maps
 * it shared. Only what a successor needs: the kernel's INIT request as the
 * first daemon read it, the INIT reply it sent (to check that the successor
 * negotiates the same), and the file's counter. */
struct tk_state {
	uint32_t magic, version;
	uint32_t init_in_len, init_out_len;
	unsigned char init_in[TK_INIT_MAX];
	unsigned char init_out[TK_INIT_MAX];
	_Atomic uint64_t counter; /* READs of offset 0 answered, over every generation */
};
_Static_assert(sizeof(struct tk_state) <= TK_STATE_SIZE, "state fits its memfd");

static inline uint64_t tk_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* system-wide: comparable across processes */
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One line to the driver's pipe; under PIPE_BUF, so lines never interleave. */
static inline void tk_event(int evfd, const char *fmt, ...)
{
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (evfd >= 0 && write(evfd, line, (size_t)n) != n)
		perror("tk: event");
}

/* Send `n` fds (n <= 4) with a one-byte message. */
static inline int tk_send_fds(int sock, const int *fds, int n)
{
	char byte = 'F';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} c;
	memset(&c, 0, sizeof(c));
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
			     .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int))};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, (size_t)n * sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

/* Receive exactly `n` fds; -1 on anything else (they are closed). */
static inline int tk_recv_fds(int sock, int *fds, int n)
{
	char byte;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} c;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
			     .msg_controllen = sizeof(c.buf)};
	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	size_t got = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	if (got > 4)
		return -1;
	int tmp[4];
	memcpy(tmp, CMSG_DATA(cm), got * sizeof(int));
	if (got != (size_t)n || (msg.msg_flags & MSG_CTRUNC)) {
		for (size_t i = 0; i < got; i++)
			close(tmp[i]);
		return -1;
	}
	memcpy(fds, tmp, got * sizeof(int));
	return 0;
}

#endif
