/* The daemon's end of its keeper's socketpair (keeper/wire.h): where it
 * comes from (the environment the keeper set), handing the keeper the
 * mount's fds, taking them back in a successor, and noticing the keeper's
 * death. survive=off: no link, none of this runs. */
#ifndef VY_KEEPER_LINK_H
#define VY_KEEPER_LINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/device_keep.h"
#include "keeper/wire.h"

typedef struct vy_keeper_link {
	int sock;  /* -1: no keeper */
	pid_t pid; /* the keeper: our parent */
	_Atomic int *keeper_pid; /* set to 0 when the keeper is gone */
	_Atomic int *standby_pid; /* the keeper's ready standby, 0: none */
	/* Told of memory the keeper could not hold (its NOT_HELD): set once
	 * the daemon's memory sink runs (NULL: not yet, and what came waits
	 * in not_held for vy_keeper_link_memory). */
	struct vy_keeper_memory *_Atomic memory;
	_Atomic uint32_t not_held;
	pthread_t watch;
	int stop; /* eventfd that ends the watch */
	bool watching;
	bool releases; /* the keeper answers RELEASE (VY_KEEPER_ENV_RELEASE) */
} vy_keeper_link;

/* What a successor is handed. */
typedef struct vy_keeper_adoption {
	int slot[VY_KEEPER_SLOT_MEMORY]; /* fds of slots 0..5, -1 where none */
	unsigned memory_fds;             /* memory slots handed */
	/* Their fds by slot (sized to the highest handed + 1; -1 where none):
	 * the store adopts from it (core/store_keep.h), then
	 * vy_keeper_memory_settle drops what is left and frees it. */
	vy_keep_fds memory;
	uint64_t takeovers, death_ns;
	int cause_signal, cause_status;
	/* The successor's own: when it held the keeper's fds (its steps,
	 * fs.h), and its devices, opened beside (or NULL). */
	uint64_t started_ns;
	struct vy_mount_devices *devices;
	/* A copy of the kept namespace loaded ahead (or NULL), and how: by a
	 * standby following it, or while the devices opened;
	 * vy_adopt_namespace uses and frees it. */
	struct vy_preload *preload;
	const char *preload_how;
} vy_keeper_adoption;

/* The link the keeper passed, and the first daemon's report fd (-1 when
 * none): 1 linked, 0 no keeper here, -1 a bad one (`why` says). The
 * variables are removed from the environment and the fds made CLOEXEC,
 * so launchers inherit neither. */
int vy_keeper_link_env(vy_keeper_link *k, int *report_fd, char *why, size_t cap);

/* The first daemon, once mounted: /dev/fuse, the state region, this binary
 * (O_PATH) and the state's images A and B (state_fds: region, A, B) into
 * slots 0, 1, 3, 4 and 5. 0, or -1 with `why`. */
int vy_keeper_hand(vy_keeper_link *k, int fuse_fd, const int state_fds[3], char *why, size_t cap);

/* A successor that took the state over: this binary into slot 3, as the
 * one a later successor that refuses the state falls back to (it writes
 * the state from now on). 0, or -1 with `why`. */
int vy_keeper_hand_binary(vy_keeper_link *k, char *why, size_t cap);

/* A successor: every slot and the takeover's facts. 0, or -1 with `why`.
 * A standby's STATE message (the region's fds: region, A, B) goes to
 * on_state, which owns them (NULL: closed). */
int vy_keeper_take(vy_keeper_link *k, vy_keeper_adoption *ad, void (*on_state)(void *ctx, const int fds[3]),
		   void *ctx, char *why, size_t cap);

/* A standby: its devices are open (the keeper tells the serving daemon);
 * want_state asks for the state region's fds ahead (a STATE message). */
void vy_keeper_standby_ready(vy_keeper_link *k, bool want_state);

/* Tell the keeper this daemon is answering requests (a successor, at its
 * first answer): its deaths count from none again. */
void vy_keeper_serving(vy_keeper_link *k);

/* Watch for the keeper's end (HUP): log it and store 0 in *keeper_pid;
 * and store what the keeper says of its standby in *standby_pid. Ended
 * by vy_keeper_unwatch, which also closes the link. */
/* From now on the keeper's NOT_HELD counts in `m` (NULL: no longer),
 * and what came before it does now. */
void vy_keeper_link_memory(vy_keeper_link *k, struct vy_keeper_memory *m);

void vy_keeper_watch(vy_keeper_link *k, _Atomic int *keeper_pid, _Atomic int *standby_pid);
/* The watch ends and the keeper is told LEAVING; the link stays open for
 * vy_keeper_release. */
void vy_keeper_unwatch(vy_keeper_link *k);

/* A clean unmount, the devices' memory freed: the keeper closes every
 * memory slot and ends its standby, and says when (bounded: 10 s), so the
 * memory is back on the devices before the daemon checks it. A keeper
 * that does not answer RELEASE (an older vyrefs's, after an upgrade) is
 * not asked. Closes the link. */
void vy_keeper_release(vy_keeper_link *k);

/* Tell the keeper this daemon ends on purpose (LEAVING, once): it then
 * waits for the exit status. Every exit() does (atexit), and closing the
 * link does; an _exit of its own must call it first. A death says
 * nothing, and the link's close tells the keeper at once (keeper/wire.h). */
void vy_keeper_leaving(void);

#endif
