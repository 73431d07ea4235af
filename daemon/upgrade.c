/* Handing the mount to a new daemon on purpose (upgrade.h). */
#include "daemon/upgrade.h"
#include "daemon/keeper_link.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "fs/fs.h"
#include "keeper/wire.h"
#include "persist/writer.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* How long the requests in flight get to be answered; past it the rest
 * are the successor's (the kernel resends them). */
#define QUIET_WAIT_MS 10000u

static atomic_bool asked;

static void *hand_over(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "vy-upgrade"); /* not a FUSE worker (tests count those) */
	long left = vy_session_quiesce(QUIET_WAIT_MS);
	if (left > 0)
		vy_log(LOG_WARNING, "upgrade: %ld requests still unanswered after %u ms; the successor gets them again",
		       left, QUIET_WAIT_MS);
	vy_log(LOG_NOTICE, "upgrade: vyrefs %s hands the mount to the binary now installed", VY_VERSION);
	vy_keeper_leaving(); /* the keeper waits for the status that asks for the binary now installed */
	_exit(VY_EXIT_TAKEOVER); /* no teardown: the keeper holds every fd, the successor adopts */
}

static int ask(vy_fs *fs)
{
	if (atomic_load(&fs->keeper_pid) == 0)
		return ENOTCONN; /* the keeper is gone: nothing would start a successor */
	vy_persist_counts kept;
	vy_persist_counts_get(fs, &kept);
	if (kept.failures) { /* the successor would refuse the state: the mount would end */
		vy_log(LOG_ERR, "upgrade refused: %" PRIu64 " changes could not be kept, so the kept state is not exact "
				"and a successor would end the mount (Fix: umount and mount again, then upgrade)",
		       kept.failures);
		return EIO;
	}
	if (atomic_exchange(&asked, true))
		return 0; /* already handing over */
	pthread_t t;
	int err = pthread_create(&t, NULL, hand_over, fs);
	if (err) {
		atomic_store(&asked, false);
		vy_log(LOG_ERR, "upgrade: cannot start the handover: %s", strerror(err));
		return EAGAIN;
	}
	pthread_detach(t);
	return 0;
}

void vy_upgrade_offer(vy_fs *fs)
{
	fs->upgrade = ask;
}
