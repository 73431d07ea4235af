/* `vyrefs --upgrade MOUNTPOINT` (upgrade_cli.h): asks the mount's daemon
 * through its .vyre/upgrade (the kernel decides who may), then waits for
 * the successor to serve. */
#include "daemon/upgrade_cli.h"
#include "keeper/trust.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 60000

/* `key`'s value in MNT/.vyre/stats; -1 when unread. */
static long long stat_of(const char *mnt, const char *key)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/.vyre/stats", mnt) >= (int)sizeof(path))
		return -1;
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	char k[128];
	long long v, got = -1;
	while (got < 0 && fscanf(f, "%127s %lld", k, &v) == 2)
		if (!strcmp(k, key))
			got = v;
	fclose(f);
	return got;
}

/* The binary an upgrade would run, as the mount's keeper (pid `keeper`)
 * names it on its command line (`vyrefs-keeper [--report-fd N]
 * [--standby] DAEMON ...`, keeper/keeper.c), and the keeper's uid, from
 * the kernel (/proc); false when unread. */
static bool keeper_binary(long long keeper, char *path, size_t cap, uid_t *uid)
{
	char p[64], buf[PATH_MAX + 128];
	snprintf(p, sizeof(p), "/proc/%lld/cmdline", keeper);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	struct stat st;
	snprintf(p, sizeof(p), "/proc/%lld", keeper);
	if (n <= 0 || stat(p, &st) != 0)
		return false;
	buf[n] = '\0';
	*uid = st.st_uid;
	const char *a = buf + strlen(buf) + 1, *end = buf + n; /* past argv[0] */
	if (a < end && !strcmp(a, "--report-fd"))
		for (int skip = 0; skip < 2 && a < end; skip++)
			a += strlen(a) + 1;
	if (a < end && !strcmp(a, "--standby"))
		a += strlen(a) + 1;
	if (a >= end || a[0] != '/')
		return false;
	snprintf(path, cap, "%s", a);
	return true;
}

/* The version the serving daemon names in .vyre/config ("?" unread). */
static void served_by(const char *mnt, char *out, size_t cap)
{
	char path[PATH_MAX];
	snprintf(out, cap, "?");
	if (snprintf(path, sizeof(path), "%s/.vyre/config", mnt) >= (int)sizeof(path))
		return;
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char line[256];
	if (fgets(line, sizeof(line), f) && !strncmp(line, "# served by vyrefs ", 19)) {
		line[strcspn(line, "\n")] = '\0';
		snprintf(out, cap, "%.60s", line + 19);
	}
	fclose(f);
}

static int ask(const char *mnt)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/.vyre/upgrade", mnt) >= (int)sizeof(path)) {
		fprintf(stderr, "vyrefs: %s: the path is too long (Fix: give a shorter mountpoint)\n", mnt);
		return -1;
	}
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		fprintf(stderr, "vyrefs: %s: cannot open .vyre/upgrade: %s (Fix: %s)\n", mnt, strerror(err),
			err == EACCES || err == EPERM ? "run as the user who mounted it, or as root"
						      : "the daemon serving it is older than --upgrade: umount and mount again");
		return -1;
	}
	ssize_t w = write(fd, "now\n", 4);
	int err = errno;
	close(fd);
	if (w == 4)
		return 0;
	fprintf(stderr, "vyrefs: %s: the daemon refused to hand over: %s (Fix: %s)\n", mnt,
		w < 0 ? strerror(err) : "short write",
		w < 0 && err == EOPNOTSUPP ? "mount with -o survive=on: only such a mount outlives its daemon"
		: w < 0 && err == ENOTCONN ? "its keeper is gone; umount and mount again"
					   : "see the daemon's log");
	return -1;
}

int vy_upgrade_cli(const char *mnt)
{
	long long pid = stat_of(mnt, "pid"), takeovers = stat_of(mnt, "takeovers");
	if (pid < 0 || takeovers < 0) {
		fprintf(stderr, "vyrefs: %s: not a vyrefs mount (no .vyre/stats) (Fix: give the mountpoint of a vyrefs "
				"mount)\n",
			mnt);
		return 1;
	}
	long long failures = stat_of(mnt, "kept_failures");
	if (failures > 0) {
		fprintf(stderr, "vyrefs: %s: the kept state is not exact (%lld changes could not be kept: the daemon's log "
				"says which); a successor would end the mount (Fix: umount and mount again, then upgrade)\n",
			mnt, failures);
		return 1;
	}
	/* Refused here, before the daemon leaves, what the keeper would
	 * refuse to run (keeper/trust.h): a binary another user could have
	 * put at the mount's path. */
	char bin[PATH_MAX], why[700];
	uid_t keeper_uid;
	long long keeper = stat_of(mnt, "keeper_pid");
	if (keeper > 0 && keeper_binary(keeper, bin, sizeof(bin), &keeper_uid) &&
	    !vy_trusted_binary(bin, keeper_uid, why, sizeof(why))) {
		fprintf(stderr, "vyrefs: %s: the binary an upgrade would run is not trusted: %s\n", mnt, why);
		return 1;
	}
	char was[64], now[64];
	served_by(mnt, was, sizeof(was));
	if (ask(mnt) != 0)
		return 1;
	for (int waited = 0; waited < WAIT_MS; waited += 20) {
		long long t = stat_of(mnt, "takeovers"), p = stat_of(mnt, "pid");
		if (t > takeovers && p > 0 && p != pid) {
			served_by(mnt, now, sizeof(now));
			if (t > takeovers + 1 && !strcmp(now, was)) {
				/* The binary at the path did not serve: it refused the
				 * state, and the keeper started the old one again. */
				fprintf(stderr, "vyrefs: %s: the binary installed did not take over (it refused the kept "
						"state, or died); vyrefs %s serves on as pid %lld (Fix: see the daemon's "
						"log; install a vyrefs whose `--build-info` state_format reads this mount's)\n",
					mnt, now, p);
				return 1;
			}
			printf("vyrefs: %s: handed over: pid %lld (vyrefs %s) to pid %lld (vyrefs %s)\n", mnt, pid, was, p, now);
			return 0;
		}
		nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000L}, NULL);
	}
	fprintf(stderr, "vyrefs: %s: no successor serves after %d s (Fix: see the daemon's log: syslog, or its "
			"stderr with -f)\n",
		mnt, WAIT_MS / 1000);
	return 1;
}
