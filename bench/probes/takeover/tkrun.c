/* tkrun: the driver of the takeover probe. It starts the keeper (which
 * starts and mounts the first daemon) on a fresh temp dir, runs a stat loop
 * on /counter throughout, and for each round: runs `cat MOUNT/stall`, waits
 * until the serving daemon has read the READ and stalls, SIGKILLs that
 * daemon, and times the keeper's successor until `cat` has its answer.
 * Every round must end with cat's exit status 0, nothing on its stderr, the
 * whole content from the successor, and a fresh read of /counter answered by
 * it; the stat loop must see no error. Then it unmounts and checks that the
 * keeper and its daemon are gone.
 *
 *   tkrun [ROUNDS]      (root; ROUNDS defaults to 5) */
#include "tk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#define FILE_LEN 48 /* tkfs.c's */
#define WAIT_MS 10000 /* any step that takes longer fails the run */

static char mnt[64], counter_path[96], stall_path[96];
static int ev = -1;
static pid_t keeper = -1, reader = -1;
static dev_t mnt_dev;
static bool mounted;

/* --- events --- */
static char evbuf[1 << 16];
static size_t evlen;

/* The next event line starting with `prefix`, into `line`; others are
 * printed and dropped. -1 after WAIT_MS. */
static int wait_event(const char *prefix, char *line, size_t cap)
{
	uint64_t deadline = tk_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	for (;;) {
		char *nl;
		while ((nl = memchr(evbuf, '\n', evlen))) {
			size_t n = (size_t)(nl - evbuf);
			bool hit = !strncmp(evbuf, prefix, strlen(prefix)) && n < cap;
			if (hit) {
				memcpy(line, evbuf, n);
				line[n] = 0;
			}
			fprintf(stderr, "  event: %.*s\n", (int)n, evbuf);
			memmove(evbuf, nl + 1, evlen - n - 1);
			evlen -= n + 1;
			if (hit)
				return 0;
		}
		uint64_t now = tk_now_ns();
		if (now >= deadline || evlen == sizeof(evbuf))
			return -1;
		struct pollfd p = {.fd = ev, .events = POLLIN};
		int r = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r > 0) {
			ssize_t n = read(ev, evbuf + evlen, sizeof(evbuf) - evlen);
			if (n <= 0)
				return -1;
			evlen += (size_t)n;
		}
	}
}

static uint64_t field(const char *line, const char *key)
{
	char k[32];
	snprintf(k, sizeof(k), " %s=", key);
	const char *p = strstr(line, k);
	return p ? strtoull(p + strlen(k), NULL, 0) : 0;
}

/* --- the stat loop: the requests that arrive while no daemon serves --- */
static atomic_bool stop;
static uint64_t stats_ok, stats_err, stat_max_ns;
static int stat_errno;

static void *stat_loop(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct stat s;
		uint64_t t = tk_now_ns();
		if (stat(counter_path, &s) == 0 && s.st_size == FILE_LEN) {
			stats_ok++;
		} else {
			stats_err++;
			stat_errno = errno;
		}
		t = tk_now_ns() - t;
		if (t > stat_max_ns)
			stat_max_ns = t;
	}
	return NULL;
}

/* --- cleanup: never leave the mount behind, nor a process hanging on it --- */
static void teardown(bool failed)
{
	if (failed && mounted) {
		/* A stalled daemon's reader waits uninterruptibly (SIGKILL does
		 * not free it): abort the connection. umount -f does, through
		 * fuse_umount_begin; fusectl's abort file where it is mounted. */
		if (umount2(mnt, MNT_FORCE) == 0) {
			mounted = false;
		} else {
			char p[96];
			snprintf(p, sizeof(p), "/sys/fs/fuse/connections/%u/abort", minor(mnt_dev));
			int fd = open(p, O_WRONLY);
			if (fd >= 0 && write(fd, "1", 1) != 1)
				perror("tkrun: abort connection");
			if (fd >= 0)
				close(fd);
		}
	}
	if (mounted && umount2(mnt, 0) != 0 && umount2(mnt, MNT_DETACH) != 0)
		perror("tkrun: unmount");
	mounted = false;
	if (reader > 0) {
		kill(reader, SIGKILL);
		waitpid(reader, NULL, 0);
	}
	if (keeper > 0) {
		int st = 0;
		for (int i = 0; i < 500 && waitpid(keeper, &st, WNOHANG) == 0; i++)
			usleep(10000);
		if (waitpid(keeper, &st, WNOHANG) == 0) {
			fprintf(stderr, "tkrun: FAIL: the keeper outlived the unmount\n");
			kill(keeper, SIGKILL);
			waitpid(keeper, NULL, 0);
		}
	}
	rmdir(mnt);
}

static int fail(const char *what)
{
	fprintf(stderr, "tkrun: FAIL: %s\n", what);
	atomic_store(&stop, true);
	teardown(true);
	return 1;
}

/* Run `cat FILE` with stdout and stderr into pipes. */
static pid_t run_cat(const char *file, int *out, int *err)
{
	int o[2], e[2];
	if (pipe2(o, O_CLOEXEC) || pipe2(e, O_CLOEXEC))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		dup2(o[1], 1);
		dup2(e[1], 2);
		execlp("cat", "cat", file, (char *)NULL);
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	*out = o[0];
	*err = e[0];
	return pid;
}

/* Read all of `fd` (bounded), stamping when the first byte came. */
static ssize_t slurp(int fd, char *buf, size_t cap, uint64_t *first)
{
	size_t got = 0;
	uint64_t deadline = tk_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = tk_now_ns();
		if (now >= deadline)
			return -1;
		if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) <= 0)
			continue;
		ssize_t n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -1 : (ssize_t)got;
		if (got == 0 && first)
			*first = tk_now_ns();
		got += (size_t)n;
		if (got == cap)
			return (ssize_t)got;
	}
}

static double ms(uint64_t a, uint64_t b)
{
	return b >= a ? (double)(b - a) / 1e6 : -(double)(a - b) / 1e6;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	if (rounds < 1 || rounds > 100) {
		fprintf(stderr, "usage: tkrun [ROUNDS 1..100]\n");
		return 2;
	}
	char self[PATH_MAX], dir[PATH_MAX], kpath[PATH_MAX + 16], dpath[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	snprintf(dir, sizeof(dir), "%s", dirname(self));
	snprintf(kpath, sizeof(kpath), "%s/tkkeeper", dir);
	snprintf(dpath, sizeof(dpath), "%s/tkfs", dir);
	snprintf(mnt, sizeof(mnt), "/tmp/tkprobe.XXXXXX");
	if (!mkdtemp(mnt))
		return 1;
	snprintf(counter_path, sizeof(counter_path), "%s/counter", mnt);
	snprintf(stall_path, sizeof(stall_path), "%s/stall", mnt);

	int p[2];
	if (pipe(p) != 0 || fcntl(p[0], F_SETFD, FD_CLOEXEC) != 0)
		return 1;
	ev = p[0];
	keeper = fork();
	if (keeper == 0) {
		char e[16];
		snprintf(e, sizeof(e), "%d", p[1]);
		execl(kpath, kpath, dpath, mnt, e, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char line[256];
	mounted = true; /* from here on, teardown unmounts (EINVAL if it never was) */
	if (wait_event("serving gen=0", line, sizeof(line))) /* after the handoff to the keeper */
		return fail("the first daemon did not mount and hand over /dev/fuse");
	struct stat ms_;
	if (stat(mnt, &ms_) != 0)
		return fail("stat of the mount");
	mnt_dev = ms_.st_dev;

	pthread_t th;
	if (pthread_create(&th, NULL, stat_loop, NULL) != 0)
		return fail("stat thread");
	printf("round  kill->keeper_saw  kill->successor_serving  kill->resend_sent  kill->first_answer  "
	       "kill->cat_has_data  cat_status  cat_stderr  answered_by\n");
	for (int r = 0; r < rounds; r++) {
		int out, err;
		reader = run_cat(stall_path, &out, &err);
		if (reader < 0)
			return fail("start cat");
		char want[64];
		snprintf(want, sizeof(want), "stalled gen=%d ", r);
		if (wait_event(want, line, sizeof(line)))
			return fail("the daemon never stalled on cat's read");
		pid_t victim = (pid_t)field(line, "pid");
		uint64_t t_kill = tk_now_ns();
		if (victim <= 0 || kill(victim, SIGKILL) != 0)
			return fail("SIGKILL the daemon");

		char buf[256] = {0}, ebuf[256] = {0};
		uint64_t t_data = 0;
		ssize_t got = slurp(out, buf, sizeof(buf) - 1, &t_data);
		ssize_t egot = got < 0 ? -1 : slurp(err, ebuf, sizeof(ebuf) - 1, NULL);
		close(out);
		close(err);
		int cst;
		if (got < 0 || egot < 0 || waitpid(reader, &cst, 0) != reader)
			return fail("cat never finished after the takeover");
		reader = -1;

		uint64_t t_died, t_serving, t_resend, t_first;
		snprintf(want, sizeof(want), "died gen=%d ", r);
		if (wait_event(want, line, sizeof(line)))
			return fail("the keeper did not see the death");
		t_died = field(line, "t");
		snprintf(want, sizeof(want), "serving gen=%d ", r + 1);
		if (wait_event(want, line, sizeof(line)))
			return fail("no successor");
		t_serving = field(line, "t");
		snprintf(want, sizeof(want), "init-swallowed gen=%d ", r + 1);
		if (wait_event(want, line, sizeof(line)) || field(line, "same_as_first") != 1)
			return fail("the successor's INIT reply differs from the first daemon's");
		snprintf(want, sizeof(want), "resend gen=%d ", r + 1);
		if (wait_event(want, line, sizeof(line)) || field(line, "rc") != 16)
			return fail("FUSE_NOTIFY_RESEND was refused");
		t_resend = field(line, "t");
		snprintf(want, sizeof(want), "first-answer gen=%d ", r + 1);
		if (wait_event(want, line, sizeof(line)))
			return fail("the successor answered nothing");
		t_first = field(line, "t");

		char gtag[16];
		snprintf(gtag, sizeof(gtag), "gen=%03d", r + 1);
		bool ok = WIFEXITED(cst) && WEXITSTATUS(cst) == 0 && egot == 0 && got == FILE_LEN &&
			  strstr(buf, gtag);
		printf("%5d  %15.3f  %23.3f  %17.3f  %18.3f  %18.3f  %10d  %10s  %s\n", r, ms(t_kill, t_died),
		       ms(t_kill, t_serving), ms(t_kill, t_resend), ms(t_kill, t_first), ms(t_kill, t_data),
		       WIFEXITED(cst) ? WEXITSTATUS(cst) : -WTERMSIG(cst), egot ? ebuf : "(empty)",
		       got > 0 ? strtok(buf, "\n") : "(nothing)");
		if (!ok)
			return fail("cat did not get the whole answer from the successor without error");

		/* a new request, served by the successor */
		int fd = open(counter_path, O_RDONLY);
		char c[FILE_LEN + 1] = {0};
		if (fd < 0 || read(fd, c, FILE_LEN) != FILE_LEN || !strstr(c, gtag))
			return fail("a fresh read of /counter was not served by the successor");
		close(fd);
	}
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	printf("stat loop: %llu answered, %llu errors (last errno %d), longest wait %.3f ms\n",
	       (unsigned long long)stats_ok, (unsigned long long)stats_err, stat_errno, (double)stat_max_ns / 1e6);
	if (stats_err)
		return fail("the stat loop saw errors");
	teardown(false);
	if (wait_event("keeper-exit", line, sizeof(line)))
		fprintf(stderr, "tkrun: note: no keeper-exit event\n");
	printf("PASS: %d takeovers, every reader answered without error; unmounted, keeper gone\n", rounds);
	return 0;
}
