/* Keeping a store's memory for a successor daemon (issue "survive",
 * docs/survive.md "Memory"): with survive=on every allocation that can hold
 * a file's bytes is an fd, and a copy of that fd goes to the mount's keeper
 * (keeper/) under a slot number the moment it is made, and is dropped there
 * when the allocation is freed. A buffer is then described by its layout:
 * which slot (and where in it) holds each piece. A successor, handed the
 * keeper's fds, makes each file's buffer again from its layout: the same
 * memory, not a copy.
 *
 * The layout is what fs/ writes into the state region (state/) whenever a
 * buffer's shape changes; nothing here knows about files or the region. */
#ifndef VY_STORE_KEEP_H
#define VY_STORE_KEEP_H

#include <stdint.h>

#include "core/device_keep.h"
#include "core/store.h"

/* vy_keep_slot, vy_keep_sink and vy_keep_fds are core/device_keep.h's
 * (the device keeps its allocations' fds; the store, its buffers' layouts). */

/* One piece of a buffer: `bytes` at offset `off` of the buffer are bytes
 * [at, at + bytes) of the allocation kept in `slot` (at is non-zero for a
 * slot of a host slab). Whatever of [0, len) no piece covers is a hole. */
typedef struct vy_keep_piece {
	uint64_t off;
	uint64_t bytes;
	uint64_t at;
	vy_keep_slot slot;
	uint32_t zero; /* 0 */
} vy_keep_piece;

typedef struct vy_keep_layout {
	uint64_t len;  /* the buffer's memory's length: its lead, then vy_buffer_view.len */
	uint32_t n;
	uint32_t lead; /* vy_buffer_view.lead: bytes of the memory before byte 0 */
	vy_keep_piece piece[VY_CHUNKS_MAX];
} vy_keep_layout;

/* From now on, hand every allocation of this store's device to `sink`
 * (those made before it too); the sink must outlive the store. */
vy_err vy_store_keep(vy_store *s, const vy_keep_sink *sink, vy_error *e);

/* A live buffer's layout now. VY_ENOTSUP when a piece of it is memory the
 * keeper does not hold (then this file's bytes would not survive). */
vy_err vy_store_keep_layout(vy_store *s, vy_handle h, vy_keep_layout *out, vy_error *e);

/* A successor: a live buffer made of the memory `l` names (taken from
 * `fds`), counted in the budget as it was before; its handle in *out. */
vy_err vy_store_keep_adopt(vy_store *s, const vy_keep_layout *l, vy_keep_fds *fds, vy_handle *out, vy_error *e);

#endif
