/* Staging: page-locked host buffers that every upload and readback goes
 * through, cached for reuse.
 *
 * Sizes round up to a power of two (at least one page). Idle buffers are kept
 * per size up to `cache_cap` bytes in all, with at most cache_cap/size (1 to
 * 1024) of one size; a buffer larger than the cap is freed when released.
 * Thread-safe. */
#ifndef VY_STAGING_H
#define VY_STAGING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/device.h"
#include "core/telemetry.h"

typedef struct vy_staging vy_staging;

typedef struct vy_staging_buf {
	void *ptr;
	size_t size; /* the bucket's size: at least what was asked */
} vy_staging_buf;

#define VY_STAGING_MIN_BUCKET 4096u

vy_err vy_staging_open(vy_device *dev, vy_telemetry *tel, uint64_t cache_cap, vy_staging **out, vy_error *e);
/* Frees every cached buffer. Buffers still acquired must be released first. */
vy_err vy_staging_close(vy_staging *st, vy_error *e);

vy_err vy_staging_acquire(vy_staging *st, size_t bytes, vy_staging_buf *out, vy_error *e);
void vy_staging_release(vy_staging *st, vy_staging_buf *buf);

/* A buffer held for longer (write-behind slots, readahead chunks), counted
 * in *held against `cap` such buffers: false when the cap is reached or no
 * pinned memory can be had. Release with vy_staging_release_counted. */
bool vy_staging_acquire_counted(vy_staging *st, size_t bytes, _Atomic unsigned *held, unsigned cap,
				vy_staging_buf *out);
/* Give it back and uncount it; nothing when out->ptr is NULL. */
void vy_staging_release_counted(vy_staging *st, _Atomic unsigned *held, vy_staging_buf *buf);

#endif
