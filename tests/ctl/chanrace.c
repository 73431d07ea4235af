/* LD_PRELOAD shim for launcher_test: gives the daemon <-> launcher channel
 * (proto/channel.c) on the host backend the timing a GPU gives it, where
 * the launcher once lost a request (the daemon then waited out
 * launch_timeout):
 *  1. daemon: after the sendmsg of HELLO (opcode 1, with the mailbox fd),
 *     sleep before the channel counts it, as a preempted daemon does;
 *  2. launcher: when it closes the HELLO fd, just after opening the
 *     mailbox, sleep as cuInit and the context's creation do;
 *  3. launcher: after the recvmsg of MAP (opcode 5), sleep as cuMemMap
 *     does, so the daemon's reply spin ends and it sleeps on the futex.
 * CHANRACE_HELLO_US, CHANRACE_OPEN_US and CHANRACE_MAP_US set the sleeps. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int hello_fd = -1;

static unsigned us(const char *name, unsigned dflt)
{
	const char *v = getenv(name);
	return v ? (unsigned)atoi(v) : dflt;
}

/* The opcode of a channel message: bytes 4-5 of its header. */
static uint16_t opcode_of(const struct msghdr *mh)
{
	uint16_t op = 0;
	if (mh->msg_iovlen && mh->msg_iov[0].iov_len >= 8)
		memcpy(&op, (char *)mh->msg_iov[0].iov_base + 4, 2);
	return op;
}

ssize_t sendmsg(int fd, const struct msghdr *mh, int flags)
{
	static ssize_t (*real)(int, const struct msghdr *, int);
	if (!real)
		real = (ssize_t (*)(int, const struct msghdr *, int))dlsym(RTLD_NEXT, "sendmsg");
	uint16_t op = opcode_of(mh);
	ssize_t n = real(fd, mh, flags);
	if (n > 0 && op == 1 && mh->msg_controllen)
		usleep(us("CHANRACE_HELLO_US", 20000));
	return n;
}

ssize_t recvmsg(int fd, struct msghdr *mh, int flags)
{
	static ssize_t (*real)(int, struct msghdr *, int);
	if (!real)
		real = (ssize_t (*)(int, struct msghdr *, int))dlsym(RTLD_NEXT, "recvmsg");
	ssize_t n = real(fd, mh, flags);
	uint16_t op = n >= 8 ? opcode_of(mh) : 0;
	if (op == 1) {
		struct cmsghdr *c = CMSG_FIRSTHDR(mh);
		if (c && c->cmsg_type == SCM_RIGHTS)
			memcpy(&hello_fd, CMSG_DATA(c), sizeof(int));
	}
	if (op == 5)
		usleep(us("CHANRACE_MAP_US", 2000));
	return n;
}

int close(int fd)
{
	static int (*real)(int);
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "close");
	if (fd >= 0 && fd == hello_fd) {
		hello_fd = -1;
		usleep(us("CHANRACE_OPEN_US", 50000));
	}
	return real(fd);
}
