/* The store's memory to the keeper (issue "survive", docs/survive.md
 * "Memory"): the sink core/store_keep.h's vy_store_keep hands every
 * allocation to. Each allocation's fd goes to the keeper in an ADD on the
 * daemon's socketpair (keeper/wire.h) under a slot number of its own;
 * a freed one's slot goes in a DROP and is used again later.
 *
 * Slots: VY_KEEPER_SLOT_MEMORY up to the keeper's table (its open-file
 * limit, which the daemon inherits, at most 1 << 20), less a margin for
 * the keeper's own fds. Sends are synchronous: once add returns a slot,
 * the keeper has the fd even if this daemon dies the next instant (the
 * keeper reads every message left on the socketpair before it starts a
 * successor). A send that fails (a dead keeper, or one that took none for
 * VY_KEEPER_MEMORY_SEND_S seconds) gives slot 0: that memory does not
 * survive; the first such failure is logged. Thread-safe. */
#ifndef VY_KEEPER_MEMORY_H
#define VY_KEEPER_MEMORY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/device_keep.h"

#define VY_KEEPER_MEMORY_SEND_S 10

struct vy_fs;

typedef struct vy_keeper_memory {
	pthread_mutex_t lock;
	int sock;        /* the link's socketpair (not ours to close) */
	pid_t pid;       /* the keeper, for the log */
	uint32_t limit;  /* slots are below it */
	uint32_t next;   /* the lowest slot never handed out */
	uint32_t *free;  /* slots dropped, to use again (a stack) */
	uint32_t nfree, cap;
	uint8_t *used;   /* a bit a slot: held by the keeper for us */
	_Atomic bool failed; /* the link failed (a send): nothing more is sent; logged once */
	/* Memory is no longer handed (no slot left here, or the keeper could
	 * not hold some: NOT_HELD); frees still DROP, so the keeper lets go
	 * of what the store frees. Logged once. */
	_Atomic bool refused;
	uint64_t others;           /* slots room() leaves for what is not file memory */
	_Atomic bool full_logged;  /* room() said no once: logged */
	_Atomic uint64_t adds, drops, failures;
	vy_keep_sink sink;
	/* Told of every allocation the keeper could not be handed: that
	 * memory would be lost at a death, so the mount must no longer
	 * survive one (daemon/mount.c sets vy_persist_memory_lost and its
	 * fs once the writer runs; lost_fs NULL: nobody). */
	void (*lost)(struct vy_fs *fs, const char *why);
	struct vy_fs *_Atomic lost_fs;
} vy_keeper_memory;

/* The sink over socket `sock` to keeper `pid` (vy_keeper_link's). In a
 * successor, `handed` is vy_keeper_adoption.memory: every slot handed
 * counts as in use until vy_keeper_memory_settle (NULL in a first
 * daemon). Makes sends on `sock` blocking with a bound. 0, or -1 with
 * `why`. */
int vy_keeper_memory_init(vy_keeper_memory *m, int sock, pid_t pid, const vy_keep_fds *handed, char *why, size_t cap);
void vy_keeper_memory_destroy(vy_keeper_memory *m);
/* Unmounting: send the keeper nothing more (it closes every slot once
 * the daemon exits 0); frees from now on only free. */
void vy_keeper_memory_quiet(vy_keeper_memory *m);

/* Slots for memory of `bytes` (a device's budget and pool) on `ndev`
 * devices, and the fds beside them: an allocation with an fd of its own
 * holds more than VY_SLAB_MAX (1 MiB), and a slab (2 MiB or more) is made
 * only when its class's others are full, so every slot holds a MiB or
 * more of files, but a slab a size class a device. What a limit lower
 * than that cannot hold is refused when it is allocated (ENOSPC: the
 * sink's room), never made and lost. */
#define VY_KEEPER_OTHER_FDS 1024u /* the map server's 256 connections and 256 spare, modules, the keeper's own */
#define VY_KEEPER_MIN_FDS 512u    /* the least open-file limit a survive=on mount takes */
#define VY_KEEPER_OTHERS_MIN 320u /* the map server's 256 connections and 64 more, in a small table */
uint64_t vy_keeper_memory_slots_for(const uint64_t *bytes, unsigned ndev);

/* A survive=on mount, before it serves: as root (CAP_SYS_RESOURCE), the
 * hard open-file limit raised to the kernel's (fs.nr_open, at most 1 << 20)
 * before the keeper starts, so the keeper, the daemon and every successor
 * may hold that many; without it the hard limit stays. */
void vy_keeper_memory_raise_limit(void);

/* Whether the open-file limit (the keeper's, which the daemon shares)
 * takes a survive=on mount (VY_KEEPER_MIN_FDS): -1 with `why` and its
 * Fix, or 0. Where it holds fewer than the `need` slots the budget may
 * take (vy_keeper_memory_slots_for), 0 leaves a notice in `why` (else
 * empty) saying how many: allocations past them get ENOSPC. A mount
 * checks before it mounts, and logs the notice once it serves. */
int vy_keeper_memory_reserve(uint64_t need, char *why, size_t cap);

/* The keeper said it could not hold `n` slots of memory handed to it (n 0:
 * it could not tell how many): counted as keep failures, and the mount
 * fails closed (m->lost). m NULL: nothing to tell yet. */
void vy_keeper_memory_not_held(vy_keeper_memory *m, uint32_t n);

/* A successor, once every layout is adopted: DROP and close every slot
 * still in `fds` (memory no file holds: idle memory of the dead daemon's
 * pool, a slab no file uses) and make those slots free; then free fds's
 * table. The slots adopted stay in use. */
void vy_keeper_memory_settle(vy_keeper_memory *m, vy_keep_fds *fds);

#endif
