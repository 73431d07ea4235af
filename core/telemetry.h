/* Telemetry: atomic counters and gauges, readable as a snapshot.
 *
 * One list (VY_TELEMETRY_FIELDS) names every field once; the struct, the
 * snapshot and the `key value` rendering all come from it, so a key cannot be
 * missing from one of them. Names are stable: README.md documents them. */
#ifndef VY_TELEMETRY_H
#define VY_TELEMETRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* X(name, kind): kind is COUNTER (reset by vy_telemetry_reset) or GAUGE (the
 * current state, kept across resets). */
#define VY_TELEMETRY_FIELDS(X)                                                 \
	X(h2d_bytes, COUNTER)        /* bytes copied host -> device */          \
	X(h2d_ops, COUNTER)          /* driver copies host -> device */         \
	X(wb_copies, COUNTER)        /* of them, write-behind slots (fs) */     \
	X(d2h_bytes, COUNTER)        /* bytes copied device -> host */          \
	X(d2h_ops, COUNTER)          /* driver copies device -> host */         \
	X(ra_copies, COUNTER)        /* of them, readahead chunks (fs) */       \
	X(ra_hits, COUNTER)          /* reads answered from readahead (fs) */   \
	X(d2d_bytes, COUNTER)        /* bytes copied device -> device */        \
	X(d2d_ops, COUNTER)          /* driver copies device -> device */       \
	X(memset_bytes, COUNTER)     /* bytes set by device memsets */          \
	X(memset_ops, COUNTER)       /* device memsets */                       \
	X(syncs, COUNTER)            /* host waits on a stream */               \
	X(driver_allocs, COUNTER)    /* device allocations from the driver */   \
	X(driver_frees, COUNTER)     /* device frees to the driver */           \
	X(pool_hits, COUNTER)        /* allocations served by the pool */       \
	X(pool_misses, COUNTER)      /* allocations the pool could not serve */ \
	X(pool_evictions, COUNTER)   /* pooled buffers freed to make room */    \
	X(pool_bypasses, COUNTER)    /* frees too large to pool, freed at once */ \
	X(deferred_frees, COUNTER)   /* frees deferred until work finished */   \
	X(staging_hits, COUNTER)     /* pinned buffers served from the cache */ \
	X(staging_misses, COUNTER)   /* pinned buffers allocated anew */        \
	X(launches, COUNTER)         /* kernel launches */                      \
	X(sequences, COUNTER)        /* control-file sequences run */           \
	X(steps, COUNTER)            /* their steps, repeats counted */         \
	X(device_time_us, COUNTER)   /* device time measured by events */       \
	X(share_moves, COUNTER)      /* small buffers moved to memory of their own to be shared */ \
	X(exports, COUNTER)          /* buffers handed to the launcher (or a client) */ \
	X(launcher_starts, COUNTER)  /* launcher processes started */           \
	X(launcher_restarts, COUNTER) /* of them, after a fault, crash or timeout */ \
	X(maps, COUNTER)             /* files mapped by client programs (vy_map) */ \
	X(resident_bytes, GAUGE)     /* bytes in live buffers */                \
	X(resident_buffers, GAUGE)   /* live buffers */                         \
	X(pooled_bytes, GAUGE)       /* idle bytes held by the pool */          \
	X(pooled_buffers, GAUGE)     /* idle buffers held by the pool */        \
	X(staging_cached_bytes, GAUGE) /* idle pinned bytes in the cache */ \
	X(mapped_bytes, GAUGE)       /* device bytes client programs map now */

typedef struct vy_telemetry {
#define VY_TELEMETRY_ATOMIC(name, kind) _Atomic uint64_t name;
	VY_TELEMETRY_FIELDS(VY_TELEMETRY_ATOMIC)
#undef VY_TELEMETRY_ATOMIC
} vy_telemetry;

typedef struct vy_telemetry_snapshot {
#define VY_TELEMETRY_PLAIN(name, kind) uint64_t name;
	VY_TELEMETRY_FIELDS(VY_TELEMETRY_PLAIN)
#undef VY_TELEMETRY_PLAIN
} vy_telemetry_snapshot;

void vy_telemetry_init(vy_telemetry *t);

/* Add to a counter. Relaxed: counters order nothing. */
#define vy_telemetry_add(t, field, n) \
	atomic_fetch_add_explicit(&(t)->field, (uint64_t)(n), memory_order_relaxed)
/* Set a gauge (callers hold the lock of the state it mirrors). */
#define vy_telemetry_set(t, field, v) \
	atomic_store_explicit(&(t)->field, (uint64_t)(v), memory_order_relaxed)

void vy_telemetry_snapshot_take(const vy_telemetry *t, vy_telemetry_snapshot *out);

/* Zero the counters; gauges keep describing the current state. */
void vy_telemetry_reset(vy_telemetry *t);

/* Render as `key value` lines into buf (NUL-terminated, truncated to cap).
 * Returns the length the full text needs, like snprintf. */
size_t vy_telemetry_format(const vy_telemetry_snapshot *s, char *buf, size_t cap);

#endif
