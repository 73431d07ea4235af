/* Mount, serve, unmount; detach once mounted. */
#include "daemon/mount.h"
#include "sock/mapsrv.h"
#include "daemon/mountinfo.h"
#include "daemon/mountflags.h"
#include "daemon/oom.h"
#include "fs/atime.h"
#include "fs/backed.h"
#include "daemon/mount_devices.h"
#include "fs/lifecycle.h"
#include "fs/wbehind_keep.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "fs/ops.h"
#include "daemon/session.h"
#include "daemon/keeper_link.h"
#include "daemon/adopt_ns.h"
#include "persist/replay_kernel.h"
#include "daemon/resend.h"
#include "daemon/upgrade.h"
#include "daemon/keeper_memory.h"
#include "daemon/kept_counters.h"
#include "core/store_keep.h"
#include "core/clock.h"
#include "persist/writer.h"
#include "state/state.h"

#include <errno.h>
#include <pwd.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* The detached child tells the waiting parent how the mount went, a line at
 * a time: "N text" a note to print, "E text" a failure, "R" ready. */
static int report_fd = -1;

static void report(char kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report(char kind, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (report_fd < 0) {
		if (kind != 'R')
			vy_log(kind == 'E' ? LOG_ERR : LOG_NOTICE, "%s", line);
		return;
	}
	char msg[1100];
	int n = snprintf(msg, sizeof(msg), "%c %s\n", kind, line);
	for (char *at = msg; n > 0;) {
		ssize_t w = write(report_fd, at, (size_t)n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		at += w;
		n -= (int)w;
	}
	if (kind != 'N') {
		close(report_fd);
		report_fd = -1;
	}
}

/* The parent: print what the child reports; exit 0 once it is mounted. */
static int wait_for_child(int fd, bool quiet)
{
	FILE *f = fdopen(fd, "r");
	if (!f)
		return 1;
	char line[1200];
	int status = 1;
	bool said = false;
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		if (len && line[len - 1] == '\n')
			line[len - 1] = '\0';
		if (line[0] == 'R') {
			status = 0;
			said = true;
			if (len > 2 && !quiet)
				fprintf(stderr, "vyrefs: %s\n", line + 2); /* where, which backend, how much memory */
			break;
		}
		fprintf(stderr, "vyrefs: %s\n", line + (len > 2 ? 2 : len));
		if (line[0] == 'E') {
			said = true;
			break;
		}
	}
	if (!said)
		fprintf(stderr, "vyrefs: the mount process ended before the mount was ready "
				"(Fix: run with -f to see why, or check the system log)\n");
	fclose(f);
	return status;
}

/* Fork the process that detaches. The parent (*child false) waits for its
 * report and returns the exit status; the child (*child true) is a session
 * of its own in /, holding no working directory, and reports through
 * report_fd. */
static int detach(bool *child, bool quiet)
{
	*child = false;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) {
		fprintf(stderr, "vyrefs: cannot create a pipe: %s (Fix: run with -f)\n", strerror(errno));
		return 1;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "vyrefs: cannot fork: %s (Fix: run with -f)\n", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		return 1;
	}
	if (pid > 0) {
		close(fds[1]);
		return wait_for_child(fds[0], quiet);
	}
	close(fds[0]);
	report_fd = fds[1];
	*child = true;
	setsid();
	if (chdir("/") != 0)
		report('N', "cannot change to /: %s", strerror(errno));
	return 0;
}

/* Every file of the host backend is an fd, and clients pass fds: the soft
 * limit inherited from a shell (often 1024) is raised to the hard one. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			vy_log(LOG_NOTICE, "cannot raise the open-file limit: %s", strerror(errno));
	}
}

/* A successor mounted nothing, so libfuse unmounts nothing: when its loop
 * ends with the mount still there (a signal), it unmounts as the first
 * daemon would have, but only the mount it adopted (issue "posix 3": one
 * that took a clean unmount for a death detached the next mount made at
 * the path). Two facts say so: its connection is alive (a clean unmount
 * aborts it: poll says POLLERR), so its superblock, and with it the
 * device number `dev` read when it began to serve, is still that
 * connection's; and the topmost mount at the path has that number. */
static void unmount_adopted(const char *mountpoint, dev_t dev, int fuse_fd)
{
	dev_t now = 0;
	if (!vy_mountinfo_find(mountpoint, "", &now))
		return; /* unmounted already: that ended the loop */
	struct pollfd p = {.fd = fuse_fd, .events = POLLIN};
	bool alive = fuse_fd >= 0 && poll(&p, 1, 0) >= 0 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
	if (!alive || !dev || now != dev) {
		if (alive && dev)
			vy_log(LOG_WARNING, "another mount is on %s now, over the one this daemon served: left alone (Fix: "
					    "umount it first, then umount -l %s)", mountpoint, mountpoint);
		return;
	}
	if (geteuid() == 0) {
		if (umount2(mountpoint, MNT_DETACH) != 0)
			vy_log(LOG_WARNING, "cannot unmount %s: %s (Fix: umount -l %s)", mountpoint, strerror(errno),
			       mountpoint);
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", "--", mountpoint, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		vy_log(LOG_WARNING, "cannot unmount %s with fusermount3 (Fix: fusermount3 -u -z %s)", mountpoint,
		       mountpoint);
}

/* systemd (notify.h): the mount answers; the process to watch is the
 * keeper under survive=on (-f: the pid systemd started, the keeper in its
 * place), else this daemon. */
static pid_t ready_main;
static const char *ready_mountpoint;

static void say_ready(void)
{
	vy_notify_ready(ready_main, ready_mountpoint);
}

/* survive= not given: a device that cannot keep its memory for a successor
 * (cuda without VMM's POSIX fd handles) turns it off for this mount, said
 * once; asked for, the mount fails below (vy_store_keep's Fix). The keeper
 * that started this daemon is handed nothing and ends with it. */
static bool keep_falls_back(const vy_mount_args *a, const vy_mount_devices *opened)
{
	if (a->cfg.survive_set)
		return false;
	for (unsigned d = 0; d < opened->n; d++)
		if (!opened->dev[d]->keep) {
			report('N', "survive is off on this mount: device %d cannot share its memory with another process "
				    "(no VMM with POSIX fd handles), so no keeper could hold it: the daemon's death ends "
				    "the mount, as with -o survive=off",
			       opened->dev[d]->info.ordinal);
			return true;
		}
	return false;
}

/* survive=on: the keeper slots the devices' memory may take (every
 * budget and pool whole), checked against the open-file limit. */
static uint64_t kept_slots(vy_core *const *cores, unsigned n)
{
	uint64_t bytes[VY_DEVICES_MAX] = {0};
	for (unsigned d = 0; d < n; d++) {
		vy_store_usage u;
		vy_store_usage_get(cores[d]->store, &u);
		bytes[d] = u.budget + u.pool_cap;
	}
	return vy_keeper_memory_slots_for(bytes, n);
}

int vy_mount_serve(const vy_mount_args *a, vy_keeper_link *keeper, vy_keeper_adoption *adopt, vy_state *st)
{
	bool kept = keeper && keeper->sock >= 0;
	vy_notify_init(); /* no launcher inherits NOTIFY_SOCKET */
	raise_fd_limit();
	int oom = vy_oom_exempt(false); /* a successor's too; its launchers go back to 0 */
	vy_mount_devices opened = {0};
	vy_device **dev = opened.dev;
	vy_core *cores[VY_DEVICES_MAX] = {0};
	uint64_t free0[VY_DEVICES_MAX] = {0};
	unsigned ncores = 0;
	vy_error e;
	vy_fs fs;
	bool fs_ready = false;
	vy_kept_counters *counters = NULL; /* survive=on: the cores count into it */
	vy_keeper_memory km; /* survive=on: file memory to the keeper */
	bool km_ready = false;
	struct fuse_session *se = NULL;
	int status = 1;
	bool mounted = false; /* a failed mount says only why, with its Fix */
	if (adopt && adopt->devices) {
		opened = *adopt->devices; /* opened beside the handover (daemon/adopt.c) */
		adopt->devices->n = 0;
	} else if (vy_mount_devices_open(&a->cfg, &opened, &e) != VY_OK) {
		report('E', "%s", e.msg);
		goto out;
	}
	vy_mount_args off;
	if (kept && !adopt && keep_falls_back(a, &opened)) {
		off = *a;
		off.cfg.survive = false;
		off.cfg.survive_set = true; /* what .vyre/config shows */
		a = &off;
		kept = false;
	}
	if (kept) /* the .vyre/stats counts, where a successor finds them */
		counters = adopt ? vy_kept_counters_adopt(st, &adopt->memory, dev, opened.n) : NULL;
	if (kept && !counters)
		counters = vy_kept_counters_new(dev, opened.n);
	/* Each baseline comes after the driver's own stream memory is there. */
	for (; ncores < opened.n; ncores++) {
		uint64_t total;
		vy_core_options co = a->cfg.core;
		co.counters = counters ? vy_kept_counters_device(counters, ncores) : NULL;
		if (vy_device_warm_streams(dev[ncores], a->cfg.core.streams, &e) != VY_OK ||
		    dev[ncores]->ops->mem_info(dev[ncores], &free0[ncores], &total, &e) != VY_OK ||
		    vy_core_attach(dev[ncores], &co, &cores[ncores], &e) != VY_OK)
			break;
	}
	if (ncores < opened.n || vy_fs_init(&fs, cores, opened.n, &a->cfg, &e) != VY_OK) {
		report('E', "%s", e.msg);
		goto out;
	}
	fs_ready = true;
	char why[512], fd_notice[512] = "";
	if (kept && !adopt && vy_keeper_memory_reserve(kept_slots(cores, opened.n), fd_notice, sizeof(fd_notice)) != 0) {
		report('E', "%s", fd_notice); /* before anything is mounted */
		goto out;
	}
	if (adopt) {
		fs.started_ns = adopt->started_ns;
		fs.devices_ns = vy_monotonic_ns();
	}

	char opts[1024], kflags[sizeof(a->mount_flags)];
	vy_mountflags_libfuse(a->mount_flags, kflags, sizeof(kflags));
	snprintf(opts, sizeof(opts), "default_permissions,fsname=%s,subtype=vyrefs%s%s%s", a->source,
		 a->cfg.allow_other ? ",allow_other" : "", kflags[0] ? "," : "", kflags);
	char *argv[] = {"vyrefs", "-o", opts, a->debug ? "-d" : NULL, NULL};
	struct fuse_args args = FUSE_ARGS_INIT(a->debug ? 4 : 3, argv);
	se = fuse_session_new(&args, &vy_fs_ops, sizeof(vy_fs_ops), &fs);
	fuse_opt_free_args(&args);
	if (!se) {
		report('E', "cannot start a FUSE session with options %s (Fix: check the -o options)", opts);
		goto out;
	}
	fs.se = se;
	if (fuse_set_signal_handlers(se) != 0) {
		report('E', "cannot install signal handlers (Fix: report this bug)");
		goto out;
	}
	if (adopt) {
		/* The mount is there; its connection is the fd the keeper kept. */
		const uint8_t *req, *rep;
		uint32_t req_len, rep_len;
		if (!vy_state_get_init(st, &req, &req_len, &rep, &rep_len) ||
		    vy_session_adopt(se, adopt->slot[VY_KEEPER_SLOT_FUSE], req, req_len, rep, rep_len) != 0) {
			vy_log(LOG_ERR, "cannot take over %s: the recorded INIT exchange is not one (Fix: umount %s and "
					"mount again)", a->mountpoint, a->mountpoint);
			fuse_remove_signal_handlers(se);
			goto out;
		}
	} else if (vy_session_mount(se, a->mountpoint) != 0) {
		report('E', "cannot mount on %s (Fix: check that it is an empty directory you may mount on, that /dev/fuse "
			    "exists, and that fusermount3 is installed; allow_other needs user_allow_other in /etc/fuse.conf)",
		       a->mountpoint);
		fuse_remove_signal_handlers(se);
		goto out;
	} else if (vy_mountflags_late(a->mountpoint, a->mount_flags, why, sizeof(why)) != 0) {
		/* Flags libfuse 3.14 cannot pass (relatime, nosymfollow, ...). */
		report('E', "%s", why);
		fuse_session_unmount(se);
		fuse_remove_signal_handlers(se);
		goto out;
	}
	if (kept && !adopt) {
		/* The keeper holds /dev/fuse, the state region (the INIT
		 * exchange, the namespace's log and images), and this binary. */
		bool ok = vy_state_create(a->cfg.survive_log, &st, &e) == VY_OK;
		if (!ok)
			snprintf(why, sizeof(why), "%.400s (Fix: mount with survive=off)", e.msg);
		int sfds[3] = {ok ? st->fds.region : -1, ok ? st->fds.image[0] : -1, ok ? st->fds.image[1] : -1};
		ok = ok && vy_keeper_hand(keeper, fuse_session_fd(se), sfds, why, sizeof(why)) == 0;
		ok = ok && vy_keeper_memory_init(&km, keeper->sock, keeper->pid, NULL, why, sizeof(why)) == 0;
		km_ready = ok;
		for (unsigned d = 0; ok && d < opened.n; d++)
			if (vy_store_keep(cores[d]->store, &km.sink, &e) != VY_OK) {
				ok = false;
				snprintf(why, sizeof(why), "%s", e.msg);
			}
		if (ok && vy_persist_start(&fs, st, NULL, &e) != VY_OK) {
			ok = false;
			snprintf(why, sizeof(why), "%s", e.msg);
		}
		if (ok) /* backing=DIR: which directory, so a successor over another refuses */
			vy_backed_keep(&fs, vy_fs_inode(&fs, FUSE_ROOT_ID));
		if (ok) { /* memory not kept from now on fails closed */
			km.lost = vy_persist_memory_lost;
			atomic_store(&km.lost_fs, &fs);
		}
		if (!ok) {
			report('E', "%s", why);
			fuse_session_unmount(se);
			fuse_remove_signal_handlers(se);
			goto out;
		}
		vy_session_record_init(st);
	}
	mounted = true;
	fs.mountpoint = a->mountpoint;
	vy_atime_refresh(&fs); /* reads move atime as the mount's flags say */
	uint64_t budgets[VY_DEVICES_MAX] = {0};
	for (unsigned d = 0; d < opened.n; d++) {
		vy_store_usage u;
		vy_store_usage_get(cores[d]->store, &u);
		budgets[d] = u.budget;
	}
	char said[1000];
	vy_mount_devices_say(&opened, budgets, a->mountpoint, adopt != NULL, said, sizeof(said));
	if (!a->foreground) {
		report('R', "%s", said); /* the one line the mount command prints */
		vy_log_use_syslog(true);
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			if (null > 2)
				close(null);
		}
	}
	vy_log(LOG_NOTICE, "%s", said); /* with -f on stderr; else the system log's */
	if (oom && !adopt)
		vy_oom_exempt(true); /* why the OOM killer may take it, said once a mount */
	if (kept) {
		vy_keeper_watch(keeper, &fs.keeper_pid, &fs.standby_pid);
		if (fd_notice[0])
			vy_log(LOG_NOTICE, "%s", fd_notice); /* the log's, not the terminal's */
	}
	vy_kept_conns conns = {0};
	if (adopt) {
		fs.takeovers = adopt->takeovers;
		fs.death_ns = adopt->death_ns;
		km_ready = vy_adopt_namespace(&fs, st, adopt, keeper, &km, &conns, counters);
		fs.replayed_ns = vy_monotonic_ns();
	}
	if (km_ready && fs.persist) {
		fs.keep_sink = &km.sink; /* the map server's connections to the keeper */
		vy_keeper_link_memory(keeper, &km); /* what the keeper could not hold counts */
	}
	if (fs.keep_sink)
		vy_kept_counters_hand(counters, st, fs.keep_sink);
	if (fs.keep_sink && fs.cfg.write_behind && !fs.wbk)
		vy_wbk_start(&fs); /* a successor has the dead daemon's already */
	/* Client programs map files through it; the mount works without. */
	if (vy_mapsrv_start(&fs, a->mountpoint, &e) != VY_OK)
		vy_log(LOG_WARNING, "files cannot be mapped by programs: %s", e.msg);
	vy_mapsrv_adopt(&fs, &conns); /* the dead daemon's clients, served on */
	vy_kept_conns_free(&conns);
	fs.socket_name = vy_mapsrv_name; /* what .vyre/socket shows */

	if (fs.persist)
		vy_resend_hook(&fs); /* requests keep their changes with their answers */
	if (kept)
		vy_upgrade_offer(&fs); /* .vyre/upgrade hands over to the binary now installed */
	if (!adopt) { /* a successor's mount was ready long ago */
		ready_main = keeper && keeper->sock >= 0 ? keeper->pid : getpid();
		ready_mountpoint = a->mountpoint;
		vy_session_on_answering(say_ready);
	}
	int rc = vy_session_loop(se, a->cfg.idle_threads);
	vy_log_step("loop ended");
	dev_t served_dev = vy_mapsrv_dev(&fs); /* read as it began to serve */
	bool quiet = vy_mapsrv_stop(&fs);
	vy_log_step("map server stopped");
	if (kept) { /* before the writer goes: a late NOT_HELD would reach it freed */
		vy_keeper_unwatch(keeper); /* the keeper ends once we exit 0 */
		vy_keeper_link_memory(keeper, NULL);
	}
	if (km_ready)
		atomic_store(&km.lost_fs, NULL);
	vy_persist_stop(&fs); /* unmounted: what is freed now needs no successor */
	vy_log_step("keeper link quiet, writer stopped");
	fuse_session_unmount(se);
	if (adopt && !vy_session_connection_gone())
		unmount_adopted(a->mountpoint, served_dev, fuse_session_fd(se)); /* a signal ended it */
	if (km_ready)
		vy_keeper_memory_quiet(&km); /* what teardown frees, the keeper closes itself */
	if (!quiet) {
		/* A copy's worker is stuck in a client's fd (a filesystem that
		 * does not answer): it may wake into what teardown frees. The
		 * mount is gone; the kernel frees the rest at exit. */
		vy_log(LOG_WARNING, "unmounted %s with a copy stuck in its client's file; exiting without teardown",
		       a->mountpoint);
		/* backing=DIR: what is dirty goes to DIR first (the stuck copy
		 * waits on its client's file, holding no file of the mount's). */
		vy_backed_last_write_back(&fs);
		_exit(rc < 0 ? 1 : 0);
	}
	fuse_remove_signal_handlers(se);
	status = rc < 0 ? 1 : 0;
	if (rc < 0)
		vy_log(LOG_ERR, "the FUSE session ended with %s", strerror(-rc));
out:
	if (se)
		fuse_session_destroy(se);
	if (fs_ready) {
		vy_persist_stop(&fs);
		vy_fs_destroy(&fs);
		vy_log_step("filesystem destroyed");
	}
	vy_state_close(st);
	for (unsigned d = 0; d < ncores && cores[d]; d++)
		if (vy_core_close(cores[d], &e) != VY_OK) {
			vy_log(LOG_ERR, "releasing device %d's memory: %s", dev[d]->info.ordinal, e.msg);
			status = 1;
		}
	vy_log_step("devices' memory freed");
	if (kept) {
		vy_keeper_release(keeper); /* the memory it holds, and its standby's context, back first */
		vy_log_step("keeper released");
	}
	for (unsigned d = 0; d < ncores && cores[d]; d++) {
		uint64_t free1 = 0, total;
		if (dev[d]->ops->mem_info(dev[d], &free1, &total, &e) != VY_OK)
			continue;
		if (free1 == free0[d] && mounted)
			vy_log(LOG_INFO, "unmounted %s: device memory back to baseline (device %d, %" PRIu64 " bytes free)",
			       a->mountpoint, dev[d]->info.ordinal, free1);
		else if (free1 != free0[d])
			vy_log(LOG_WARNING, "%s %s: device %d has %" PRIu64 " bytes free, %" PRIu64 " at mount",
			       mounted ? "unmounted" : "after the failed mount of", a->mountpoint, dev[d]->info.ordinal,
			       free1, free0[d]);
	}
	vy_log_step("baseline read");
	vy_kept_counters_free(counters); /* after the cores counting into it */
	vy_mount_devices_close(&opened);
	vy_log_step("devices closed");
	if (km_ready)
		vy_keeper_memory_destroy(&km); /* after the stores: their frees went through it */
	if (report_fd >= 0)
		report('E', "the mount failed before it was ready (Fix: run with -f to see why)");
	return status;
}

/* survive=on: the keeper's command line: `vyrefs-keeper [--report-fd N]
 * THIS_BINARY [-f|-d] [-o SETTINGS] SOURCE MOUNTPOINT`, paths absolute (its
 * daemons run from /), and exec it: in this process with -f, else in the
 * detached child, which reports to this one through the pipe. */
static int start_keeper(const vy_mount_args *a)
{
	char self[PATH_MAX], keeper[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, "vyrefs: survive=on: cannot find this binary (/proc/self/exe): %s (Fix: mount /proc, "
				"or mount with survive=off)\n", strerror(errno));
		return 1;
	}
	self[n] = '\0';
	vy_keeper_memory_raise_limit(); /* as root: a keeper table for any budget */
	const char *slash = strrchr(self, '/');
	snprintf(keeper, sizeof(keeper), "%.*s/%s", (int)(slash ? slash - self : 0), self, VY_KEEPER_BINARY);
	if (access(keeper, X_OK) != 0) {
		fprintf(stderr, "vyrefs: survive=on needs %s beside this vyrefs: %s (Fix: make install, which installs "
				"both, or mount with survive=off)\n", keeper, strerror(errno));
		return 1;
	}
	char *config = a->config ? realpath(a->config, NULL) : NULL;
	const char *parts[2] = {a->settings, a->mount_flags};
	size_t cap = strlen(a->mount_flags) + (a->settings ? strlen(a->settings) : 0) +
		     (config ? strlen(config) : a->config ? strlen(a->config) : 0) + 16;
	char *opts = malloc(cap);
	if (!opts) {
		fprintf(stderr, "vyrefs: out of memory\n");
		free(config);
		return 1;
	}
	opts[0] = '\0';
	if (a->config)
		snprintf(opts, cap, "config=%s", config ? config : a->config);
	for (int i = 0; i < 2; i++)
		if (parts[i] && parts[i][0])
			snprintf(opts + strlen(opts), cap - strlen(opts), "%s%s", opts[0] ? "," : "", parts[i]);
	char fdnum[16] = "";
	char *argv[12];
	int k = 0;
	argv[k++] = keeper;
	if (!a->foreground) {
		argv[k++] = "--report-fd";
		argv[k++] = fdnum;
	}
	if (a->cfg.survive_standby)
		argv[k++] = "--standby";
	argv[k++] = self;
	if (a->foreground)
		argv[k++] = a->debug ? "-d" : "-f";
	if (opts[0]) {
		argv[k++] = "-o";
		argv[k++] = opts;
	}
	argv[k++] = (char *)a->source;
	argv[k++] = (char *)a->mountpoint;
	argv[k] = NULL;
	if (a->foreground) {
		fflush(NULL);
		execv(keeper, argv);
		fprintf(stderr, "vyrefs: cannot run %s: %s (Fix: reinstall vyrefs, or mount with survive=off)\n", keeper,
			strerror(errno));
		return 1;
	}
	bool child;
	int status = detach(&child, a->quiet);
	if (!child) {
		free(opts);
		free(config);
		return status;
	}
	snprintf(fdnum, sizeof(fdnum), "%d", report_fd);
	if (fcntl(report_fd, F_SETFD, 0) != 0) /* the report pipe crosses this exec only */
		report('E', "cannot pass the report pipe to the keeper: %s (Fix: run with -f)", strerror(errno));
	else if (execv(keeper, argv) != 0)
		report('E', "cannot run %s: %s (Fix: reinstall vyrefs, or mount with survive=off)", keeper,
		       strerror(errno));
	_exit(1);
}

int vy_mount_run(const vy_mount_args *given)
{
	vy_mount_args copy = *given, *a = &copy;
	/* Started by a keeper (survive=on): mount and hand it the fds. */
	vy_keeper_link link;
	int from_keeper = -1;
	char why[512];
	int linked = vy_keeper_link_env(&link, &from_keeper, why, sizeof(why));
	if (linked < 0) {
		fprintf(stderr, "vyrefs: %s\n", why);
		return 1;
	}
	vy_oom_exempt(false); /* before the keeper starts: it inherits it */
	struct stat st;
	errno = 0;
	if (stat(a->mountpoint, &st) != 0) {
		if (errno == ENOTCONN)
			fprintf(stderr, "vyrefs: cannot mount on %s: a mount there is dead (%s) (Fix: fusermount3 -u %s, or "
					"umount -l %s, then mount again)\n",
				a->mountpoint, strerror(errno), a->mountpoint, a->mountpoint);
		else
			fprintf(stderr, "vyrefs: cannot mount on %s: %s (Fix: create the directory first, e.g. mkdir -p %s)\n",
				a->mountpoint, strerror(errno), a->mountpoint);
		return 1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "vyrefs: cannot mount on %s: it is a %s, not a directory (Fix: mount on a directory, e.g. "
				"mkdir -p DIR && vyrefs DIR)\n",
			a->mountpoint, S_ISREG(st.st_mode) ? "regular file" : "special file");
		return 1;
	}
	/* fusermount3 mounts for a user only on a directory the user may
	 * write to; say whose it is rather than only that it failed. */
	if (geteuid() != 0 && access(a->mountpoint, W_OK) != 0 && st.st_uid != geteuid()) {
		struct passwd *pw = getpwuid(st.st_uid);
		fprintf(stderr, "vyrefs: cannot mount on %s: the directory is owned by another user (%s) and you may not "
				"write to it (Fix: mount on a directory of your own, e.g. mkdir -p ~/gpu && vyrefs ~/gpu)\n",
			a->mountpoint, pw ? pw->pw_name : "uid unknown");
		return 1;
	}
	/* libfuse opens /dev/fuse itself before it asks fusermount3, so a user
	 * without access to it gets only libfuse's line: say why, and what to do. */
	int dev_fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (dev_fuse < 0) {
		int err = errno;
		if (err == ENOENT || err == ENODEV || err == ENXIO)
			fprintf(stderr, "vyrefs: cannot mount on %s: no /dev/fuse here (%s) (Fix: as root, modprobe fuse; in a "
					"container, give it the device: docker run --device /dev/fuse)\n",
				a->mountpoint, strerror(err));
		else
			fprintf(stderr, "vyrefs: cannot mount on %s: cannot open /dev/fuse: %s (Fix: as root, chmod 0666 "
					"/dev/fuse, as a stock Debian system has it (some containers make it 0600); or mount as "
					"root)\n",
				a->mountpoint, strerror(err));
		return 1;
	}
	close(dev_fuse);
	/* The daemon leaves the working directory: hold the mountpoint whole. */
	char *abs = realpath(a->mountpoint, NULL);
	if (abs)
		a->mountpoint = abs;
	/* A second mount would hide the first and its files. statfs always
	 * reaches the daemon (stat may be answered from the kernel's cache),
	 * so it tells a live mount from a dead one. */
	struct statfs sf;
	if (vy_mountinfo_find(a->mountpoint, "fuse.vyrefs", NULL)) {
		if (statfs(a->mountpoint, &sf) != 0 && errno == ENOTCONN)
			fprintf(stderr, "vyrefs: cannot mount on %s: a mount there is dead (%s) (Fix: fusermount3 -u %s, or "
					"umount -l %s, then mount again)\n",
				a->mountpoint, strerror(ENOTCONN), a->mountpoint, a->mountpoint);
		else
			fprintf(stderr, "vyrefs: cannot mount on %s: a vyrefs mount is already there (Fix: umount %s first, "
					"or mount on another directory)\n",
				a->mountpoint, a->mountpoint);
		free(abs);
		return 1;
	}
	if (linked || a->foreground || a->cfg.survive) {
		int status;
		if (linked) {
			report_fd = from_keeper;
			status = vy_mount_serve(a, &link, NULL, NULL);
		} else {
			status = a->cfg.survive ? start_keeper(a) : vy_mount_serve(a, NULL, NULL, NULL);
		}
		free(abs);
		return status;
	}
	/* The daemon: CUDA is first touched in the child, after the fork. */
	bool child;
	int status = detach(&child, a->quiet);
	if (!child) {
		free(abs);
		return status;
	}
	status = vy_mount_serve(a, NULL, NULL, NULL);
	free(abs);
	_exit(status);
}
