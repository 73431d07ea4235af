/* survive=on: write-behind's slots (wbehind.h) in memory the keeper holds,
 * so a write is acknowledged once its bytes are where a successor finds
 * them, as survive=off acknowledges it once they are in a slot.
 *
 * One memfd per mount: a header of one descriptor per slot (the file, the
 * file offset of the slot's first byte, how many bytes it holds, and when
 * it was taken), then the slots. The keeper holds the memfd (a memory slot
 * of its own) and a VY_P_WBEHIND record says which (persist/format.h).
 * Each slot is mapped page-locked as it is first taken.
 *
 * A slot's owner (one file's write-behind, under its lock) writes the
 * bytes first and then the descriptor's length, so whatever length a
 * successor reads covers bytes written. A copy that reached the device
 * sets the length 0 before the slot is reused; one that failed keeps it
 * (vy_wbk_hold), for the successor to try again. A successor copies every
 * slot of a non-zero length into its file, the oldest first, before it
 * answers any request: a write answered is on the device again; one not
 * answered may land partly, and the kernel resends it whole. */
#ifndef VY_WBEHIND_KEEP_H
#define VY_WBEHIND_KEEP_H

#include "core/device_keep.h"
#include "fs/fs.h"

struct vy_p_wbehind;
typedef struct vy_wbk vy_wbk;

/* A new region handed to the keeper and recorded, as fs->wbk. False
 * (logged, Fix given): none; write-behind then stays off, as a write
 * gathered elsewhere would die with the daemon. */
bool vy_wbk_start(vy_fs *fs);

/* A successor: the region `kept` says the dead daemon gathered into (its
 * fd in mem, taken), every write waiting there copied into its file; the
 * region is fs->wbk from now on when it has this binary's shape and
 * write-behind is on (else its fd is left in mem, for the caller to drop). The copies done go to
 * *applied, those whose file is gone or that failed to *skipped; a file
 * whose copy failed is told through `failed` (vy_wbehind_fail: its
 * writers were answered, so its next fsync must say so). */
typedef void (*vy_wbk_failed)(vy_fs *fs, vy_inode *in, vy_err rc, const vy_error *why);
void vy_wbk_adopt(vy_fs *fs, const struct vy_p_wbehind *kept, vy_keep_fds *mem, vy_wbk_failed failed,
		  uint64_t *applied, uint64_t *skipped);

/* Unregister and unmap (the keeper's copy ends with the keeper). Every
 * slot given back first. */
void vy_wbk_stop(vy_fs *fs);

/* A free slot's memory, page-locked, and its number in *index (>= 1);
 * NULL when none is free or it cannot be locked. */
void *vy_wbk_take(vy_wbk *w, int *index);
/* Give it back: its length is 0 already. */
void vy_wbk_give(vy_wbk *w, int index);
/* Its copy failed, or an older slot's of its file did: the slot keeps its
 * bytes and length, out of use, so a successor copies it again in its
 * order (the file's sticky error refuses every other change meanwhile);
 * instead of vy_wbk_give. A successor whose own copy fails holds it
 * again, with every newer slot of that file, for the next one. */
void vy_wbk_hold(vy_wbk *w, int index);
/* File `ino` goes: the slots its failed copies held are cleared and free. */
void vy_wbk_drop_held(vy_wbk *w, uint64_t ino);
/* The slot now gathers file `ino` from `start` (its length set 0 first). */
void vy_wbk_begin(vy_wbk *w, int index, uint64_t ino, uint64_t start);
/* Its bytes [0, len) are written (len 0: none waits). */
void vy_wbk_publish(vy_wbk *w, int index, uint64_t len);

#endif
