/* The keeper's protocol (keeper/wire.h, wire.c) and the keeper itself:
 * ADD and DROP, the handover of every slot to a successor once the
 * daemon's link closes unannounced (its death), and the refusal of messages that are not the protocol's. This
 * binary plays the daemons: the keeper runs it again as them. */
#include "keeper/wire.h"
#include "tests/unit/support.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define FAKE "--fake-daemon"
#define FAKE_RELEASE "--fake-releasing-daemon"
#define FAKE_RELEASE_DIE "--fake-releasing-daemon-killed"
#define FAKE_LEAVING "--fake-leaving-daemon"

static bool same_file(int a, int b)
{
	struct stat x, y;
	return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* A daemon that says LEAVING and closes with a message of the keeper's
 * unread (its standby's pid, sent as it unmounted): the kernel reports
 * ECONNRESET once, before LEAVING; the keeper must still read LEAVING
 * (else a clean unmount was taken for a death), then the end. */
static void wire_leaving_is_read_past_a_reset(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	vy_keeper_msg m, got;
	vy_keeper_msg_init(&m, VY_KEEPER_STANDBY);
	m.pid = 42;
	CHECK_EQ(vy_keeper_send(sv[0], &m, NULL), 0); /* never read */
	vy_keeper_msg_init(&m, VY_KEEPER_LEAVING);
	CHECK_EQ(vy_keeper_send(sv[1], &m, NULL), 0);
	close(sv[1]);
	int in[VY_KEEPER_BATCH];
	CHECK_EQ(vy_keeper_recv(sv[0], &got, in), 1);
	CHECK_EQ(got.op, VY_KEEPER_LEAVING);
	CHECK_EQ(vy_keeper_recv(sv[0], &got, in), 0);
	close(sv[0]);
}

static void wire_add_carries_fds_in_slot_order(void)
{
	int sv[2], p[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(pipe2(p, O_CLOEXEC) == 0);
	vy_keeper_msg m, got;
	vy_keeper_msg_init(&m, VY_KEEPER_ADD);
	m.count = 2;
	m.slot[0] = 7;
	m.slot[1] = 4;
	int fds[2] = {p[1], p[0]}, in[VY_KEEPER_BATCH];
	CHECK_EQ(vy_keeper_send(sv[0], &m, fds), 0);
	CHECK_EQ(vy_keeper_recv(sv[1], &got, in), 1);
	CHECK_EQ(got.op, VY_KEEPER_ADD);
	CHECK_EQ(got.count, 2);
	CHECK_EQ(got.slot[0], 7);
	CHECK_EQ(got.slot[1], 4);
	CHECK(same_file(in[0], p[1]) && same_file(in[1], p[0]));
	CHECK_EQ(in[2], (uint64_t)-1);
	CHECK(fcntl(in[0], F_GETFD) & FD_CLOEXEC); /* never leaks into an exec */
	/* DROP carries none; a closed peer reads as 0. */
	vy_keeper_msg_init(&m, VY_KEEPER_DROP);
	m.count = 1;
	m.slot[0] = 7;
	CHECK_EQ(vy_keeper_send(sv[0], &m, fds), 0);
	CHECK_EQ(vy_keeper_recv(sv[1], &got, in), 1);
	CHECK_EQ(got.op, VY_KEEPER_DROP);
	CHECK_EQ(in[0], (uint64_t)-1);
	close(sv[0]);
	CHECK_EQ(vy_keeper_recv(sv[1], &got, in), 0);
	for (int i = 0; i < 2; i++)
		close(in[i] >= 0 ? in[i] : -1);
	close(sv[1]);
	close(p[0]);
	close(p[1]);
}

/* A message that is not the protocol's: EPROTO, and every fd it carried
 * closed (the pipe's reader sees EOF once the sender's copy goes). */
static void wire_refuses_what_is_not_the_protocol(void)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
	for (int kind = 0; kind < 4; kind++) {
		int p[2];
		CHECK(pipe2(p, O_CLOEXEC) == 0);
		vy_keeper_msg m, got;
		vy_keeper_msg_init(&m, VY_KEEPER_ADD);
		m.count = 1;
		if (kind == 0)
			m.magic ^= 1;
		else if (kind == 1)
			m.count = 2; /* says two fds, carries one */
		else if (kind == 2)
			m.op = 99;
		else
			m.version = 2;
		/* wire.c sends count fds; send one by hand for kind 1 */
		union {
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} ctl = {0};
		struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
		struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &p[1], sizeof(int));
		CHECK_EQ(sendmsg(sv[0], &mh, 0), sizeof(m));
		close(p[1]);
		int in[VY_KEEPER_BATCH];
		errno = 0;
		CHECK_EQ(vy_keeper_recv(sv[1], &got, in), (uint64_t)-1);
		CHECK_EQ(errno, EPROTO);
		char b;
		CHECK_EQ(read(p[0], &b, 1), 0); /* the refused fd was closed */
		close(p[0]);
	}
	/* A short message. */
	char few[8] = {0};
	CHECK_EQ(send(sv[0], few, sizeof(few), 0), sizeof(few));
	vy_keeper_msg got;
	int in[VY_KEEPER_BATCH];
	CHECK_EQ(vy_keeper_recv(sv[1], &got, in), (uint64_t)-1);
	CHECK_EQ(errno, EPROTO);
	close(sv[0]);
	close(sv[1]);
}

/* The daemons this binary plays. The first hands the keeper memfds named
 * slotN in slots 0, 5 and 6, drops 6, writes "first PID" to fd `out` and
 * closes its end of the link, as the kernel does once a killed daemon's
 * last thread ended; it then lives on (its driver's teardown, say) until
 * the test kills it. The successor writes what it was handed to `out`
 * and, once `hold` reaches its end, says LEAVING and exits 0. */
static int fake_first(int out, int hold)
{
	(void)hold;
	int sock = atoi(getenv(VY_KEEPER_ENV_FD));
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_ADD);
	int fds[3];
	const unsigned slots[3] = {0, 5, 6};
	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "slot%u", slots[i]);
		fds[i] = memfd_create(name, MFD_CLOEXEC);
		m.slot[i] = slots[i];
	}
	m.count = 3;
	if (vy_keeper_send(sock, &m, fds) != 0)
		return 3;
	vy_keeper_msg_init(&m, VY_KEEPER_DROP);
	m.count = 1;
	m.slot[0] = 6;
	if (vy_keeper_send(sock, &m, NULL) != 0)
		return 3;
	char line[32];
	int n = snprintf(line, sizeof(line), "first %d\n", (int)getpid());
	if (write(out, line, (size_t)n) != n)
		return 3;
	close(sock);
	for (;;)
		pause(); /* until the test's SIGKILL */
}

static int fake_successor(int out, int hold)
{
	int sock = atoi(getenv(VY_KEEPER_ENV_FD));
	char line[512];
	int at = snprintf(line, sizeof(line), "adopt");
	for (;;) {
		vy_keeper_msg m;
		int fds[VY_KEEPER_BATCH];
		if (vy_keeper_recv(sock, &m, fds) != 1)
			return 5;
		if (m.op == VY_KEEPER_ADOPT_END) {
			at += snprintf(line + at, sizeof(line) - (size_t)at, " takeovers=%llu signal=%d status=%d death=%s\n",
				       (unsigned long long)m.takeovers, m.cause_signal, m.cause_status,
				       m.death_ns ? "set" : "0");
			break;
		}
		for (uint32_t i = 0; i < m.count; i++) {
			char link[64], target[128] = "";
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fds[i]);
			ssize_t n = readlink(link, target, sizeof(target) - 1);
			target[n > 0 ? n : 0] = '\0';
			at += snprintf(line + at, sizeof(line) - (size_t)at, " %u:%s", m.slot[i], target);
		}
	}
	if (write(out, line, strlen(line)) != (ssize_t)strlen(line))
		return 6;
	char b;
	while (read(hold, &b, 1) > 0)
		;
	vy_keeper_msg bye;
	vy_keeper_msg_init(&bye, VY_KEEPER_LEAVING); /* as every exit of vyrefs' own says */
	return vy_keeper_send(sock, &bye, NULL) == 0 ? 0 : 7;
}

/* The next message of `op` on sock within 10 s (its fds closed); false
 * when none came. */
static bool recv_op(int sock, uint32_t op, vy_keeper_msg *m)
{
	for (;;) {
		struct pollfd pf = {.fd = sock, .events = POLLIN};
		int fds[VY_KEEPER_BATCH];
		if (poll(&pf, 1, 10000) != 1 || vy_keeper_recv(sock, m, fds) != 1)
			return false;
		for (uint32_t i = 0; i < m->count; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (m->op == op)
			return true;
	}
}

/* A daemon that unmounts cleanly: it hands the keeper a pipe's write end
 * as memory (slot 6), closes its own, says LEAVING and RELEASE, and once
 * RELEASED came writes to `out` whether its keeper said it answers
 * RELEASE (env: its parent's pid) and whether the pipe's reader then sees
 * its end (the keeper closed the memory it held before it answered).
 * `die`: it is then killed, as teardown might be. */
static int fake_release(int out, bool die)
{
	int sock = atoi(getenv(VY_KEEPER_ENV_FD));
	const char *env = getenv(VY_KEEPER_ENV_RELEASE);
	int p[2];
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
		return 3;
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_ADD);
	m.count = 2;
	m.slot[0] = VY_KEEPER_SLOT_FUSE; /* a mount to take over, but for RELEASE */
	m.slot[1] = VY_KEEPER_SLOT_MEMORY;
	int fds[2] = {memfd_create("fuse", MFD_CLOEXEC), p[1]};
	if (fds[0] < 0 || vy_keeper_send(sock, &m, fds) != 0)
		return 3;
	close(fds[0]);
	close(p[1]);
	vy_keeper_msg_init(&m, VY_KEEPER_LEAVING);
	if (vy_keeper_send(sock, &m, NULL) != 0)
		return 3;
	vy_keeper_msg_init(&m, VY_KEEPER_RELEASE);
	if (vy_keeper_send(sock, &m, NULL) != 0)
		return 3;
	bool released = recv_op(sock, VY_KEEPER_RELEASED, &m);
	char b, line[64];
	ssize_t r = read(p[0], &b, 1);
	int n = snprintf(line, sizeof(line), "env=%s released=%d eof=%d\n",
			 env && atoi(env) == (int)getppid() ? "keeper" : env ? env : "-", released, r == 0);
	if (write(out, line, (size_t)n) != n)
		return 4;
	if (die)
		raise(SIGKILL);
	return 0;
}

/* With --standby: a first daemon that hands /dev/fuse (a memfd), learns
 * its standby's pid (STANDBY), says LEAVING, and writes to `out` whether
 * the standby ended before it says RELEASE (a pidfd, within 10 s); then
 * RELEASE, and exit 0 once RELEASED. The standby says it is ready and
 * waits to be killed. */
static int fake_leaving(int out)
{
	int sock = atoi(getenv(VY_KEEPER_ENV_FD));
	vy_keeper_msg m;
	if (getenv(VY_KEEPER_ENV_STANDBY)) {
		vy_keeper_msg_init(&m, VY_KEEPER_STANDBY_READY);
		if (vy_keeper_send(sock, &m, NULL) != 0)
			return 3;
		for (;;)
			pause(); /* until the keeper's SIGKILL */
	}
	vy_keeper_msg_init(&m, VY_KEEPER_ADD);
	m.count = 1;
	m.slot[0] = VY_KEEPER_SLOT_FUSE;
	int fuse = memfd_create("fuse", MFD_CLOEXEC);
	if (fuse < 0 || vy_keeper_send(sock, &m, &fuse) != 0)
		return 3;
	close(fuse);
	if (!recv_op(sock, VY_KEEPER_STANDBY, &m) || m.pid <= 0)
		return 4;
	int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)m.pid, 0);
	if (pidfd < 0)
		return 5;
	vy_keeper_msg_init(&m, VY_KEEPER_LEAVING);
	if (vy_keeper_send(sock, &m, NULL) != 0)
		return 3;
	struct pollfd pf = {.fd = pidfd, .events = POLLIN};
	int ended = poll(&pf, 1, 10000) == 1;
	vy_keeper_msg_init(&m, VY_KEEPER_RELEASE);
	if (vy_keeper_send(sock, &m, NULL) != 0)
		return 3;
	bool released = recv_op(sock, VY_KEEPER_RELEASED, &m);
	char line[64];
	int n = snprintf(line, sizeof(line), "standby ended at LEAVING=%d released=%d\n", ended, released);
	return write(out, line, (size_t)n) == n ? 0 : 6;
}

/* A line from fd into line[cap] (its newline kept), waiting at most 10 s
 * for each read: a keeper that never acts fails the test, not hangs it. */
static void read_line(int fd, char *line, size_t cap)
{
	size_t got = 0;
	line[0] = '\0';
	while (got < cap - 1) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 10000) != 1)
			break;
		ssize_t k = read(fd, line + got, 1);
		if (k <= 0)
			break;
		got++;
		if (line[got - 1] == '\n')
			break;
	}
	line[got] = '\0';
}

/* The keeper binary under BUILD and this test binary (the fakes it
 * starts): false, failing the test, when either is missing. */
static bool keeper_and_self(char keeper[512], char self[512])
{
	const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
	snprintf(keeper, 512, "%s/vyrefs-keeper", build);
	ssize_t n = readlink("/proc/self/exe", self, 511);
	CHECK(n > 0);
	self[n > 0 ? n : 0] = '\0';
	if (n <= 0 || access(keeper, X_OK) != 0) {
		CHECK(!"build the keeper first (make)");
		return false;
	}
	return true;
}

/* The first daemon's link closes while it still lives (a killed daemon's
 * fds are closed before the kernel reaps it, 100 ms or more before on a
 * GPU): the keeper hands the mount over then, not at its waitpid, and logs
 * the cause once it is reaped. */
static void keeper_hands_over_when_the_link_closes(void)
{
	char keeper[512], self[512];
	if (!keeper_and_self(keeper, self))
		return;
	int r[2], hold[2], err[2];
	/* The report's and hold's ends cross exec into the fakes; the
	 * keeper's stderr comes back on err. */
	CHECK(pipe(r) == 0 && pipe2(hold, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		int h = dup(hold[0]);
		char out[16], hs[16];
		snprintf(out, sizeof(out), "%d", r[1]);
		snprintf(hs, sizeof(hs), "%d", h);
		if (h < 0 || dup2(err[1], 2) < 0)
			_exit(127);
		execl(keeper, keeper, self, FAKE, out, hs, (char *)NULL);
		_exit(127);
	}
	close(r[1]);
	close(hold[0]);
	close(err[1]);
	char first[64], line[512], said[512];
	read_line(r[0], first, sizeof(first));
	int fpid = 0;
	CHECK_EQ(sscanf(first, "first %d", &fpid), 1);
	/* The first still lives: the successor reports. */
	read_line(r[0], line, sizeof(line));
	const char *want =
		"adopt 0:/memfd:slot0 (deleted) 5:/memfd:slot5 (deleted) takeovers=1 signal=0 status=-1 death=set\n";
	if (strcmp(line, want) != 0) {
		fprintf(stderr, "  the successor got: %s  expected:     %s", line, want);
		vy_test_failures++;
	}
	CHECK(fpid > 0 && kill(fpid, 0) == 0); /* not reaped yet */
	if (fpid > 0)
		kill(fpid, SIGKILL);
	char expect[128];
	snprintf(expect, sizeof(expect), "the daemon (pid %d) found dead at takeover 1 was killed by SIGKILL", fpid);
	bool named = false;
	for (int i = 0; i < 8 && !named; i++) {
		read_line(err[0], said, sizeof(said));
		named = strstr(said, expect) != NULL;
		if (!said[0])
			break;
	}
	if (!named) {
		fprintf(stderr, "  the keeper did not log: %s\n", expect);
		vy_test_failures++;
	}
	close(hold[1]); /* the successor exits 0: the keeper ends with it */
	int st = -1;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	close(r[0]);
	close(err[0]);
}

/* The keeper [opt] running this binary as `fake`, which reports on fd
 * `out`; its stderr to /dev/null. */
static pid_t start_keeper(const char *keeper, const char *opt, const char *self, const char *fake, int out)
{
	pid_t pid = fork();
	if (pid == 0) {
		char num[16];
		snprintf(num, sizeof(num), "%d", out);
		int null = open("/dev/null", O_WRONLY);
		if (null < 0 || dup2(null, 2) < 0)
			_exit(127);
		if (opt)
			execl(keeper, keeper, opt, self, fake, num, (char *)NULL);
		else
			execl(keeper, keeper, self, fake, num, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The fake daemon's next line on fd is `want`. */
static void expect_line(int fd, const char *want)
{
	char line[128];
	read_line(fd, line, sizeof(line));
	if (strcmp(line, want) != 0) {
		fprintf(stderr, "  the daemon saw: %s  expected:     %s", line, want);
		vy_test_failures++;
	}
}

/* A clean unmount: the keeper tells its daemons it answers RELEASE, and
 * answers it only once the memory it held is closed; then it ends with
 * the daemon's exit 0. */
static void keeper_releases_memory_at_a_clean_unmount(void)
{
	char keeper[512], self[512];
	if (!keeper_and_self(keeper, self))
		return;
	for (int die = 0; die < 2; die++) {
		int r[2];
		CHECK(pipe(r) == 0);
		pid_t pid = start_keeper(keeper, NULL, self, die ? FAKE_RELEASE_DIE : FAKE_RELEASE, r[1]);
		close(r[1]);
		expect_line(r[0], "env=keeper released=1 eof=1\n");
		char line[128];
		/* Killed after RELEASE: the keeper ends with it, no successor
		 * (it would say so on the pipe). */
		int st = -1;
		CHECK_EQ(waitpid(pid, &st, 0), pid);
		CHECK(WIFEXITED(st));
		CHECK_EQ(WEXITSTATUS(st), die ? 1 : 0);
		read_line(r[0], line, sizeof(line));
		CHECK_EQ(strlen(line), 0);
		close(r[0]);
	}
}

/* A daemon that leaves on purpose (an unmount): its standby takes
 * nothing, so the keeper kills it at LEAVING, its driver's teardown beside
 * the daemon's own, not at RELEASE, where the daemon waits for it. */
static void keeper_ends_the_standby_as_the_daemon_leaves(void)
{
	char keeper[512], self[512];
	if (!keeper_and_self(keeper, self))
		return;
	int r[2];
	CHECK(pipe(r) == 0);
	pid_t pid = start_keeper(keeper, "--standby", self, FAKE_LEAVING, r[1]);
	close(r[1]);
	expect_line(r[0], "standby ended at LEAVING=1 released=1\n");
	int st = -1;
	CHECK_EQ(waitpid(pid, &st, 0), pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	close(r[0]);
}

int main(int argc, char **argv)
{
	if (argc == 3 && (!strcmp(argv[1], FAKE_RELEASE) || !strcmp(argv[1], FAKE_RELEASE_DIE)))
		return fake_release(atoi(argv[2]), !strcmp(argv[1], FAKE_RELEASE_DIE));
	if (argc == 4 && !strcmp(argv[1], VY_KEEPER_ADOPT_ARG) && !strncmp(argv[2], FAKE_RELEASE, strlen(FAKE_RELEASE)))
		return write(atoi(argv[3]), "successor\n", 10) == 10 ? 9 : 8; /* a successor: must never start */
	if (argc == 3 && !strcmp(argv[1], FAKE_LEAVING))
		return fake_leaving(atoi(argv[2]));
	if (argc == 4 && !strcmp(argv[1], VY_KEEPER_ADOPT_ARG) && !strcmp(argv[2], FAKE_LEAVING))
		return fake_leaving(atoi(argv[3])); /* the standby */
	if (argc == 4 && !strcmp(argv[1], FAKE))
		return fake_first(atoi(argv[2]), atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], VY_KEEPER_ADOPT_ARG) && !strcmp(argv[2], FAKE))
		return fake_successor(atoi(argv[3]), atoi(argv[4]));
	static const vy_test_case cases[] = {
		TEST_CASE(wire_add_carries_fds_in_slot_order),
		TEST_CASE(wire_leaving_is_read_past_a_reset),
		TEST_CASE(wire_refuses_what_is_not_the_protocol),
		TEST_CASE(keeper_hands_over_when_the_link_closes),
		TEST_CASE(keeper_releases_memory_at_a_clean_unmount),
		TEST_CASE(keeper_ends_the_standby_as_the_daemon_leaves),
	};
	return vy_test_main("keeper", cases, sizeof(cases) / sizeof(cases[0]));
}
