/* The resident store: device buffers by handle, within a budget.
 *
 * Handles are ids from 1 up, never reused; running out is an error, never a
 * wrap. The budget is 90% of device memory unless configured, and every new
 * driver allocation is also capped by 90% of the memory the driver reports
 * free at that moment (other processes use the GPU too). Idle pooled bytes
 * count as used, but they are reclaimable: an allocation that does not fit
 * evicts pooled buffers, largest first, before it is refused.
 *
 * In-flight references: work that uses a buffer pins it. Freeing a pinned
 * buffer is accepted but deferred: the handle stops resolving at once, and
 * the memory goes back to the pool when the last pin is dropped. Thread-safe:
 * one mutex guards the handle table, the pool and the accounting. */
#ifndef VY_STORE_H
#define VY_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/telemetry.h"

typedef uint64_t vy_handle;
typedef struct vy_store vy_store;

/* Pool cap meaning "device memory / 32". */
#define VY_POOL_CAP_DEFAULT UINT64_MAX

typedef struct vy_store_options {
	uint64_t budget_bytes;   /* a size, or 0 for budget_percent */
	unsigned budget_percent; /* of device memory, when budget_bytes is 0 (0: 90) */
	uint64_t pool_cap;     /* idle pooled bytes; VY_POOL_CAP_DEFAULT; 0: no pool */
} vy_store_options;

/* Placement: a buffer's byte 0 may sit `lead` bytes into its first
 * allocation (vy_store_alloc_placed), so that what a file's format puts
 * at some offset lands on the alignment the readers of that format want
 * (core/place.h decides it; the store only honours it). The lead's bytes
 * are no byte of the buffer: every offset, length and pointer the store
 * takes or gives is the buffer's, from its byte 0; only the memory a
 * mapping covers (vy_export) and `alloc` include them. */
#define VY_STORE_LEAD_MAX 65535u

typedef struct vy_buffer_view {
	vy_handle handle;
	vy_dptr ptr;    /* the buffer's byte 0 (its memory's start + lead) */
	uint64_t len;
	uint64_t alloc; /* bytes the device holds for it (lead + len rounded up when shareable) */
	uint64_t gen;   /* changes whenever ptr does: a mapping of another gen is stale */
	uint64_t holes; /* bytes with no memory of their own (core/view.h) */
	uint64_t lead;  /* bytes of its memory before byte 0 (placement) */
} vy_buffer_view;

typedef struct vy_store_usage {
	uint64_t total;    /* device memory */
	uint64_t budget;   /* configured budget */
	uint64_t resident; /* bytes in live buffers (deferred frees included) */
	uint64_t pooled;   /* idle bytes held for reuse */
	uint64_t pool_cap; /* idle bytes the pool may hold */
	uint64_t buffers;  /* live buffers */
} vy_store_usage;

vy_err vy_store_open(vy_device *dev, vy_telemetry *tel, const vy_store_options *opt, vy_store **out, vy_error *e);

/* Free every buffer (live ones too) and drain the pool, so the device is back
 * to where it was before the store opened. Reports, after freeing anyway,
 * buffers still pinned: at close nothing may be in flight. */
vy_err vy_store_close(vy_store *s, vy_error *e);

vy_err vy_store_alloc(vy_store *s, uint64_t len, vy_handle *out, vy_error *e);
/* The same, with byte 0 `lead` bytes into the memory (at most
 * VY_STORE_LEAD_MAX): the buffer then costs lead + len. The caller zeroes
 * the lead's bytes before another process may map them (vy_clear_past). */
vy_err vy_store_alloc_placed(vy_store *s, uint64_t len, uint64_t lead, vy_handle *out, vy_error *e);
vy_err vy_store_free(vy_store *s, vy_handle h, vy_error *e);

/* Where a buffer lives now, without pinning it. */
vy_err vy_store_view(vy_store *s, vy_handle h, vy_buffer_view *out, vy_error *e);

/* Pin `n` handles (duplicates allowed) for running work, all or none, and
 * fill views[i] for handles[i]. Every successful pin is undone with
 * vy_store_unpin_many on the same list. */
vy_err vy_store_pin_many(vy_store *s, const vy_handle *handles, size_t n, vy_buffer_view *views, vy_error *e);
vy_err vy_store_unpin_many(vy_store *s, const vy_handle *handles, size_t n, vy_error *e);

/* Sharing with another process (the launcher, clients). A buffer of the
 * device's share granularity or more is shareable from birth; a smaller one
 * is moved to memory of its own (rounded up to the granularity) by
 * vy_store_share, through `copy`, which must copy `len` bytes device to
 * device and wait for it. The caller makes sure nothing else uses the buffer
 * meanwhile (the fs holds the file's write lock); it must not be pinned.
 * VY_ENOTSUP when the device cannot share. */
typedef vy_err (*vy_store_copy_fn)(void *ctx, vy_dptr dst, vy_dptr src, uint64_t len, vy_error *e);
vy_err vy_store_share(vy_store *s, vy_handle h, vy_store_copy_fn copy, void *ctx, vy_error *e);
/* Whether `h` grows in place (and may have holes). */
bool vy_store_growable(vy_store *s, vy_handle h);

/* Whether a live buffer can be exported as it is. */
bool vy_store_shareable(vy_store *s, vy_handle h);

/* A buffer's memory as another process maps it: one fd per allocation,
 * to be mapped back to back (core/span.h). */
typedef struct vy_export {
	uint32_t n;
	int fd[VY_CHUNKS_MAX];
	uint64_t chunk[VY_CHUNKS_MAX];
} vy_export;

/* Export a shareable buffer: new fds the caller owns (and passes on, then
 * closes with vy_export_close), and the view they stand for. The buffer is
 * held like a pin until vy_store_unexport: a free meanwhile is deferred, so
 * its memory is never reused while another process may still map it.
 * `how`, VY_EXPORT_*: UNTRUSTED, the other process is a client that may
 * keep the fds past its mapping, so this memory goes back to the driver
 * when freed, never to the pool; READONLY, fds through which it can only
 * read (VY_ENOTSUP where the backend cannot enforce that). */
enum { VY_EXPORT_UNTRUSTED = 1, VY_EXPORT_READONLY = 2 };
vy_err vy_store_export(vy_store *s, vy_handle h, unsigned how, vy_buffer_view *view, vy_export *out, vy_error *e);
void vy_export_close(vy_export *x);
vy_err vy_store_unexport(vy_store *s, vy_handle h, vy_error *e);
/* True while `h` is live at generation `gen` (a mapping of it is current). */
bool vy_store_current(vy_store *s, vy_handle h, uint64_t gen);
/* How many exported buffers were freed so far: while it stays the same,
 * every mapping another process holds is current (an exported buffer never
 * moves), so a sweep has nothing to do. */
uint64_t vy_store_export_frees(vy_store *s);

/* The in-flight count of a live handle (0 for an unknown one). */
uint32_t vy_store_inflight(vy_store *s, vy_handle h);

void vy_store_usage_get(vy_store *s, vy_store_usage *out);

/* The largest buffer a new allocation could get now, in what it is
 * allocated in: what the budget has left (pooled bytes count as free:
 * they are evicted first), at most 9/10 of what the driver reports free
 * with the pool's bytes given back, in whole granules where buffers are
 * allocated in granules. statfs's "available" (what a new file can get
 * with fallocate). */
uint64_t vy_store_room(vy_store *s);

/* Tests only: continue handle ids from `next`, to reach the end of the id
 * space without 2^64 allocations. */
void vy_store_test_set_next_id(vy_store *s, vy_handle next);

/* Growth in place, holes and shrinking (store_shape.c). */
#include "core/store_shape.h"

#endif
