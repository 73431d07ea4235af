/* Copies between two devices of one mount (two cores): device to device
 * where the devices reach each other's memory (peer access), otherwise
 * through pinned host memory, one staging chunk at a time. The copy is
 * counted in the destination core's telemetry as peer_bytes or
 * peer_staged_bytes (the staged path also counts its d2h and h2d bytes),
 * so a user can tell which ran. */
#ifndef VY_PEER_H
#define VY_PEER_H

#include <stdbool.h>

#include "core/core.h"

/* Let each of the n cores' devices reach the others' memory where the
 * devices allow it; direct[i * n + j]: i reaches j. Before any buffer is
 * allocated. */
vy_err vy_peer_pair(vy_core *const *cores, unsigned n, bool *direct, vy_error *e);

/* Copy `len` bytes from `src` at `src_off` (on core `from`) to `dst` at
 * `dst_off` (on core `to`): both ranges checked against their buffers,
 * the destination's range backed (no holes). `direct`: the devices are
 * peers and the mount lets them copy so. */
vy_err vy_peer_copy(vy_core *to, vy_handle dst, uint64_t dst_off, vy_core *from, vy_handle src, uint64_t src_off,
		    uint64_t len, bool direct, vy_error *e);

#endif
