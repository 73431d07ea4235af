/* A span: several exported allocations mapped back to back into one
 * reserved address range, so a buffer made of chunks (a file that grew in
 * place) is one contiguous range in the process that maps it: the
 * launcher, a client, the daemon itself. */
#ifndef VY_SPAN_H
#define VY_SPAN_H

#include <stdint.h>

#include "core/device.h"

typedef struct vy_span {
	vy_dptr ptr;
	uint64_t reserved; /* the address range's bytes */
	uint64_t bytes;    /* mapped from ptr on: the sum of chunk[] */
	uint32_t n;
	uint64_t chunk[VY_CHUNKS_MAX];
} vy_span;

/* Map `n` exported allocations (fds[i] of chunk[i] bytes) in order. The
 * fds stay the caller's. All or nothing. */
vy_err vy_span_import(vy_device *d, const int *fds, const uint64_t *chunk, uint32_t n, vy_span *out, vy_error *e);

/* Unmap every chunk and release the range; the span is empty after. */
vy_err vy_span_release(vy_device *d, vy_span *sp, vy_error *e);

#endif
