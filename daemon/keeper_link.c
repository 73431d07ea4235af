/* The daemon's side of the keeper protocol (keeper_link.h). */
#include "daemon/keeper_link.h"
#include "daemon/keeper_memory.h"
#include "daemon/log.h"
#include "daemon/notify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <unistd.h>

/* An fd number from the environment, or -1. */
static int env_fd(const char *name)
{
	const char *v = getenv(name);
	if (!v)
		return -1;
	char *end;
	errno = 0;
	long fd = strtol(v, &end, 10);
	unsetenv(name);
	if (errno || *end || end == v || fd < 0 || fd > INT_MAX || fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0)
		return -2;
	return (int)fd;
}

/* The link, for LEAVING (-1: none, or said). */
static atomic_int leaving_sock = -1;

void vy_keeper_leaving(void)
{
	int sock = atomic_exchange(&leaving_sock, -1);
	if (sock < 0)
		return;
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_LEAVING);
	/* A keeper gone (EPIPE, ECONNRESET) has nothing to start. */
	if (vy_keeper_send(sock, &m, NULL) != 0 && errno != EPIPE && errno != ECONNRESET)
		vy_log(LOG_WARNING, "cannot tell the keeper this daemon ends on purpose: %s; it may start a successor",
		       strerror(errno));
}

static void leaving_at_exit(void)
{
	vy_keeper_leaving();
}

/* The link's fd moved above every other this process will open: a dead
 * process's fds are released from the highest down, so the keeper sees
 * it closed before the driver's fds' teardown (keeper/wire.h). Capped where
 * the fd table stays small (64 Ki entries); failing, it stays where it is. */
static int move_high(int fd)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 2)
		return fd;
	rlim_t top = rl.rlim_cur > 65536 ? 65536 : rl.rlim_cur;
	if (top - 1 <= (rlim_t)fd)
		return fd;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, (int)(top - 1));
	if (high < 0)
		return fd;
	close(fd);
	return high;
}

int vy_keeper_link_env(vy_keeper_link *k, int *report_fd, char *why, size_t cap)
{
	memset(k, 0, sizeof(*k));
	k->sock = -1;
	k->stop = -1;
	*report_fd = env_fd(VY_KEEPER_ENV_REPORT);
	/* The keeper that answers RELEASE names itself (a stray value names
	 * no parent); no launcher or later child inherits it. */
	const char *rel = getenv(VY_KEEPER_ENV_RELEASE);
	long rel_pid = rel ? strtol(rel, NULL, 10) : 0;
	unsetenv(VY_KEEPER_ENV_RELEASE);
	int fd = env_fd(VY_KEEPER_ENV_FD);
	if (fd == -1)
		return 0;
	int type = 0;
	socklen_t len = sizeof(type);
	struct ucred cr;
	socklen_t clen = sizeof(cr);
	/* The keeper made the pair: its credentials are the peer's. */
	if (fd < 0 || *report_fd == -2 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
	    type != SOCK_SEQPACKET || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &clen) != 0 ||
	    cr.pid != getppid() || cr.uid != geteuid()) {
		snprintf(why, cap, "%s does not name a socketpair from this process's keeper (Fix: mount with vyrefs "
				   "-o survive=on MOUNTPOINT; the keeper sets it)", VY_KEEPER_ENV_FD);
		return -1;
	}
	k->sock = move_high(fd);
	k->pid = cr.pid;
	k->releases = rel_pid > 0 && rel_pid == (long)cr.pid;
	/* Every exit of its own says so first (unmount, a failed start, a
	 * refused state, an upgrade); a death says nothing. */
	atomic_store(&leaving_sock, k->sock);
	if (atexit(leaving_at_exit) != 0)
		vy_log(LOG_WARNING, "cannot arrange to tell the keeper of this daemon's exit; an exit may start a "
				    "successor");
	return 1;
}

/* This binary, for the keeper's slot 3; -1 with `why`. */
static int self_binary(char *why, size_t cap)
{
	int self = open("/proc/self/exe", O_PATH | O_CLOEXEC);
	if (self < 0)
		snprintf(why, cap, "cannot open this binary for the keeper: %s (Fix: mount /proc, or use survive=off)",
			 strerror(errno));
	return self;
}

int vy_keeper_hand_binary(vy_keeper_link *k, char *why, size_t cap)
{
	int self = self_binary(why, cap);
	if (self < 0)
		return -1;
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_ADD);
	m.slot[0] = VY_KEEPER_SLOT_BINARY;
	m.count = 1;
	int rc = vy_keeper_send(k->sock, &m, &self);
	if (rc != 0)
		snprintf(why, cap, "cannot hand this binary to the keeper (pid %d): %s", (int)k->pid, strerror(errno));
	close(self);
	return rc;
}

int vy_keeper_hand(vy_keeper_link *k, int fuse_fd, const int state_fds[3], char *why, size_t cap)
{
	int self = self_binary(why, cap);
	if (self < 0)
		return -1;
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_ADD);
	int fds[6] = {fuse_fd, state_fds[0], self, state_fds[1], state_fds[2]};
	m.slot[0] = VY_KEEPER_SLOT_FUSE;
	m.slot[1] = VY_KEEPER_SLOT_REGION;
	m.slot[2] = VY_KEEPER_SLOT_BINARY;
	m.slot[3] = VY_KEEPER_SLOT_IMAGE_A;
	m.slot[4] = VY_KEEPER_SLOT_IMAGE_B;
	m.count = 5;
	int rc = vy_keeper_send(k->sock, &m, fds);
	close(self);
	if (rc != 0)
		snprintf(why, cap, "cannot hand the mount's fds to the keeper (pid %d): %s (Fix: mount with survive=off)",
			 (int)k->pid, strerror(errno));
	return rc;
}

/* fd into slot s of the memory table, grown to hold it; -1 when it
 * cannot be (no memory, or a slot handed twice). */
static int put_memory(vy_keep_fds *t, uint32_t s, int fd)
{
	if (fd < 0 || s >= (1u << 20) || (s < t->n && t->fd[s] >= 0))
		return -1;
	if (s >= t->n) {
		uint32_t n = t->n ? t->n : 64;
		while (n <= s)
			n *= 2;
		int *grown = realloc(t->fd, (size_t)n * sizeof(*grown));
		if (!grown)
			return -1;
		for (uint32_t i = t->n; i < n; i++)
			grown[i] = -1;
		t->fd = grown;
		t->n = n;
	}
	t->fd[s] = fd;
	return 0;
}

/* A STATE message: the three state slots, in order. */
static bool is_state(const vy_keeper_msg *m)
{
	return m->op == VY_KEEPER_STATE && m->count == 3 && m->slot[0] == VY_KEEPER_SLOT_REGION &&
	       m->slot[1] == VY_KEEPER_SLOT_IMAGE_A && m->slot[2] == VY_KEEPER_SLOT_IMAGE_B;
}

int vy_keeper_take(vy_keeper_link *k, vy_keeper_adoption *ad, void (*on_state)(void *ctx, const int fds[3]),
		   void *ctx, char *why, size_t cap)
{
	memset(ad, 0, sizeof(*ad));
	for (unsigned i = 0; i < VY_KEEPER_SLOT_MEMORY; i++)
		ad->slot[i] = -1;
	for (;;) {
		vy_keeper_msg m;
		int fds[VY_KEEPER_BATCH];
		int rc = vy_keeper_recv(k->sock, &m, fds);
		if (rc != 1) {
			snprintf(why, cap, "the keeper (pid %d) %s before it handed over every slot", (int)k->pid,
				 rc == 0 ? "closed the socketpair" : strerror(errno));
			return -1;
		}
		if (on_state && is_state(&m)) {
			on_state(ctx, fds);
			continue;
		}
		if (m.op == VY_KEEPER_ADOPT_END) {
			ad->takeovers = m.takeovers;
			ad->death_ns = m.death_ns;
			ad->cause_signal = m.cause_signal;
			ad->cause_status = m.cause_status;
			return 0;
		}
		for (uint32_t i = 0; i < m.count; i++) {
			uint32_t s = m.slot[i];
			if (m.op == VY_KEEPER_ADOPT && s < VY_KEEPER_SLOT_MEMORY && ad->slot[s] < 0) {
				ad->slot[s] = fds[i];
				continue;
			}
			/* Memory slots: for the store to adopt (keeper_memory.h). */
			if (m.op == VY_KEEPER_ADOPT && s >= VY_KEEPER_SLOT_MEMORY && put_memory(&ad->memory, s, fds[i]) == 0) {
				ad->memory_fds++;
				continue;
			}
			if (fds[i] >= 0)
				close(fds[i]);
		}
	}
}

void vy_keeper_standby_ready(vy_keeper_link *k, bool want_state)
{
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_STANDBY_READY);
	m.pid = want_state ? VY_KEEPER_WANT_STATE : 0;
	if (vy_keeper_send(k->sock, &m, NULL) != 0)
		vy_log(LOG_WARNING, "standby: cannot tell the keeper (pid %d) it is ready: %s", (int)k->pid, strerror(errno));
}

void vy_keeper_serving(vy_keeper_link *k)
{
	vy_keeper_msg m;
	vy_keeper_msg_init(&m, VY_KEEPER_SERVING);
	if (k->sock >= 0 && vy_keeper_send(k->sock, &m, NULL) != 0)
		vy_log(LOG_WARNING, "cannot tell the keeper (pid %d) this daemon serves: %s", (int)k->pid, strerror(errno));
}

/* Count `n` slots the keeper did not hold: in the memory sink, or kept
 * for it until it is set (a successor's replay may take seconds). */
static void count_not_held(vy_keeper_link *k, uint32_t n)
{
	atomic_fetch_add(&k->not_held, n);
	vy_keeper_memory *m = atomic_load(&k->memory);
	uint32_t now = m ? atomic_exchange(&k->not_held, 0) : 0;
	if (now)
		vy_keeper_memory_not_held(m, now);
}

void vy_keeper_link_memory(vy_keeper_link *k, vy_keeper_memory *m)
{
	atomic_store(&k->memory, m);
	uint32_t early = m ? atomic_exchange(&k->not_held, 0) : 0;
	if (early)
		vy_keeper_memory_not_held(m, early);
}

static void *watch(void *arg)
{
	vy_keeper_link *k = arg;
	pthread_setname_np(pthread_self(), "vy-keeper"); /* not a FUSE worker (tests count those) */
	for (;;) {
		struct pollfd p[2] = {{.fd = k->sock, .events = POLLIN}, {.fd = k->stop, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (p[1].revents)
			return NULL;
		if (p[0].revents & (POLLHUP | POLLERR)) {
			atomic_store(k->keeper_pid, 0);
			atomic_store(k->standby_pid, 0); /* it ends with the keeper */
			vy_log(LOG_WARNING, "the keeper (pid %d) is gone: the mount serves on, but no longer survives this "
					    "daemon's death (Fix: umount and mount again to have a keeper)",
			       (int)k->pid);
			/* Under systemd this daemon is now what holds the mount. */
			vy_notify_main(getpid(), "serving without a keeper: this daemon's death now ends the mount");
			return NULL;
		}
		if (p[0].revents & POLLIN) {
			/* A serving daemon is told of its standby, and of memory
			 * the keeper could not hold. */
			vy_keeper_msg m;
			int fds[VY_KEEPER_BATCH];
			if (vy_keeper_recv(k->sock, &m, fds) != 1)
				continue;
			for (uint32_t i = 0; i < m.count; i++)
				if (fds[i] >= 0)
					close(fds[i]);
			if (m.op == VY_KEEPER_STANDBY)
				atomic_store(k->standby_pid, m.pid > 0 ? (int)m.pid : 0);
			if (m.op == VY_KEEPER_NOT_HELD)
				count_not_held(k, m.count ? m.count : 1);
		}
	}
}

void vy_keeper_watch(vy_keeper_link *k, _Atomic int *keeper_pid, _Atomic int *standby_pid)
{
	k->keeper_pid = keeper_pid;
	k->standby_pid = standby_pid;
	atomic_store(keeper_pid, (int)k->pid);
	k->stop = eventfd(0, EFD_CLOEXEC);
	if (k->stop < 0 || pthread_create(&k->watch, NULL, watch, k) != 0) {
		vy_log(LOG_WARNING, "cannot watch the keeper (pid %d): its death would go unnoticed in .vyre/stats",
		       (int)k->pid);
		return;
	}
	k->watching = true;
}

void vy_keeper_unwatch(vy_keeper_link *k)
{
	if (k->watching) {
		uint64_t one = 1;
		if (write(k->stop, &one, sizeof(one)) == (ssize_t)sizeof(one)) {
			pthread_join(k->watch, NULL);
		} else {
			pthread_detach(k->watch);
			k->releases = false; /* it may still read the link */
		}
		k->watching = false;
	}
	if (k->stop >= 0)
		close(k->stop);
	k->stop = -1;
	if (k->sock >= 0)
		vy_keeper_leaving();
}

void vy_keeper_release(vy_keeper_link *k)
{
	vy_keeper_unwatch(k); /* says LEAVING, also where no watch ran (a failed mount) */
	if (k->sock < 0)
		return;
	if (k->releases && k->keeper_pid && atomic_load(k->keeper_pid) == 0)
		k->releases = false; /* the watch saw the keeper gone */
	if (k->releases) {
		vy_keeper_msg m;
		vy_keeper_msg_init(&m, VY_KEEPER_RELEASE);
		struct timeval tv = {.tv_sec = 10};
		int rc = -1;
		if (setsockopt(k->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 && vy_keeper_send(k->sock, &m, NULL) == 0)
			rc = 1;
		while (rc == 1) { /* its STANDBY 0 may come first */
			int fds[VY_KEEPER_BATCH];
			rc = vy_keeper_recv(k->sock, &m, fds);
			for (uint32_t i = 0; rc == 1 && i < m.count; i++)
				if (fds[i] >= 0)
					close(fds[i]);
			if (rc == 1 && m.op == VY_KEEPER_RELEASED)
				break;
		}
		if (rc != 1)
			vy_log(LOG_WARNING, "the keeper did not say it released the mount's memory (%s): the devices' "
					    "memory comes back when it exits",
			       rc == 0 ? "it closed the link" : strerror(errno));
	}
	close(k->sock);
	k->sock = -1;
}
