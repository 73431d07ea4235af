/* Asynchronous copies between a device buffer and page-locked host memory
 * the caller holds (a staging buffer): the copy is queued on a pooled stream
 * that goes back to the pool at once, and an event marks its end. Holding
 * a stream between requests could leave every FUSE thread waiting for one
 * that only a later request would give back.
 *
 * The device buffer stays pinned in the store until vy_async_wait: a free
 * meanwhile is deferred, so the copy never touches freed memory. Two copies
 * on different streams are not ordered: a caller that overlaps copies waits
 * for the first. One copy in flight per vy_async; not thread-safe (the
 * caller's lock covers it). */
#ifndef VY_ASYNC_H
#define VY_ASYNC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

typedef struct vy_async {
	vy_event *done; /* made at first use, then reused */
	vy_handle pinned;
	bool inflight;
} vy_async;

/* Queue host -> device [off, off+len) of buffer h from src. */
vy_err vy_async_htod(vy_core *c, vy_async *a, vy_handle h, uint64_t off, const void *src, uint64_t len,
		     vy_error *e);
/* Queue device -> host [off, off+len) of buffer h into dst. */
vy_err vy_async_dtoh(vy_core *c, vy_async *a, vy_handle h, uint64_t off, void *dst, uint64_t len, vy_error *e);
/* Wait for the copy in flight, if any, and unpin its buffer. */
vy_err vy_async_wait(vy_core *c, vy_async *a, vy_error *e);
/* Wait, then free the event; the first failure. */
vy_err vy_async_destroy(vy_core *c, vy_async *a, vy_error *e);

#endif
