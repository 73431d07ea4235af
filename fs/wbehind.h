/* Write-behind: small writes to a file gather in pinned host slots and
 * reach the device in one asynchronous copy per slot.
 *
 * A write is acknowledged once its bytes are in a slot. A slot's copy is
 * queued when the slot is full or the next write does not continue it, on a
 * stream of the slot's own, so the copy runs while the next slot fills; a
 * slot is refilled only after its copy completed. Everything that looks at
 * the file's device bytes settles first (reads, truncation, copies, control
 * sequences, the fit at close, flush, fsync, freeing): every gathered byte
 * is copied and waited for. A copy that fails is sticky: every later read,
 * write, flush and fsync of the file reports it, so the loss is never
 * silent (survive=on: its slot is kept for a successor, which copies it
 * again, or reports it as its own if that fails too). Slots are capped fs-wide (VY_WB_SLOTS); a write that gets none,
 * or one larger than half a slot, goes to the device directly, after what
 * was gathered before it. The caller holds the inode's lock: write for
 * vy_wbehind_write, read or write for vy_wbehind_settle. */
#ifndef VY_WBEHIND_H
#define VY_WBEHIND_H

#include "fs/fs.h"

#define VY_WB_SLOT (4u << 20)
#define VY_WB_SLOTS 32

/* Gather [off, off+len) for the file (capacity already covers it). *taken
 * false: the caller uploads it directly; everything gathered before is on
 * the device by then. */
vy_err vy_wbehind_write(vy_fs *fs, vy_inode *in, uint64_t off, const void *src, size_t len, bool *taken,
			vy_error *e);
/* Every gathered byte on the device; the file's sticky failure, if any. */
vy_err vy_wbehind_settle(vy_fs *fs, vy_inode *in, vy_error *e);
/* Only the copies in flight done (they name the current buffer); the slot
 * still gathering stays, to be copied into whatever buffer the file has
 * when it is queued. Before the file moves to a new buffer. */
vy_err vy_wbehind_quiesce(vy_fs *fs, vy_inode *in, vy_error *e);
/* Settle and free the state (the inode is going). */
void vy_wbehind_free(vy_fs *fs, vy_inode *in);
/* The file's written bytes did not all reach the device (a successor's
 * copy of a kept slot failed): sticky from now on, as a failed copy of
 * its own is. */
void vy_wbehind_fail(vy_fs *fs, vy_inode *in, vy_err rc, const vy_error *why);

#endif
