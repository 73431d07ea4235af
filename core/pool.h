/* The resident pool: freed device buffers kept for reuse, by exact size.
 *
 * A take of a size with an idle buffer is O(1) and makes no driver call. Idle
 * bytes are capped: before a buffer is put, the largest idle sizes are freed
 * until it fits (the incoming buffer itself is never evicted); a buffer larger
 * than the cap is freed at once. Not locked: the resident store owns the pool
 * and holds its lock around every call. */
#ifndef VY_POOL_H
#define VY_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "core/telemetry.h"
#include "core/u64map.h"

typedef struct vy_pool_bin vy_pool_bin;

typedef struct vy_pool {
	vy_device *dev;
	vy_telemetry *tel;
	uint64_t cap;        /* idle bytes allowed; 0 turns pooling off */
	uint64_t bytes;      /* idle bytes held */
	uint64_t buffers;    /* idle buffers held */
	vy_u64map bins;      /* size -> vy_pool_bin (kept while empty, for reuse) */
	size_t empty_bins;
	vy_pool_bin **heap;  /* max-heap by size of the non-empty bins */
	size_t heap_len, heap_cap;
} vy_pool;

void vy_pool_init(vy_pool *p, vy_device *dev, vy_telemetry *tel, uint64_t cap);
/* Frees every idle buffer and the pool's own memory. */
vy_err vy_pool_destroy(vy_pool *p, vy_error *e);

/* An idle buffer of exactly `size` bytes: true and *out on a hit. Counts a
 * pool hit or miss. */
bool vy_pool_take(vy_pool *p, uint64_t size, vy_dptr *out);

/* Give back a buffer of `size` bytes. It is kept, or freed to the driver
 * when larger than the cap, when a slab's slot (at most dev->slab_max), or
 * when host memory for the bookkeeping runs out. Evictions made to fit it
 * are counted. */
vy_err vy_pool_put(vy_pool *p, uint64_t size, vy_dptr ptr, vy_error *e);

/* Free one idle buffer of the largest size held. VY_ENOENT when empty. */
vy_err vy_pool_evict_largest(vy_pool *p, vy_error *e);

/* Free every idle buffer. */
vy_err vy_pool_drain(vy_pool *p, vy_error *e);

#endif
