/* vyrefs-keeper: holds a mount's fds across its daemon's deaths (README.md).
 * No CUDA, no libfuse, no user input: its command line comes from vyrefs
 * (daemon/mount.c) and its messages from its own child's socketpair.
 *
 *   vyrefs-keeper [--report-fd N] [--standby] DAEMON [ARG...]
 *
 * Starts DAEMON ARG... with its end of a socketpair, keeps the fds it is
 * handed (keeper/wire.h), and when the daemon dies by a signal (or exits
 * VY_EXIT_TAKEOVER) starts DAEMON --adopt ARG... and hands it every slot.
 * With --standby that successor is started ahead, waiting (keeper/wire.h).
 * Any other exit ends the keeper with the daemon's status, every fd closed.
 * Tables are sized at start; nothing is allocated per message. */
#include "keeper/wire.h"
#include "keeper/trust.h"
#include "keeper/leader.h"
#include "keeper/say.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* Give up after this many deaths within this long with no successor
 * serving in between (a daemon reports SERVING once it has answered a
 * request): a successor that dies as it starts would otherwise be
 * restarted forever. Deaths of daemons that served start the count anew,
 * so a mount killed every 2 s serves on. */
#define DEATHS_MAX 5
#define DEATHS_WINDOW_NS (10ull * 1000000000ull)
#define SEND_TIMEOUT_S 10

static struct {
	bool detached; /* logs to syslog (say.h); the first daemon gets saved[] as stdio */
	int report_fd; /* mount.c's pipe to the waiting parent, for the first daemon */
	int saved[3];  /* the first daemon's stdio, when detached */
	char **first_argv, **adopt_argv;
	int *slots;    /* slot -> fd, -1: empty */
	unsigned nslots;
	int sock;      /* the serving daemon's socketpair, -1: none */
	pid_t daemon;  /* 0: none */
	bool standby_on; /* --standby: keep a successor started ahead */
	pid_t standby; /* that successor, waiting for ADOPT (0: none) */
	int standby_sock; /* its socketpair, -1: none */
	bool standby_ready; /* it said its devices are open (the serving daemon knows) */
	bool standby_follows; /* it was sent the state to follow */
	bool standby_ending; /* killed as the daemon left: reaped quietly */
	uint64_t leader_gone_ns; /* when the first thread was seen gone, the rest not (0: not seen) */
	pid_t dying;   /* a daemon taken for dead whose other threads still end (reaped later) */
	uint64_t dying_takeover; /* the takeover its link's close started (0: none), for its cause's log line */
	bool leaving;  /* the serving daemon said LEAVING: its exit status decides */
	bool released; /* it said RELEASE: the memory is gone, no successor may follow */
	bool serving;  /* the daemon serves (handed /dev/fuse, or said SERVING): its link's close is its death */
	int sigfd;
	uint64_t deaths[DEATHS_MAX]; /* ring of death times */
	uint64_t ndeaths, takeovers;
	bool fallback; /* the next successor is slot 3's binary: the one at the path refused the state */
	bool upgrading; /* the daemon left for an upgrade: its successor is the binary at the path, if trusted */
	/* Memory the serving daemon handed that this keeper could not hold
	 * (NOT_HELD, keeper/wire.h): the next death ends the mount. */
	uint64_t not_held;
} k = {.report_fd = -1, .saved = {-1, -1, -1}, .sock = -1, .standby_sock = -1};

/* Close every slot and end with the daemon's status: the last fd of
 * /dev/fuse closed, the kernel ends the connection. */
static void drop_standby(void);

static void finish(int status)
{
	vy_keeper_step("daemon reaped");
	drop_standby();
	for (unsigned i = 0; i < k.nslots; i++)
		if (k.slots[i] >= 0)
			close(k.slots[i]);
	if (k.sock >= 0)
		close(k.sock);
	vy_keeper_step("slots closed, exiting");
	exit(status);
}

/* Start a daemon: the first (it mounts) or a successor (it adopts), or a
 * standby successor; its pid and socketpair in *pid and *sock. */
static int spawn(bool adopt, bool standby, pid_t *pid_out, int *sock_out)
{
	/* Which binary: a death's successor and a standby run the one that
	 * serves, slot 3's, whatever is at the path now (another user may
	 * have put it there, or it may be gone: issue "survive 2"). An
	 * upgrade runs the binary at the path when no one but root or this
	 * keeper's user could have put it there (keeper/trust.h); else, and
	 * when it fails to start, slot 3's. */
	int held = adopt ? k.slots[VY_KEEPER_SLOT_BINARY] : -1;
	char **av = adopt ? k.adopt_argv : k.first_argv;
	bool at_path = held < 0 || (k.upgrading && !k.fallback && !standby);
	char why[600];
	if (at_path && held >= 0 && !vy_trusted_binary(av[0], geteuid(), why, sizeof(why))) {
		vy_keeper_say(LOG_ERR, "upgrade: the binary at %s is not run: %s; the binary that serves (slot 3) goes on", av[0], why);
		at_path = false;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		vy_keeper_say(LOG_ERR, "cannot create a socketpair: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		vy_keeper_say(LOG_ERR, "cannot fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		int fd = dup(sv[1]); /* without CLOEXEC: it crosses exec */
		char num[16];
		snprintf(num, sizeof(num), "%d", fd);
		if (fd < 0 || setenv(VY_KEEPER_ENV_FD, num, 1) != 0)
			_exit(127);
		unsetenv(VY_KEEPER_ENV_REPORT);
		unsetenv(VY_KEEPER_ENV_STANDBY);
		snprintf(num, sizeof(num), "%d", (int)getppid()); /* this keeper, as SO_PEERCRED names it */
		if (setenv(VY_KEEPER_ENV_RELEASE, num, 1) != 0)
			_exit(127);
		/* A standby ends with the keeper (until it takes over: then
		 * it clears this, and a serving daemon outlives its keeper). */
		if (standby && (setenv(VY_KEEPER_ENV_STANDBY, "1", 1) != 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) != 0))
			_exit(127);
		if (!adopt && k.report_fd >= 0) {
			snprintf(num, sizeof(num), "%d", k.report_fd);
			if (fcntl(k.report_fd, F_SETFD, 0) != 0 || setenv(VY_KEEPER_ENV_REPORT, num, 1) != 0)
				_exit(127);
		}
		for (int i = 0; !adopt && i < 3; i++)
			if (k.saved[i] >= 0 && dup2(k.saved[i], i) < 0)
				_exit(127);
		if (at_path) {
			execv(av[0], av);
			fprintf(stderr, "vyrefs-keeper: cannot run %s: %s%s\n", av[0], strerror(errno),
				held >= 0 ? "; running the binary that serves (slot 3)" : "");
		}
		if (held >= 0) /* the binary that wrote the state, wherever its file went */
			execveat(held, "", av, environ, AT_EMPTY_PATH);
		fprintf(stderr, "vyrefs-keeper: cannot run the binary that wrote the state: %s\n", strerror(errno));
		_exit(127);
	}
	close(sv[1]);
	struct timeval tv = {.tv_sec = SEND_TIMEOUT_S};
	if (setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
		vy_keeper_say(LOG_WARNING, "cannot bound sends to the daemon: %s", strerror(errno));
	/* The peer is the child we just started: same user. */
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(sv[0], SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != geteuid()) {
		vy_keeper_say(LOG_ERR, "the daemon's socketpair has another owner");
		close(sv[0]);
		return -1;
	}
	*sock_out = sv[0];
	*pid_out = pid;
	return 0;
}

/* Tell the serving daemon which standby is ready (0: none), for its
 * .vyre/stats; a daemon gone or slow misses nothing it needs. */
static void tell_standby(pid_t pid)
{
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_STANDBY);
	m.pid = (int32_t)pid;
	if (k.sock >= 0 && vy_keeper_send(k.sock, &m, NULL) != 0)
		vy_keeper_say(LOG_WARNING, "cannot tell the daemon about its standby: %s", strerror(errno));
}

/* The standby no longer waits (ended, or taking over). */
static void forget_standby(bool tell)
{
	if (k.standby_ready && tell)
		tell_standby(0);
	k.standby = 0;
	k.standby_ready = false;
	k.standby_follows = false;
	k.standby_ending = false;
	if (k.standby_sock >= 0)
		close(k.standby_sock);
	k.standby_sock = -1;
}

/* The state region and its images to the standby, which follows them
 * while it waits (keeper/wire.h, STATE). Failing, it loads them at the death. */
static void send_state(void)
{
	const int fds[3] = {k.slots[VY_KEEPER_SLOT_REGION], k.slots[VY_KEEPER_SLOT_IMAGE_A],
			    k.slots[VY_KEEPER_SLOT_IMAGE_B]};
	if (k.standby_follows || fds[0] < 0 || fds[1] < 0 || fds[2] < 0)
		return;
	k.standby_follows = true;
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_STATE);
	m.slot[0] = VY_KEEPER_SLOT_REGION;
	m.slot[1] = VY_KEEPER_SLOT_IMAGE_A;
	m.slot[2] = VY_KEEPER_SLOT_IMAGE_B;
	m.count = 3;
	if (vy_keeper_send(k.standby_sock, &m, fds) != 0)
		vy_keeper_say(LOG_WARNING, "cannot hand the standby the kept state to follow: %s", strerror(errno));
}

/* The standby's message: its devices are open. */
static void standby_says(void)
{
	vy_keeper_msg m;
	int fds[VY_KEEPER_BATCH];
	int rc = vy_keeper_recv(k.standby_sock, &m, fds);
	for (uint32_t i = 0; rc == 1 && i < m.count; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (rc == 1 && m.op == VY_KEEPER_STANDBY_READY && !k.standby_ready) {
		k.standby_ready = true;
		if (m.pid == VY_KEEPER_WANT_STATE)
			send_state();
		tell_standby(k.standby);
	} else if (rc == 0 || (rc < 0 && errno != EAGAIN && errno != EPROTO)) {
		close(k.standby_sock); /* it is ending: its SIGCHLD follows */
		k.standby_sock = -1;
	}
}

/* The standby, if any, ended and reaped (it may be starting its driver:
 * SIGKILL ends that too). */
static void drop_standby(void)
{
	if (k.standby > 0) {
		kill(k.standby, SIGKILL);
		while (waitpid(k.standby, NULL, 0) < 0 && errno == EINTR)
			;
	}
	forget_standby(true);
}

/* The serving daemon leaves on purpose (an unmount, an upgrade, a failed
 * start): whatever follows, its standby takes nothing (an upgrade starts
 * the binary at the path, a refused state slot 3's, anything else ends the
 * keeper), so it is killed now and its driver's teardown runs beside the
 * daemon's own; it is reaped at RELEASE or at its SIGCHLD. */
static void end_standby_early(void)
{
	if (k.standby <= 0 || k.standby_ending)
		return;
	if (kill(k.standby, SIGKILL) != 0 && errno != ESRCH)
		vy_keeper_say(LOG_WARNING, "cannot end the standby (pid %d): %s", (int)k.standby, strerror(errno));
	k.standby_ending = true;
	k.standby_ready = false; /* the daemon it would tell is leaving */
	if (k.standby_sock >= 0)
		close(k.standby_sock); /* take_successor takes no standby without it */
	k.standby_sock = -1;
	vy_keeper_step("standby killed");
}

/* A daemon serves with /dev/fuse handed: start the next one ahead. */
static void start_standby(void)
{
	if (!k.standby_on || k.standby > 0 || k.daemon <= 0 || k.slots[VY_KEEPER_SLOT_FUSE] < 0)
		return;
	if (spawn(true, true, &k.standby, &k.standby_sock) != 0) {
		vy_keeper_say(LOG_WARNING, "cannot start a standby successor; the next takeover starts one after the death");
		return;
	}
	if (fcntl(k.standby_sock, F_SETFL, O_NONBLOCK) != 0)
		vy_keeper_say(LOG_WARNING, "cannot make the standby's socketpair non-blocking: %s", strerror(errno));
	send_state(); /* at once: it follows the state while its devices open */
}

/* A successor for the mount: the standby, or one started now (an upgrade
 * wants the binary now at the path; a refused state, slot 3's). */
static int take_successor(bool fresh, bool *was_standby)
{
	*was_standby = false;
	/* A standby whose socketpair closed is ending (its SIGCHLD not in
	 * yet): it takes nothing. */
	if (fresh || k.standby <= 0 || k.standby_sock < 0)
		drop_standby();
	if (k.standby > 0) {
		k.daemon = k.standby;
		k.sock = k.standby_sock; /* blocking again for the handover (SO_SNDTIMEO bounds it) */
		k.standby_sock = -1;
		forget_standby(false); /* the daemon it would tell is dead */
		*was_standby = true;
		return fcntl(k.sock, F_SETFL, 0);
	}
	return spawn(true, false, &k.daemon, &k.sock);
}

/* Every slot to the successor, in batches, then the takeover's facts. */
static int hand_over(uint64_t death_ns, int st, bool reaped)
{
	vy_keeper_msg m;
	int fds[VY_KEEPER_BATCH];
	vy_keeper_msg_init(&m, VY_KEEPER_ADOPT);
	for (unsigned s = 0; s < k.nslots; s++) {
		if (k.slots[s] < 0)
			continue;
		m.slot[m.count] = s;
		fds[m.count++] = k.slots[s];
		if (m.count == VY_KEEPER_BATCH) {
			if (vy_keeper_send(k.sock, &m, fds) != 0)
				return -1;
			m.count = 0;
		}
	}
	if (m.count && vy_keeper_send(k.sock, &m, fds) != 0)
		return -1;
	vy_keeper_msg_init(&m, VY_KEEPER_ADOPT_END);
	m.pid = (int32_t)getpid();
	m.takeovers = k.takeovers;
	m.death_ns = death_ns;
	m.cause_signal = reaped && WIFSIGNALED(st) ? WTERMSIG(st) : 0;
	m.cause_status = !reaped ? VY_KEEPER_CAUSE_LATER : WIFEXITED(st) ? WEXITSTATUS(st) : 0;
	return vy_keeper_send(k.sock, &m, NULL);
}

/* The daemon handed `n` slots this keeper could not hold (slot[] says
 * which; n 0: it could not tell): it fails closed from now on, and tells
 * the daemon, which counts a keep failure. */
static void not_held(const uint32_t *slot, uint32_t n, const char *why)
{
	if (k.not_held++ == 0)
		vy_keeper_say(LOG_ERR, "cannot hold memory the daemon handed: %s; the mount no longer survives a death: the next "
			     "one ends its connection, as with survive=off (Fix: raise the open-file limit the mount "
			     "starts with, then umount and mount again)", why);
	if (k.daemon <= 0 || k.sock < 0)
		return; /* a dead daemon's last messages (died's drain): nobody to tell */
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_NOT_HELD);
	for (uint32_t i = 0; slot && i < n && i < VY_KEEPER_BATCH; i++)
		m.slot[m.count++] = slot[i];
	if (vy_keeper_send(k.sock, &m, NULL) != 0 && k.not_held == 1)
		vy_keeper_say(LOG_WARNING, "cannot tell the daemon of memory not held: %s (the next death ends the mount all "
				 "the same)", strerror(errno));
}

static void put_slot(uint32_t s, int fd)
{
	if (s >= k.nslots) {
		close(fd);
		not_held(&s, 1, "a slot past this keeper's table (its open-file limit)");
		return;
	}
	if (k.slots[s] >= 0)
		close(k.slots[s]);
	k.slots[s] = fd;
}

/* The daemon unmounted cleanly and freed its memory: the memory slots
 * close and the standby ends (reaped: its driver state is gone), so every
 * byte is back on the devices before the daemon's last check; then it is
 * told, and the other slots close. */
static void release(void)
{
	vy_keeper_step("RELEASE");
	k.leaving = true;
	k.released = true;
	for (unsigned s = VY_KEEPER_SLOT_MEMORY; s < k.nslots; s++)
		if (k.slots[s] >= 0) {
			close(k.slots[s]);
			k.slots[s] = -1;
		}
	vy_keeper_step("memory slots closed");
	k.standby_on = false; /* none after this */
	drop_standby();
	vy_keeper_step("standby reaped");
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_RELEASED);
	if (k.sock >= 0 && vy_keeper_send(k.sock, &m, NULL) != 0)
		vy_keeper_say(LOG_WARNING, "cannot tell the daemon its memory is released: %s", strerror(errno));
	/* No successor follows a release: the rest (the state region's
	 * pages, host memory) is freed now, beside the daemon's last steps,
	 * not after its exit. */
	for (unsigned s = 0; s < VY_KEEPER_SLOT_MEMORY && s < k.nslots; s++)
		if (k.slots[s] >= 0) {
			close(k.slots[s]);
			k.slots[s] = -1;
		}
	vy_keeper_step("state slots closed");
}

static void handle(const vy_keeper_msg *m, int *fds)
{
	switch (m->op) {
	case VY_KEEPER_ADD:
		for (uint32_t i = 0; i < m->count; i++) {
			put_slot(m->slot[i], fds[i]);
			if (m->slot[i] == VY_KEEPER_SLOT_FUSE && k.takeovers == 0) {
				k.serving = true;
				start_standby(); /* the first daemon, mounted: it serves */
			}
		}
		if (k.standby > 0 && k.standby_sock >= 0)
			send_state(); /* the region came after its standby started (once, all three there) */
		break;
	case VY_KEEPER_DROP:
		for (uint32_t i = 0; i < m->count; i++)
			if (m->slot[i] < k.nslots && k.slots[m->slot[i]] >= 0) {
				close(k.slots[m->slot[i]]);
				k.slots[m->slot[i]] = -1;
			}
		break;
	case VY_KEEPER_LEAVING:
		k.leaving = true;
		vy_keeper_step("LEAVING");
		end_standby_early();
		break;
	case VY_KEEPER_RELEASE:
		release();
		break;
	case VY_KEEPER_SERVING:
		k.serving = true;
		k.ndeaths = 0;
		k.fallback = false; /* an upgrade may try the binary at the path again */
		k.upgrading = false;
		start_standby();
		break;
	case VY_KEEPER_STANDBY_READY:
		break; /* sent as a standby, its devices opening beside the handover */
	default:
		vy_keeper_say(LOG_WARNING, "the daemon sent message %u, which goes the other way; ignored", m->op);
		for (uint32_t i = 0; i < m->count; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
}

static void link_closed(void);

/* Every message the daemon left, until none waits or it is gone. */
static void drain(void)
{
	while (k.sock >= 0) {
		vy_keeper_msg m = {0}; /* read below even when what came was short */
		int fds[VY_KEEPER_BATCH];
		int rc = vy_keeper_recv(k.sock, &m, fds);
		if (rc == 1) {
			handle(&m, fds);
		} else if (rc < 0 && errno == EPROTO) {
			/* An ADD whose fds the open-file limit refused arrives
			 * cut (MSG_CTRUNC); anything else cut may have been one. */
			bool add = m.magic == VY_KEEPER_MAGIC && m.op == VY_KEEPER_ADD && m.count <= VY_KEEPER_BATCH;
			not_held(add ? m.slot : NULL, add ? m.count : 0,
				 "a message from the daemon cut short or not the keeper protocol (fds past the open-file "
				 "limit?)");
		} else {
			if (rc < 0 && errno == EAGAIN)
				return;
			close(k.sock); /* the daemon's end closed: it is ending, or dead */
			k.sock = -1;
			if (k.daemon > 0 && !k.leaving)
				link_closed();
		}
	}
}

/* The daemon ended: end too, or start its successor. Not reaped (its
 * link closed, link_closed), st means nothing: it died unannounced. */
static void died(int st, bool reaped)
{
	uint64_t t = vy_keeper_now_ns();
	pid_t was = k.daemon;
	k.daemon = 0;
	k.leader_gone_ns = 0;
	if (k.sock >= 0) {
		if (fcntl(k.sock, F_SETFL, O_NONBLOCK) != 0)
			vy_keeper_say(LOG_WARNING, "cannot read the daemon's last messages: %s", strerror(errno));
		else
			drain();
	}
	if (k.sock >= 0) {
		close(k.sock);
		k.sock = -1;
	}
	k.leaving = k.serving = false; /* the next daemon says its own */
	if (k.released) { /* it unmounted and the memory went: whatever ended it, nothing is left to take over */
		char cause[64];
		vy_keeper_describe(st, reaped, cause, sizeof(cause));
		if (!reaped || !WIFEXITED(st)) /* an exit's status is its own log's to explain */
			vy_keeper_say(LOG_WARNING, "the daemon (pid %d) was %s after it released the mount's memory; the keeper "
					 "ends with it", (int)was, cause);
		finish(reaped && WIFEXITED(st) ? WEXITSTATUS(st) : 1);
	}
	if (reaped && WIFEXITED(st) && WEXITSTATUS(st) == VY_EXIT_BROKEN && k.takeovers > 0) {
		vy_keeper_say(LOG_ERR, "the successor (pid %d) found the kept state not exact (the daemon before it could not keep "
			     "a change: their logs say which); the mount's connection ends, as with survive=off (Fix: "
			     "umount and mount again)", (int)was);
		finish(1);
	}
	bool refused = reaped && WIFEXITED(st) && WEXITSTATUS(st) == VY_EXIT_REFUSED && k.takeovers > 0;
	if (refused && (k.fallback || k.slots[VY_KEEPER_SLOT_BINARY] < 0)) {
		vy_keeper_say(LOG_ERR, "the daemon (pid %d) refused the kept state, and no other binary can take it; giving up, the "
			     "mount's connection ends (Fix: see the log, then umount and mount again)", (int)was);
		finish(1);
	}
	if (reaped && WIFEXITED(st) && WEXITSTATUS(st) != VY_EXIT_TAKEOVER && !refused)
		finish(WEXITSTATUS(st)); /* unmounted, or a failed mount */
	if (k.not_held) {
		vy_keeper_say(LOG_ERR, "the daemon (pid %d) ended, and %llu of the memory it handed was not held here: a successor "
			     "would serve files without their bytes; the mount's connection ends, as with survive=off "
			     "(Fix: umount and mount again)", (int)was, (unsigned long long)k.not_held);
		finish(1);
	}
	if (refused) {
		vy_keeper_say(LOG_WARNING, "the successor (pid %d) refused the kept state (another state format; its log says "
				 "which); starting the binary that wrote it (slot 3) in its place (Fix: install a vyrefs "
				 "that reads this format: vyrefs --build-info shows state_format)", (int)was);
		k.fallback = true;
	}
	char cause[64];
	vy_keeper_describe(st, reaped, cause, sizeof(cause));
	if (k.slots[VY_KEEPER_SLOT_FUSE] < 0) {
		vy_keeper_say(LOG_ERR, "the daemon (pid %d) was %s before it handed over /dev/fuse (its mount failed, or it served "
			     "with survive off: a device that cannot share memory): nothing to keep", (int)was, cause);
		finish(1);
	}
	k.deaths[k.ndeaths % DEATHS_MAX] = t;
	k.ndeaths++;
	if (k.ndeaths >= DEATHS_MAX && t - k.deaths[k.ndeaths % DEATHS_MAX] < DEATHS_WINDOW_NS) {
		vy_keeper_say(LOG_ERR, "the daemon (pid %d) was %s: %d deaths within %llu s; giving up, the mount's connection "
			     "ends (Fix: see the log for why it dies, then umount and mount again)",
		    (int)was, cause, DEATHS_MAX, DEATHS_WINDOW_NS / 1000000000ull);
		finish(1);
	}
	k.takeovers++;
	k.upgrading = reaped && WIFEXITED(st) && WEXITSTATUS(st) == VY_EXIT_TAKEOVER;
	bool fresh = k.fallback || k.upgrading, standby;
	int rc = take_successor(fresh, &standby);
	if (standby)
		vy_keeper_say(LOG_NOTICE, "the daemon (pid %d) was %s; its standby successor (pid %d) takes over (takeover %llu)",
		    (int)was, cause, (int)k.daemon, (unsigned long long)k.takeovers);
	else
		vy_keeper_say(LOG_NOTICE, "the daemon (pid %d) was %s; starting its successor (takeover %llu)", (int)was, cause,
		    (unsigned long long)k.takeovers);
	if (!reaped) {
		k.dying = was;
		k.dying_takeover = k.takeovers;
	}
	bool handed = rc == 0 && hand_over(t, st, reaped) == 0;
	if (!handed && rc == 0 && standby) {
		/* The standby ended as it was handed the mount (a binary that
		 * exits at start): one started now takes it instead. */
		vy_keeper_say(LOG_WARNING, "the standby successor (pid %d) did not take the mount: %s; starting its successor",
		    (int)k.daemon, strerror(errno));
		kill(k.daemon, SIGKILL);
		while (waitpid(k.daemon, NULL, 0) < 0 && errno == EINTR)
			;
		close(k.sock);
		k.sock = -1;
		handed = spawn(true, false, &k.daemon, &k.sock) == 0 && hand_over(t, st, reaped) == 0;
	}
	if (!handed && k.daemon > 0 && k.sock >= 0) {
		/* It ended as it was handed the mount (it died at its start): its
		 * SIGCHLD counts a death and starts the next, as for any death
		 * (five within 10 s give up). */
		vy_keeper_say(LOG_WARNING, "the successor (pid %d) did not take the mount: %s; its death counts, and another is started",
		    (int)k.daemon, strerror(errno));
		kill(k.daemon, SIGKILL);
		return;
	}
	if (!handed) {
		vy_keeper_say(LOG_ERR, "cannot hand the mount to a successor: %s; giving up", strerror(errno));
		finish(1);
	}
	if (fcntl(k.sock, F_SETFL, O_NONBLOCK) != 0)
		vy_keeper_say(LOG_WARNING, "cannot make the socketpair non-blocking: %s", strerror(errno));
}

/* The standby ended before it was needed (a bad binary at the path, no
 * device): the next takeover starts its successor after the death, and a
 * new standby waits for a daemon that serves. */
static void standby_died(int st)
{
	char cause[64];
	vy_keeper_describe(st, true, cause, sizeof(cause));
	vy_keeper_say(LOG_WARNING, "the standby successor (pid %d) was %s before a takeover; the next takeover starts its "
			 "successor after the death (Fix: see the log for why it ended)", (int)k.standby, cause);
	forget_standby(true);
}

/* A daemon taken for dead before the kernel gave its status, reaped. */
static void reaped_dying(int st)
{
	if (k.dying_takeover) {
		char cause[64];
		vy_keeper_describe(st, true, cause, sizeof(cause));
		vy_keeper_say(LOG_NOTICE, "the daemon (pid %d) found dead at takeover %llu was %s", (int)k.dying, (unsigned long long)k.dying_takeover,
		    cause);
	}
	k.dying = 0;
	k.dying_takeover = 0;
}

/* The serving daemon's end of the link closed with no LEAVING: the
 * kernel closed its fds, so its last thread has ended (keeper/wire.h). It is
 * dead now, its driver's teardown and its status still to come: its
 * successor serves meanwhile. A daemon that does not serve yet (a first
 * one mounting, a successor starting: one that refuses the state, of a
 * vyrefs that says no LEAVING) is left to its status, as before. */
static void link_closed(void)
{
	if (k.serving && k.slots[VY_KEEPER_SLOT_FUSE] >= 0)
		died(0, false);
}

static void on_signal(void)
{
	struct signalfd_siginfo si;
	while (read(k.sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo != SIGCHLD) {
			/* Asked to stop: the daemon unmounts and exits 0, then so do we. */
			if (k.daemon > 0 && kill(k.daemon, (int)si.ssi_signo) != 0)
				vy_keeper_say(LOG_WARNING, "cannot pass signal %u to the daemon: %s", si.ssi_signo, strerror(errno));
			continue;
		}
		int st;
		pid_t w;
		while ((w = waitpid(-1, &st, WNOHANG)) > 0)
			if (w == k.daemon)
				died(st, true);
			else if (w == k.standby && k.standby_ending)
				forget_standby(false);
			else if (w == k.standby)
				standby_died(st);
			else if (w == k.dying)
				reaped_dying(st);
	}
}

/* The daemon's first thread exited and its other threads have not within
 * LEADER_GRACE_NS (as they do when it is killed: SIGCHLD says so): the
 * daemon is dead, one of its threads waiting on the mount (leader.h). */
#define LEADER_GRACE_NS (200ull * 1000000ull)
static void on_leader(void)
{
	int st, waited;
	if (k.daemon <= 0 || !vy_leader_gone(k.daemon, &st))
		return;
	pid_t was = k.daemon;
	if (waitpid(was, &waited, WNOHANG) == was) {
		died(waited, true);
		return;
	}
	uint64_t t = vy_keeper_now_ns();
	if (!k.leader_gone_ns)
		k.leader_gone_ns = t;
	if (t - k.leader_gone_ns < LEADER_GRACE_NS)
		return; /* looked at again in VY_LEADER_LOOK_MS: killed, the rest ends within it */
	vy_keeper_say(LOG_WARNING, "the daemon (pid %d) is ending but one of its threads waits on the mount; its successor "
			 "answers it", (int)was);
	/* Stuck on a live mount, whatever status it ends with: not a clean
	 * unmount (that leaves no mount to wait on). */
	if (WIFEXITED(st) && WEXITSTATUS(st) != VY_EXIT_TAKEOVER)
		st = SIGKILL;
	k.dying = was;
	died(st, true);
}

/* Every fd the daemon may hand, as many as the open-file limit allows. */
static int size_tables(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0 && getrlimit(RLIMIT_NOFILE, &rl) != 0)
			return -1;
	}
	rlim_t n = rl.rlim_cur;
	if (n > (1u << 20) || n == RLIM_INFINITY)
		n = 1u << 20;
	if (n < VY_KEEPER_SLOT_MEMORY)
		n = VY_KEEPER_SLOT_MEMORY;
	k.nslots = (unsigned)n;
	k.slots = malloc(sizeof(*k.slots) * k.nslots);
	if (!k.slots)
		return -1;
	for (unsigned i = 0; i < k.nslots; i++)
		k.slots[i] = -1;
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "vyrefs-keeper: started by vyrefs for a mount with survive=on, not by hand (Fix: mount with "
			"vyrefs -o survive=on MOUNTPOINT)\n");
	return 2;
}

int main(int argc, char **argv)
{
	int a = 1;
	if (a + 1 < argc && !strcmp(argv[a], "--report-fd")) {
		char *end;
		errno = 0;
		long fd = strtol(argv[a + 1], &end, 10);
		/* Only the first daemon gets it: spawn() clears CLOEXEC in its child. */
		if (errno || *end || fd < 3 || fd > INT_MAX || fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0)
			return usage();
		k.report_fd = (int)fd;
		k.detached = true;
		a += 2;
	}
	if (a < argc && !strcmp(argv[a], "--standby")) {
		k.standby_on = true;
		a++;
	}
	if (a >= argc || argv[a][0] != '/')
		return usage();
	int n = argc - a;
	k.first_argv = calloc((size_t)n + 1, sizeof(char *));
	k.adopt_argv = calloc((size_t)n + 2, sizeof(char *));
	if (!k.first_argv || !k.adopt_argv || size_tables() != 0) {
		fprintf(stderr, "vyrefs-keeper: out of memory at start\n");
		return 1;
	}
	k.adopt_argv[0] = k.first_argv[0] = argv[a];
	k.adopt_argv[1] = VY_KEEPER_ADOPT_ARG;
	for (int i = 1; i < n; i++)
		k.adopt_argv[i + 1] = k.first_argv[i] = argv[a + i];
	if (k.detached) {
		vy_keeper_say_to_syslog();
		/* The first daemon reports to the terminal until it is ready;
		 * the keeper holds none of it, so a caller's pipe sees EOF. */
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int i = 0; i < 3; i++)
			k.saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 3);
		if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
			vy_keeper_say(LOG_WARNING, "cannot leave the terminal: %s", strerror(errno));
		if (null > 2)
			close(null);
	}
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0 || (k.sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		vy_keeper_say(LOG_ERR, "cannot watch for signals: %s", strerror(errno));
		return 1;
	}
	if (spawn(false, false, &k.daemon, &k.sock) != 0)
		return 1;
	/* Only the first daemon reports; its copies are its own now. */
	for (int i = 0; i < 3; i++)
		if (k.saved[i] >= 0)
			close(k.saved[i]);
	if (k.report_fd >= 0)
		close(k.report_fd);
	k.report_fd = -1;
	if (fcntl(k.sock, F_SETFL, O_NONBLOCK) != 0)
		vy_keeper_say(LOG_WARNING, "cannot make the socketpair non-blocking: %s", strerror(errno));
	for (;;) {
		struct pollfd p[3] = {{.fd = k.sigfd, .events = POLLIN},
				      {.fd = k.sock, .events = POLLIN},
				      {.fd = k.standby_sock, .events = POLLIN}};
		int n = poll(p, 3, k.daemon > 0 ? VY_LEADER_LOOK_MS : -1);
		if (n < 0 && errno != EINTR) {
			vy_keeper_say(LOG_ERR, "poll: %s", strerror(errno));
			finish(1);
		}
		if (k.sock >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
			drain();
		if (k.standby_sock >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR)))
			standby_says();
		if (p[0].revents & POLLIN)
			on_signal();
		if (n == 0)
			on_leader();
	}
}
