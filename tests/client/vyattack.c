/* A hostile client of the daemon's socket, for tests/client/trust_test.sh:
 * it speaks the framing of proto/proto.h by hand (no libvyrefs, so the
 * client library's own checks cannot hide what the daemon accepts) and
 * sends what libvyrefs never would.
 *
 *   vyattack SOCK map-fd FILE FLAGS [readonly] [mapflags=N] [dump] [truncate] [escalate]
 *     readonly: ask VY_CLIENT_MAP_READONLY (mapflags=N: any flags word);
 *     escalate: every way to write through the fds it got, each printed
 *     as `NAME: OK` or `NAME: ERRNO`
 *   vyattack SOCK copy-into MOUNTFILE FLAGS OTHER OTHERFLAGS
 *   vyattack SOCK copy-out MOUNTFILE FLAGS OTHER OTHERFLAGS
 *   vyattack SOCK flood-fds N HOLD_S     N unfinished messages of 128 fds
 *   vyattack SOCK idle-conns N RETRIES HOLD_S
 *   vyattack SOCK hello-twice
 *   vyattack SOCK extra-fds OPCODE N
 *
 * VYATTACK_MINOR=N: say protocol 2.N at HELLO (an older client's).
 * VYATTACK_UNIQUE=N: the request id of every message after HELLO (7).
 * VYATTACK_HANDOFF=1: after HELLO, fork; the process that connected exits
 * and its child, once that process is gone (reaped), sends the rest.
 *
 * SOCK: a mount's root (its .vyre/socket names the socket), `@NAME` or a
 * socket's path. FILE: a path, or fd:N for an fd the caller left open.
 * FLAGS: O_RDONLY, O_WRONLY, O_RDWR or O_PATH, with |O_APPEND or |O_NONBLOCK.
 * A reply prints as `reply OK`, `refused ERRNO: MESSAGE` or `closed` (no
 * reply); the exit status is 0, the errno, or 3 (closed); 4 when this
 * program itself failed (`local: ...`). The flood commands print `ready`
 * once in place, hold HOLD_S seconds, then `closed-by-daemon K`. */
#include "core/err.h"
#include "proto/proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define FDS_SENT 128 /* as many as VY_PROTO_FDS_MAX: the most a daemon ever took */

static const char *sock_arg;

static int local_fail(const char *what)
{
	printf("local: %s: %s\n", what, strerror(errno));
	exit(4);
}

/* The socket's address from SOCK (see the top). */
static socklen_t address_of(const char *arg, struct sockaddr_un *a)
{
	char name[sizeof(a->sun_path) + 2] = "";
	struct stat st;
	if (arg[0] == '@' || (stat(arg, &st) == 0 && S_ISSOCK(st.st_mode))) {
		snprintf(name, sizeof(name), "%s", arg);
	} else {
		char path[4096];
		snprintf(path, sizeof(path), "%s/.vyre/socket", arg);
		FILE *f = fopen(path, "r");
		if (!f || !fgets(name, sizeof(name), f))
			local_fail(path);
		fclose(f);
		name[strcspn(name, "\n")] = 0;
	}
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	size_t n = strlen(name);
	if (n < 2 || n >= sizeof(a->sun_path) || (name[0] != '@' && name[0] != '/')) {
		printf("local: the socket's name \"%s\" is neither @NAME nor a path\n", name);
		exit(4);
	}
	memcpy(a->sun_path, name, n); /* @NAME: a NUL in front, the abstract namespace */
	if (name[0] == '@')
		a->sun_path[0] = 0;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (name[0] == '/'));
}

/* A connection, or -1 with errno (the floods count refusals). */
static int try_connect(void)
{
	struct sockaddr_un a;
	socklen_t len = address_of(sock_arg, &a);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (connect(s, (struct sockaddr *)&a, len) != 0) {
		int err = errno;
		close(s);
		errno = err;
		return -1;
	}
	return s;
}

static int must_connect(void)
{
	int s = try_connect();
	if (s < 0)
		local_fail("connect");
	return s;
}

/* One message: the header, a body, fds with the first byte. */
static uint64_t next_unique = 7; /* VYATTACK_UNIQUE's, after HELLO */

static int send_msg(int s, uint16_t op, const void *body, size_t len, const int *fds, unsigned nfds)
{
	vy_msg_header h = {.len = (uint32_t)(sizeof(h) + len), .opcode = op, .nfds = (uint16_t)nfds,
			   .unique = op == VY_OP_CLIENT_HELLO ? 7 : next_unique};
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)body, len}};
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr align;
	} ctrl;
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
	if (nfds) {
		mh.msg_control = ctrl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		*c = (struct cmsghdr){.cmsg_len = CMSG_LEN(sizeof(int) * nfds), .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS};
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	ssize_t n = sendmsg(s, &mh, MSG_NOSIGNAL);
	return n == (ssize_t)(sizeof(h) + len) ? 0 : -1;
}

static int read_full(int s, void *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(s, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

typedef struct reply {
	vy_msg_header h;
	char body[4096];
	int fds[253];
	unsigned nfds;
} reply;

/* The next message; -1 when the daemon closed the connection first. */
static int recv_msg(int s, reply *r)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 253)];
		struct cmsghdr align;
	} ctrl;
	struct iovec iov = {&r->h, sizeof(r->h)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl.buf, .msg_controllen = sizeof(ctrl.buf)};
	r->nfds = 0;
	ssize_t n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		for (size_t i = 0; c->cmsg_type == SCM_RIGHTS && i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
			memcpy(&r->fds[r->nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	if ((size_t)n < sizeof(r->h) && read_full(s, (char *)&r->h + n, sizeof(r->h) - (size_t)n) != 0)
		return -1;
	if (r->h.len < sizeof(r->h) || r->h.len - sizeof(r->h) > sizeof(r->body))
		return -1;
	return read_full(s, r->body, r->h.len - sizeof(r->h));
}

/* Print a reply's status; the exit status it stands for. */
static int show_status(int got, const reply *r)
{
	if (got != 0) {
		printf("closed\n");
		return 3;
	}
	vy_status st;
	memcpy(&st, r->body, sizeof(st));
	st.msg[sizeof(st.msg) - 1] = 0;
	if (st.rc == VY_OK) {
		printf("reply OK\n");
		return 0;
	}
	int err = vy_err_errno((vy_err)st.rc);
	printf("refused %s: %s\n", strerrorname_np(err) ? strerrorname_np(err) : "?", st.msg);
	return err;
}

/* A request and its reply (a COPY's progress messages skipped). */
static int request(int s, uint16_t op, const void *body, size_t len, const int *fds, unsigned nfds, reply *r)
{
	if (send_msg(s, op, body, len, fds, nfds) != 0)
		return -1;
	int got;
	while ((got = recv_msg(s, r)) == 0 && r->h.opcode == VY_OP_CLIENT_PROGRESS)
		;
	return got;
}

static int hello(int s)
{
	const char *minor = getenv("VYATTACK_MINOR");
	vy_hello_in in = {.major = VY_PROTO_MAJOR, .minor = minor ? (uint32_t)atoi(minor) : VY_PROTO_MINOR};
	reply r;
	return request(s, VY_OP_CLIENT_HELLO, &in, sizeof(in), NULL, 0, &r) == 0 && ((vy_status *)r.body)->rc == VY_OK
		       ? 0
		       : -1;
}

static int flags_of(const char *s)
{
	static const struct {
		const char *name;
		int flag;
	} names[] = {{"O_RDONLY", O_RDONLY}, {"O_WRONLY", O_WRONLY}, {"O_RDWR", O_RDWR},
		     {"O_PATH", O_PATH},     {"O_APPEND", O_APPEND}, {"O_NONBLOCK", O_NONBLOCK}};
	int flags = 0;
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *save, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
		size_t i = 0;
		while (i < sizeof(names) / sizeof(names[0]) && strcmp(names[i].name, t))
			i++;
		if (i == sizeof(names) / sizeof(names[0])) {
			printf("local: unknown flag %s\n", t);
			exit(2);
		}
		flags |= names[i].flag;
	}
	return flags;
}

/* FILE as an fd: fd:N as it is, a path opened with FLAGS. */
static int open_arg(const char *file, const char *flags)
{
	if (!strncmp(file, "fd:", 3))
		return atoi(file + 3);
	int fd = open(file, flags_of(flags) | O_CLOEXEC);
	if (fd < 0)
		local_fail(file);
	return fd;
}

/* What a mapping shows: the file's first bytes and every byte that is not
 * the file's: before its byte 0 (its lead, a placed file's) and past its
 * end (host memfds; a GPU's fds do not mmap). */
static void dump(const reply *r, const vy_client_map_out *out)
{
	const uint64_t *sizes = (const uint64_t *)(r->body + (r->h.len - sizeof(r->h)) - out->nchunks * sizeof(uint64_t));
	uint64_t at = 0, past = 0, nonzero = 0;
	char sample[65] = "", content[33] = "";
	for (unsigned i = 0; i < out->nchunks && i < r->nfds; at += sizes[i++]) {
		unsigned char *p = mmap(NULL, sizes[i], PROT_READ, MAP_SHARED, r->fds[i], 0);
		if (p == MAP_FAILED) {
			printf("dump: chunk %u does not map: %s\n", i, strerror(errno));
			continue;
		}
		for (uint64_t j = 0; j < sizes[i]; j++) {
			size_t k;
			if (at + j >= out->lead && at + j - out->lead < out->size) {
				if ((k = strlen(content)) < 32)
					content[k] = p[j] >= 32 && p[j] < 127 ? (char)p[j] : '.';
				continue;
			}
			past++;
			if (p[j] && nonzero++ < 64)
				sample[strlen(sample)] = p[j] >= 32 && p[j] < 127 ? (char)p[j] : '.';
		}
		munmap(p, sizes[i]);
	}
	printf("content: %s\npast-eof bytes=%llu nonzero=%llu sample: %s\n", content, (unsigned long long)past,
	       (unsigned long long)nonzero, sample);
}

static const char *said(int rc)
{
	return rc == 0 ? "OK" : strerrorname_np(errno) ? strerrorname_np(errno) : "?";
}

/* Each way a receiver of read-only fds could get to write the memory. */
static void escalate(const reply *r)
{
	for (unsigned i = 0; i < r->nfds; i++) {
		int fd = r->fds[i];
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		int again = open(path, O_RDWR | O_CLOEXEC);
		printf("reopen-rdwr: %s\n", said(again < 0 ? -1 : 0));
		if (again >= 0)
			close(again);
		void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		printf("mmap-shared-write: %s\n", said(p == MAP_FAILED ? -1 : 0));
		if (p != MAP_FAILED)
			munmap(p, 4096);
		p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
		printf("mprotect-write: %s\n", p == MAP_FAILED ? "no-mapping" : said(mprotect(p, 4096, PROT_READ | PROT_WRITE)));
		if (p != MAP_FAILED)
			munmap(p, 4096);
		printf("pwrite: %s\n", said(pwrite(fd, "X", 1, 0) == 1 ? 0 : -1));
		printf("fchmod: %s\n", said(fchmod(fd, 0666)));
		printf("fallocate: %s\n", said(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096)));
		printf("add-seals: %s\n", said(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE)));
		int fl = fcntl(fd, F_GETFL);
		printf("setfl-rdwr: %s\n", said(fl >= 0 && fcntl(fd, F_SETFL, (fl & ~O_ACCMODE) | O_RDWR) == 0 &&
							(fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDWR ? 0 : (errno = EBADF, -1)));
	}
}

static int map_fd(int s, int argc, char **argv)
{
	if (argc < 2)
		return 2;
	int fd = open_arg(argv[0], argv[1]);
	vy_client_map_in in = {0};
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "readonly"))
			in.flags |= VY_CLIENT_MAP_READONLY;
		if (!strncmp(argv[i], "mapflags=", 9))
			in.flags = (uint32_t)strtoul(argv[i] + 9, NULL, 0);
	}
	reply r;
	int got = request(s, VY_OP_CLIENT_MAP, &in, sizeof(in), &fd, 1, &r);
	int rc = show_status(got, &r);
	if (rc != 0)
		return rc;
	vy_client_map_out out;
	memcpy(&out, r.body, sizeof(out));
	if (r.h.len - sizeof(r.h) < sizeof(out) + out.nchunks * sizeof(uint64_t))
		out.lead = 0; /* a reply to a 2.2 client ends before the lead */
	printf("mapped size=%llu bytes=%llu chunks=%u fds=%u lead=%llu\n", (unsigned long long)out.size,
	       (unsigned long long)out.bytes, out.nchunks, r.nfds, (unsigned long long)out.lead);
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "dump"))
			dump(&r, &out);
		if (!strcmp(argv[i], "truncate") && r.nfds) {
			/* Grow, then shrink to nothing: either would break the daemon. */
			printf("ftruncate grow: %s\n", ftruncate(r.fds[0], (off_t)out.bytes + (4 << 20)) == 0 ? "OK" : strerrorname_np(errno));
			printf("ftruncate 0: %s\n", ftruncate(r.fds[0], 0) == 0 ? "OK" : strerrorname_np(errno));
		}
		if (!strcmp(argv[i], "escalate"))
			escalate(&r);
	}
	return 0;
}

static int copy(int s, bool into, int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int fds[2] = {open_arg(argv[0], argv[1]), open_arg(argv[2], argv[3])};
	struct stat st;
	/* Into: as many bytes as the mount's file has (the test sized it);
	 * the other fd is never looked at here (it may hang). */
	vy_client_copy_in in = {.direction = into ? VY_COPY_INTO : VY_COPY_OUT, .threads = 1,
				.size = into && fstat(fds[0], &st) == 0 ? (uint64_t)st.st_size : 0};
	reply r;
	int rc = show_status(request(s, VY_OP_CLIENT_COPY, &in, sizeof(in), fds, 2, &r), &r);
	if (rc == 0) {
		vy_client_copy_out out;
		memcpy(&out, r.body, sizeof(out));
		printf("copied %llu of %llu\n", (unsigned long long)out.done, (unsigned long long)out.total);
	}
	return rc;
}

/* How many of these connections the daemon has closed. */
static unsigned closed_by_daemon(const int *s, unsigned n)
{
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		struct pollfd p = {.fd = s[i], .events = POLLIN};
		char b;
		if (poll(&p, 1, 0) > 0 && ((p.revents & (POLLHUP | POLLERR)) || recv(s[i], &b, 1, MSG_DONTWAIT) <= 0))
			k++;
	}
	return k;
}

static int flood(bool with_fds, unsigned n, unsigned retries, unsigned hold)
{
	int *s = calloc(n ? n : 1, sizeof(int)), devnull = open("/dev/null", O_RDONLY | O_CLOEXEC), fds[FDS_SENT];
	if (!s || devnull < 0)
		local_fail("setup");
	for (unsigned i = 0; i < FDS_SENT; i++)
		fds[i] = devnull;
	unsigned ok = 0, refused = 0;
	int first_err = 0;
	for (unsigned i = 0; i < n + retries; i++) {
		int c = try_connect();
		/* A header promising a body that never comes, with the fds. */
		vy_msg_header h = {.len = 4000, .opcode = VY_OP_CLIENT_MAP, .nfds = FDS_SENT, .unique = i};
		if (c >= 0 && with_fds && i < n) {
			struct iovec iov = {&h, sizeof(h)};
			union {
				char buf[CMSG_SPACE(sizeof(fds))];
				struct cmsghdr align;
			} ctrl;
			struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctrl.buf, .msg_controllen = sizeof(ctrl.buf)};
			struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
			*cm = (struct cmsghdr){.cmsg_len = CMSG_LEN(sizeof(fds)), .cmsg_level = SOL_SOCKET, .cmsg_type = SCM_RIGHTS};
			memcpy(CMSG_DATA(cm), fds, sizeof(fds));
			if (sendmsg(c, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && !first_err)
				first_err = errno;
		}
		if (c < 0) {
			refused++;
			if (!first_err)
				first_err = errno;
		} else if (i < n) {
			s[ok++] = c;
		} else {
			close(c);
		}
	}
	printf("ready connected=%u refused=%u first-error=%s\n", ok, refused, first_err ? strerrorname_np(first_err) : "none");
	fflush(stdout);
	sleep(hold);
	printf("closed-by-daemon %u of %u\n", closed_by_daemon(s, ok), ok);
	return 0;
}

/* VYATTACK_HANDOFF, first: the connection is made by a child of this
 * process, which reaps it once it has exited (hand_off), so that its pid
 * is no one's whoever started this program. */
static void reap_the_connecting_child(void)
{
	pid_t b = fork();
	if (b < 0)
		local_fail("fork");
	if (b == 0)
		return;
	int status;
	while (waitpid(b, &status, 0) < 0 && errno == EINTR)
		;
	_exit(0); /* the grandchild goes on with the connection and the output */
}

/* The connection goes on in a child; the process that made it exits and
 * the child waits until it is reaped (its pid is then no one's). */
static void hand_off(void)
{
	pid_t parent = getpid();
	pid_t child = fork();
	if (child < 0)
		local_fail("fork");
	if (child > 0)
		_exit(0);
	for (int i = 0; i < 10000 && kill(parent, 0) == 0; i++)
		usleep(1000);
	if (kill(parent, 0) == 0) {
		printf("local: the parent was not reaped\n");
		exit(4);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 3) {
		fprintf(stderr, "usage: see tests/client/vyattack.c\n");
		return 2;
	}
	sock_arg = argv[1];
	const char *cmd = argv[2];
	int rest = argc - 3;
	char **args = argv + 3;
	if (!strcmp(cmd, "flood-fds") && rest == 2)
		return flood(true, (unsigned)atoi(args[0]), 0, (unsigned)atoi(args[1]));
	if (!strcmp(cmd, "idle-conns") && rest == 3)
		return flood(false, (unsigned)atoi(args[0]), (unsigned)atoi(args[1]), (unsigned)atoi(args[2]));
	if (getenv("VYATTACK_HANDOFF"))
		reap_the_connecting_child();
	int s = must_connect();
	reply r;
	if (!strcmp(cmd, "hello-twice")) {
		vy_hello_in in = {.major = VY_PROTO_MAJOR, .minor = VY_PROTO_MINOR};
		show_status(request(s, VY_OP_CLIENT_HELLO, &in, sizeof(in), NULL, 0, &r), &r);
		return show_status(request(s, VY_OP_CLIENT_HELLO, &in, sizeof(in), NULL, 0, &r), &r);
	}
	if (hello(s) != 0) {
		printf("local: HELLO was not answered with OK\n");
		return 4;
	}
	if (getenv("VYATTACK_HANDOFF"))
		hand_off();
	if (getenv("VYATTACK_UNIQUE"))
		next_unique = strtoull(getenv("VYATTACK_UNIQUE"), NULL, 0);
	if (!strcmp(cmd, "map-fd"))
		return map_fd(s, rest, args);
	if (!strcmp(cmd, "copy-into") || !strcmp(cmd, "copy-out"))
		return copy(s, !strcmp(cmd, "copy-into"), rest, args);
	if (!strcmp(cmd, "extra-fds") && rest == 2) {
		/* A well-formed body for the opcode, and N fds of /dev/null. */
		unsigned n = (unsigned)atoi(args[1]);
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC), fds[253];
		for (unsigned i = 0; i < n && i < 253; i++)
			fds[i] = devnull;
		char body[16] = {0};
		int op = atoi(args[0]);
		int rc = show_status(request(s, (uint16_t)op, body, op == VY_OP_CLIENT_COPY ? 16 : 8, fds, n, &r), &r);
		/* Whether the connection goes on: a SYNC of no mapping is answered. */
		vy_client_ref_in ref = {.id = 999};
		printf("then %s\n", request(s, VY_OP_CLIENT_SYNC, &ref, sizeof(ref), NULL, 0, &r) == 0 ? "open" : "closed");
		return rc;
	}
	fprintf(stderr, "usage: see tests/client/vyattack.c\n");
	return 2;
}
