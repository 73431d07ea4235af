/* Staging: page-locked host buffers that every upload and readback goes
 * through, cached for reuse.
 *
 * Sizes round up to a power of two (at least one page). Idle buffers are kept
 * per size up to `cache_cap` bytes in all, with at most cache_cap/size (1 to
 * 1024) of one size; a buffer larger than the cap is freed when released.
 * Thread-safe. */
#ifndef VY_STAGING_H
#define VY_STAGING_H

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

#endif
