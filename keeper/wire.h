/* The keeper's socketpair protocol (keeper/wire.c frames it), shared by
 * the keeper process (keeper/keeper.c) and the daemon (daemon/keeper_link.c).
 * Every message is one fixed-size vy_keeper_msg, fds ride along in
 * SCM_RIGHTS in the order of msg.slot[].
 *
 * Fd ownership: the receiver owns every fd it receives and closes it on
 * every path (a bad message included); a sender keeps its own copies.
 *
 * daemon -> keeper: ADD (hold these fds in these slots, replacing what a
 *   slot held), DROP (close these slots), SERVING (answering requests),
 *   LEAVING (it ends on purpose: wait for its exit status; its standby
 *   takes nothing then, and is killed at once, so its driver's teardown
 *   runs beside the daemon's own), RELEASE
 *   (unmounted cleanly: close every memory slot and end the standby, then
 *   answer RELEASED, so the devices' memory is back before its last check;
 *   sent only to a keeper that set VY_KEEPER_ENV_RELEASE to its own pid
 *   for its daemons, as an older keeper refuses an op it does not know);
 *   a standby: STANDBY_READY (its devices are open; pid
 *   VY_KEEPER_WANT_STATE asks for STATE unless it was sent already, 0
 *   does not: an older keeper ignores the field, an older standby sends
 *   0). A standby now opens its devices beside the handover, so READY may
 *   arrive after it was handed the mount: the keeper drops it there (an
 *   older keeper logs it as going the other way, and goes on).
 * keeper -> serving daemon: STANDBY (the pid of a ready standby, 0: none),
 *   for .vyre/stats; NOT_HELD (the slots of an ADD it could not hold: past
 *   its table, or fds its open-file limit refused, count 0 when it could
 *   not read which): that memory would be lost at a death, so the daemon
 *   counts a keep failure, and the keeper ends the mount at the next death
 *   as survive=off would. A daemon that knows no such op drops it.
 * keeper -> serving daemon that sent RELEASE: RELEASED, once done.
 * keeper -> standby: STATE (slots 1, 4 and 5: the state region and its
 *   images), once, as it starts it (or at its READY when the region came
 *   later), which it follows while it waits (persist/preload.h); a
 *   standby takes STATE at any point before ADOPT_END.
 * keeper -> successor: ADOPT (a batch of slots and their fds), then one
 *   ADOPT_END carrying the takeover's facts.
 *
 * A standby (survive_standby=on) is a successor the keeper starts before
 * any death, once a daemon serves: it opens its devices (the driver's
 * start, most of a takeover on a GPU) and waits for ADOPT; a death hands
 * the mount to it. It is the binary at the path when it started; an
 * upgrade or a refused state starts another instead.
 *
 * A death is seen when the daemon's end of the socketpair closes with no
 * LEAVING before it: the kernel closes a dead process's fds once its last
 * thread has ended, the highest fd first (the daemon keeps its end high,
 * above the driver's), 0.3 ms after a SIGKILL on the H100 where waitpid
 * waits 100 to 220 ms more for the driver's teardown (docs/survive.md).
 * Its cause is logged when it is reaped. */
#ifndef VY_KEEPER_WIRE_H
#define VY_KEEPER_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VY_KEEPER_MAGIC 0x4b505956u /* "VYPK" */
#define VY_KEEPER_VERSION 1u
/* fds per message: well under the kernel's SCM_MAX_FD (253). */
#define VY_KEEPER_BATCH 250u

/* The daemon's exit status that asks for a successor (an upgrade). */
#define VY_EXIT_TAKEOVER 75
/* A successor's exit status when it cannot read the kept state (another
 * state format), having touched nothing: the keeper starts the binary
 * that wrote the state (slot 3) in its place. */
#define VY_EXIT_REFUSED 76
/* A successor's exit status when the kept state is not exact (the dead
 * daemon could not keep a change): the keeper ends the mount's
 * connection, as survive=off would have (issue "survive 2"). */
#define VY_EXIT_BROKEN 77

/* What the keeper passes a daemon it starts. */
#define VY_KEEPER_ENV_FD "VYREFS_KEEPER_FD"         /* its end of the socketpair */
#define VY_KEEPER_ENV_REPORT "VYREFS_REPORT_FD"     /* the first daemon: mount.c's report pipe */
#define VY_KEEPER_ENV_STANDBY "VYREFS_STANDBY"      /* "1": a standby successor (below) */
#define VY_KEEPER_ENV_RELEASE "VYREFS_KEEPER_RELEASE" /* the keeper's pid: it answers RELEASE */
#define VY_KEEPER_ADOPT_ARG "--adopt"               /* argv[1] of a successor */
#define VY_KEEPER_BINARY "vyrefs-keeper"            /* next to the vyrefs binary */

enum vy_keeper_slot {
	VY_KEEPER_SLOT_FUSE = 0,   /* /dev/fuse */
	VY_KEEPER_SLOT_REGION = 1, /* the state region (a memfd) */
	VY_KEEPER_SLOT_LISTEN = 2, /* the listening client socket (reserved) */
	VY_KEEPER_SLOT_BINARY = 3, /* O_PATH fd of the binary that serves (it wrote the state) */
	VY_KEEPER_SLOT_IMAGE_A = 4, /* the state's checkpoint images (memfds) */
	VY_KEEPER_SLOT_IMAGE_B = 5,
	VY_KEEPER_SLOT_MEMORY = 6, /* 6..: memory fds (core/store_keep.h) */
};

enum vy_keeper_op {
	VY_KEEPER_ADD = 1,
	VY_KEEPER_DROP = 2,
	VY_KEEPER_SERVING = 3,
	VY_KEEPER_ADOPT = 4,
	VY_KEEPER_ADOPT_END = 5,
	VY_KEEPER_STANDBY_READY = 6,
	VY_KEEPER_STANDBY = 7,
	VY_KEEPER_STATE = 8,
	VY_KEEPER_LEAVING = 9,
	VY_KEEPER_NOT_HELD = 10,
	VY_KEEPER_RELEASE = 11,
	VY_KEEPER_RELEASED = 12,
};
#define VY_KEEPER_WANT_STATE 1 /* STANDBY_READY's pid field: send STATE */
/* ADOPT_END's cause_status when the death was seen by the link's close,
 * before the kernel gave its status (the keeper logs it when it does). */
#define VY_KEEPER_CAUSE_LATER (-1)

typedef struct vy_keeper_msg {
	uint32_t magic;
	uint16_t version;
	uint16_t op;
	uint32_t count;        /* entries of slot[] used (<= VY_KEEPER_BATCH) */
	int32_t pid;           /* ADOPT_END: the keeper's; STANDBY: the standby's, 0: none; STANDBY_READY: above */
	uint64_t takeovers;    /* ADOPT_END: takeovers so far, this one counted */
	uint64_t death_ns;     /* ADOPT_END: CLOCK_MONOTONIC at the keeper's waitpid */
	int32_t cause_signal;  /* ADOPT_END: the signal that ended the daemon, 0: it exited */
	int32_t cause_status;  /* ADOPT_END: its exit status when it exited; VY_KEEPER_CAUSE_LATER: not reaped yet */
	uint32_t slot[VY_KEEPER_BATCH];
} vy_keeper_msg;

_Static_assert(sizeof(vy_keeper_msg) == 40 + 4 * VY_KEEPER_BATCH, "vy_keeper_msg: fixed layout");

/* A message of `op` with no slots. */
void vy_keeper_msg_init(vy_keeper_msg *m, enum vy_keeper_op op);

/* Send m and m->count fds (fds[i] rides with m->slot[i]; fds may be NULL
 * when the op carries none). 0, or -1 with errno. */
int vy_keeper_send(int sock, const vy_keeper_msg *m, const int *fds);

/* Receive one message into m and its fds into fds[VY_KEEPER_BATCH] (-1
 * where none came). 1: a message; 0: the peer is gone; -1: errno
 * (EAGAIN when non-blocking and nothing waits), or EPROTO for a message
 * that is not the protocol's (its fds already closed). A message whose op
 * carries fds gets exactly m->count of them, or it is EPROTO. */
int vy_keeper_recv(int sock, vy_keeper_msg *m, int *fds);

#endif
