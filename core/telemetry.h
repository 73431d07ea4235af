/* Telemetry: atomic counters and gauges, readable as a snapshot.
 *
 * One list (VY_TELEMETRY_FIELDS) names every field once; the struct, the
 * snapshot and the `key value` rendering all come from it, so a key cannot be
 * missing from one of them. Names are stable: docs/manual.md documents them
 * (tests/cli/docs_test.sh checks its table against a mount's keys). */
#ifndef VY_TELEMETRY_H
#define VY_TELEMETRY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* X(name, kind, help): kind is COUNTER (reset by vy_telemetry_reset) or GAUGE
 * (the current state, kept across resets); help is the one line that
 * .vyre/metrics gives as its # HELP. */
#define VY_TELEMETRY_FIELDS(X)                                                  \
	X(h2d_bytes, COUNTER, "bytes copied host to device") \
	X(h2d_ops, COUNTER, "driver copies host to device") \
	X(wb_copies, COUNTER, "host-to-device copies that carried write-behind slots") \
	X(d2h_bytes, COUNTER, "bytes copied device to host") \
	X(d2h_ops, COUNTER, "driver copies device to host") \
	X(ra_copies, COUNTER, "device-to-host copies that were readahead chunks") \
	X(ra_hits, COUNTER, "reads answered from readahead memory") \
	X(d2d_bytes, COUNTER, "bytes copied device to device") \
	X(d2d_ops, COUNTER, "driver copies device to device") \
	X(peer_copies, COUNTER, "copies from another device of the mount, device to device") \
	X(peer_bytes, COUNTER, "bytes copied from another device of the mount, device to device") \
	X(peer_staged_bytes, COUNTER, "bytes copied from another device of the mount through host memory (peer access off)") \
	X(spills, COUNTER, "files that left this device for another of the mount because it was full (placed by default)") \
	X(memset_bytes, COUNTER, "bytes set by device memsets") \
	X(memset_ops, COUNTER, "device memsets") \
	X(syncs, COUNTER, "host waits on a stream") \
	X(driver_allocs, COUNTER, "device allocations from the driver") \
	X(driver_frees, COUNTER, "device frees to the driver") \
	X(pool_hits, COUNTER, "allocations served by the pool") \
	X(pool_misses, COUNTER, "allocations the pool could not serve") \
	X(pool_evictions, COUNTER, "pooled buffers freed to make room") \
	X(pool_bypasses, COUNTER, "frees too large to pool, freed at once") \
	X(deferred_frees, COUNTER, "frees deferred until work finished") \
	X(staging_hits, COUNTER, "pinned buffers served from the cache") \
	X(staging_misses, COUNTER, "pinned buffers allocated anew") \
	X(launches, COUNTER, "kernel launches") \
	X(sequences, COUNTER, "control-file sequences run") \
	X(steps, COUNTER, "control-file sequence steps run, repeats counted") \
	X(grows, COUNTER, "files grown in place: memory mapped at their end, nothing copied") \
	X(moves, COUNTER, "files moved to a buffer of another size by a device copy (under 2 MiB, or on a device that cannot share)") \
	X(placed_moves, COUNTER, "files moved on their device to be placed for their format after their bytes came (a header written last, a file sized first)") \
	X(share_moves, COUNTER, "files under 2 MiB moved to device memory of their own to be mapped") \
	X(exports, COUNTER, "buffers mapped into the launcher") \
	X(launcher_starts, COUNTER, "launcher processes started") \
	X(launcher_restarts, COUNTER, "launchers started after one faulted, died or ran past launch_timeout") \
	X(maps, COUNTER, "files mapped by programs") \
	X(copy_timeouts, COUNTER, "daemon copies abandoned because the client's file moved no byte for 20 s") \
	X(client_refusals, COUNTER, "client socket connections refused (a per-user or total limit, or no file descriptor to spare)") \
	X(compiles, COUNTER, "CUDA C modules compiled by NVRTC") \
	X(compile_cache_hits, COUNTER, "CUDA C modules found compiled in the cache") \
	X(device_time_us, COUNTER, "device time of control-file sequences, by CUDA events") \
	X(resident_bytes, GAUGE, "bytes in live buffers") \
	X(resident_buffers, GAUGE, "live buffers") \
	X(pooled_bytes, GAUGE, "idle bytes held by the pool") \
	X(pooled_buffers, GAUGE, "idle buffers held by the pool") \
	X(staging_cached_bytes, GAUGE, "idle pinned bytes in the cache") \
	X(mapped_bytes, GAUGE, "device bytes programs map now") \
	X(launcher_sequences, GAUGE, "sequences a launcher holds now: sent to it, not yet answered (0 or 1 per device)")

typedef struct vy_telemetry {
#define VY_TELEMETRY_ATOMIC(name, kind, help) _Atomic uint64_t name;
	VY_TELEMETRY_FIELDS(VY_TELEMETRY_ATOMIC)
#undef VY_TELEMETRY_ATOMIC
} vy_telemetry;

typedef struct vy_telemetry_snapshot {
#define VY_TELEMETRY_PLAIN(name, kind, help) uint64_t name;
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
/* Zero the gauges; counters keep their counts (a successor's over the
 * dead daemon's counters: it sets the gauges from what it holds). */
void vy_telemetry_clear_gauges(vy_telemetry *t);
/* The field list's identity (FNV-1a of every name and kind, in order): a
 * vy_telemetry another binary kept is this one's iff the two are equal. */
uint64_t vy_telemetry_layout(void);

/* Render as `key value` lines into buf (NUL-terminated, truncated to cap).
 * Returns the length the full text needs, like snprintf. */
size_t vy_telemetry_format(const vy_telemetry_snapshot *s, char *buf, size_t cap);
/* Add every field of `b` to `a`: a mount's totals over its devices. */
void vy_telemetry_snapshot_add(vy_telemetry_snapshot *a, const vy_telemetry_snapshot *b);

/* The same snapshot in the Prometheus text exposition format: `# HELP` and
 * `# TYPE` for each, names `vyrefs_KEY`, counters `vyrefs_KEY_total`, and
 * microseconds as seconds (device_time_us is vyrefs_device_time_seconds_total).
 * Like vy_telemetry_format: NUL-terminated, returns the length needed. */
size_t vy_telemetry_format_prometheus(const vy_telemetry_snapshot *s, char *buf, size_t cap);

#endif
