/* A successor takes over a mount (adopt.h, docs/survive.md): the
 * connection, the queued and the resent requests, and the namespace with
 * its files' memory, from the state region and the keeper's fds. */
#include "daemon/adopt.h"
#include "core/clock.h"
#include "daemon/adopt_io.h"
#include "daemon/keeper_link.h"
#include "daemon/log.h"
#include "daemon/mount_devices.h"
#include "keeper/wire.h"
#include "persist/preload.h"
#include "state/state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static uint64_t death_ns;
static uint64_t takeover;
static vy_keeper_link keeper;

/* The first answer: the keeper counts this daemon as serving. */
static void first_answer(uint64_t ns)
{
	vy_keeper_serving(&keeper);
	uint64_t us = ns > death_ns ? (ns - death_ns) / 1000 : 0;
	vy_log(LOG_NOTICE, "takeover %" PRIu64 ": first request answered %" PRIu64 ".%03" PRIu64
			   " ms after the daemon's death",
	       takeover, us / 1000, us % 1000);
}

static void describe(const vy_keeper_adoption *ad, char *out, size_t cap)
{
	if (ad->cause_signal) {
		const char *name = sigabbrev_np(ad->cause_signal);
		snprintf(out, cap, "killed by SIG%s", name ? name : "?");
	} else if (ad->cause_status == VY_KEEPER_CAUSE_LATER) {
		snprintf(out, cap, "found dead (its link to the keeper closed; the keeper logs how it ended)");
	} else if (ad->cause_status == VY_EXIT_REFUSED) {
		snprintf(out, cap, "a successor that refused the kept state (another state format)");
	} else {
		snprintf(out, cap, "exited with status %d", ad->cause_status);
	}
}

/* Started by the keeper ahead of a death (keeper/wire.h)? */
static bool is_standby(void)
{
	const char *v = getenv(VY_KEEPER_ENV_STANDBY);
	bool standby = v && !strcmp(v, "1");
	unsetenv(VY_KEEPER_ENV_STANDBY); /* launchers do not inherit it */
	return standby;
}

/* A successor opens its devices (the driver's start, most of a takeover
 * on a GPU) in a thread, beside the kept state's load: a standby while it
 * waits, following the state (so a death soon after it started, a second
 * kill, waits for the longer of the two, not for both), and a successor
 * started after the death while it loads the state. A standby's keeper
 * hears it is ready once they are open. Failing, the successor opens them
 * in vy_mount_serve and reports why there. */
typedef struct early_devices {
	const vy_mount_args *a;
	bool standby;
	vy_mount_devices opened;
	pthread_t thread;
	bool running;
	atomic_bool done;
} early_devices;

static void *open_early(void *arg)
{
	early_devices *ed = arg;
	vy_error e;
	if (vy_mount_devices_open(&ed->a->cfg, &ed->opened, &e) != VY_OK)
		vy_log(LOG_WARNING, "%s %s: cannot open the devices ahead: %s; they open after the state's load",
		       ed->standby ? "standby for" : "taking over", ed->a->mountpoint, e.msg);
	else if (ed->standby)
		vy_keeper_standby_ready(&keeper, true); /* an older keeper sends the state now */
	atomic_store(&ed->done, true);
	return NULL;
}

static void start_early(early_devices *ed, bool standby)
{
	ed->standby = standby;
	vy_mount_devices_set_env(&ed->a->cfg); /* before a second thread runs */
	int rc = pthread_create(&ed->thread, NULL, open_early, ed);
	if (rc == 0) {
		ed->running = true;
		return;
	}
	vy_log(LOG_WARNING, "%s: cannot start a thread to open the devices (%s); opening them first",
	       ed->a->mountpoint, strerror(rc));
	open_early(ed);
}

static void finish_early(early_devices *ed)
{
	if (ed->running)
		pthread_join(ed->thread, NULL);
	ed->running = false;
}

/* The death came while the devices still open: the kept state is loaded
 * now, on this thread (the standby's copy brought up to date, or made
 * afresh from the adopted fds), in time the successor waits anyway. */
static vy_preload *load_beside(vy_preload *pre, const vy_keeper_adoption *ad)
{
	if (pre) {
		vy_preload_finish(pre);
		return pre;
	}
	const int from[3] = {ad->slot[VY_KEEPER_SLOT_REGION], ad->slot[VY_KEEPER_SLOT_IMAGE_A],
			     ad->slot[VY_KEEPER_SLOT_IMAGE_B]};
	int fd[3] = {-1, -1, -1};
	for (int i = 0; i < 3; i++)
		if (from[i] < 0 || (fd[i] = fcntl(from[i], F_DUPFD_CLOEXEC, 0)) < 0) {
			for (int j = 0; j < i; j++)
				close(fd[j]);
			return NULL; /* vy_mount_serve loads it, and says why it cannot */
		}
	vy_state_fds f = {fd[0], {fd[1], fd[2]}};
	return vy_preload_load(&f);
}

/* The keeper's STATE, to a standby: follow the kept state while waiting. */
static void follow_state(void *ctx, const int fds[3])
{
	vy_preload **pre = ctx;
	vy_state_fds f = {fds[0], {fds[1], fds[2]}};
	if (*pre) { /* one is enough */
		for (int i = 0; i < 3; i++)
			close(fds[i]);
		return;
	}
	*pre = vy_preload_start(&f);
}

int vy_adopt_run(const vy_mount_args *a)
{
	int report = -1;
	char why[512];
	if (vy_keeper_link_env(&keeper, &report, why, sizeof(why)) != 1) {
		fprintf(stderr, "vyrefs: %s is for the successor vyrefs-keeper starts%s%s (Fix: mount with vyrefs -o "
				"survive=on MOUNTPOINT)\n",
			VY_KEEPER_ADOPT_ARG, report == -1 ? "" : ": ", report == -1 ? "" : why);
		return 2;
	}
	if (report >= 0)
		close(report);
	vy_keeper_adoption ad;
	if (!a->foreground)
		vy_log_use_syslog(true);
	early_devices ed = {.a = a};
	vy_mount_devices *early = &ed.opened;
	bool standby = is_standby();
	if (standby)
		start_early(&ed, true);
	vy_preload *pre = NULL;
	int taken = vy_keeper_take(&keeper, &ad, standby ? follow_state : NULL, &pre, why, sizeof(why));
	uint64_t started = vy_monotonic_ns();
	/* A serving daemon outlives its keeper (the keeper set this for a
	 * standby, which ends with it): at once, before the devices and the
	 * state it may wait for. */
	if (standby && prctl(PR_SET_PDEATHSIG, 0) != 0)
		vy_log(LOG_WARNING, "cannot outlive the keeper: %s", strerror(errno));
	if (taken == 0 && !standby)
		start_early(&ed, false);
	const char *how = "followed ahead by the standby";
	if (taken == 0 && ed.running && !atomic_load(&ed.done)) {
		if (!pre)
			how = "loaded while the devices opened";
		pre = load_beside(pre, &ad);
	}
	finish_early(&ed); /* the devices step counts what is left of their start */
	vy_preload_stop(pre);
	ad.preload = pre; /* vy_adopt_namespace frees it */
	ad.preload_how = how;
	if (taken != 0) {
		vy_preload_free(pre);
		vy_mount_devices_close(early);
		/* A standby's keeper may end first: an unmount. */
		vy_log(standby ? LOG_INFO : LOG_ERR, "cannot take over %s: %s", a->mountpoint, why);
		return 1;
	}
	ad.devices = early->n ? early : NULL;
	vy_state *st = NULL;
	vy_state_fds fds = {ad.slot[VY_KEEPER_SLOT_REGION], {ad.slot[VY_KEEPER_SLOT_IMAGE_A], ad.slot[VY_KEEPER_SLOT_IMAGE_B]}};
	vy_error e;
	vy_err rc = VY_OK;
	if (ad.slot[VY_KEEPER_SLOT_FUSE] < 0)
		snprintf(why, sizeof(why), "the keeper handed no /dev/fuse");
	else if (fds.region < 0 || fds.image[0] < 0 || fds.image[1] < 0)
		snprintf(why, sizeof(why), "the keeper handed no state region");
	else if ((rc = vy_state_adopt(&fds, &st, NULL, &e)) != VY_OK)
		snprintf(why, sizeof(why), "%s", e.msg); /* another format says its Fix */
	if (rc == VY_ENOTSUP) {
		/* Another state format, untouched: the binary that wrote it
		 * takes over instead (the keeper's slot 3). */
		vy_log(LOG_ERR, "cannot take over %s: %s", a->mountpoint, why);
		vy_preload_free(pre);
		vy_mount_devices_close(early);
		return VY_EXIT_REFUSED;
	}
	if (st && vy_state_broken(st)) {
		/* The dead daemon could not keep a change: what is kept is
		 * not the mount it served. Fail closed (issue "survive 2"). */
		vy_log(LOG_ERR, "cannot take over %s: the dead daemon could not keep every change (its log says which), "
				"so the kept state is not what it served; the mount ends, as with survive=off (Fix: umount "
				"%s and mount again)", a->mountpoint, a->mountpoint);
		vy_state_close(st);
		vy_preload_free(pre);
		vy_mount_devices_close(early);
		return VY_EXIT_BROKEN;
	}
	if (!st) {
		vy_log(LOG_ERR, "cannot take over %s: %s (Fix: umount %s and mount again)", a->mountpoint, why,
		       a->mountpoint);
		vy_preload_free(pre);
		vy_mount_devices_close(early);
		return 1;
	}
	/* Slots 2 and 3 (the listening socket, the binary that wrote the
	 * state) are the keeper's: this binary writes it from now on. The
	 * region's are st's now. */
	for (int s = VY_KEEPER_SLOT_LISTEN; s <= VY_KEEPER_SLOT_BINARY; s++)
		if (ad.slot[s] >= 0)
			close(ad.slot[s]);
	if (vy_keeper_hand_binary(&keeper, why, sizeof(why)) != 0)
		vy_log(LOG_WARNING, "%s; a successor that refuses the state has none to fall back to", why);
	char cause[96];
	describe(&ad, cause, sizeof(cause));
	death_ns = ad.death_ns;
	ad.started_ns = started;
	takeover = ad.takeovers;
	vy_adopt_on_first_answer(first_answer);
	vy_log(LOG_WARNING, "takeover %" PRIu64 " of %s: the daemon was %s", ad.takeovers, a->mountpoint, cause);
	return vy_mount_serve(a, &keeper, &ad, st);
}
