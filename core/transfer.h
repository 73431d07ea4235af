/* Transfers: uploads, ranged readbacks, fills and device-to-device copies.
 *
 * A batch is validated whole before any byte moves (handles live, ranges
 * inside their buffers, checked arithmetic), its buffers are pinned while it
 * runs, and it ends with one stream fence per staging chunk (one for any batch
 * up to 64 MiB by default). Requests to the same buffer that touch or overlap
 * are fused into one driver copy. Zero-length requests make no driver call.
 * Every byte goes through the pinned staging cache. */
#ifndef VY_TRANSFER_H
#define VY_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

typedef struct vy_upload {
	vy_handle handle;
	uint64_t offset;
	const void *src;
	uint64_t len;
} vy_upload;

typedef struct vy_readback {
	vy_handle handle;
	uint64_t offset;
	void *dst;
	uint64_t len;
} vy_readback;

/* Upload every request; where two overlap, the later one's bytes win. */
vy_err vy_upload_many(vy_core *c, const vy_upload *ups, size_t n, vy_error *e);

/* Upload a whole buffer: `len` must be the buffer's length. */
vy_err vy_upload_whole(vy_core *c, vy_handle h, const void *src, uint64_t len, vy_error *e);

/* Read every range back into its dst. */
vy_err vy_readback_many(vy_core *c, const vy_readback *rbs, size_t n, vy_error *e);

/* Read one range straight into page-locked memory the caller holds (a
 * staging buffer): one driver copy, no staging copy. */
vy_err vy_readback_pinned(vy_core *c, vy_handle h, uint64_t offset, void *dst, uint64_t len, vy_error *e);

/* Write one range straight from page-locked memory the caller holds: one
 * driver copy, no staging copy. */
vy_err vy_upload_pinned(vy_core *c, vy_handle h, uint64_t offset, const void *src, uint64_t len, vy_error *e);

/* Set [offset, offset+len) of a buffer to `byte` with a device memset: no
 * host-to-device bytes. */
vy_err vy_fill(vy_core *c, vy_handle h, uint64_t offset, uint64_t len, uint8_t byte, vy_error *e);

/* Zero every byte the buffer's memory holds from `from` on, past its
 * length too (the rest of the last allocation): memory about to leave the
 * daemon holds no bytes it held before (pooled memory may). */
vy_err vy_clear_past(vy_core *c, vy_handle h, uint64_t from, vy_error *e);

/* Zero a whole buffer. */
vy_err vy_clear(vy_core *c, vy_handle h, vy_error *e);

/* Copy `len` bytes between buffers (or within one, overlapping ranges too)
 * without leaving the device. */
vy_err vy_copy(vy_core *c, vy_handle src, uint64_t src_offset, vy_handle dst, uint64_t dst_offset, uint64_t len,
	       vy_error *e);

#endif
