/* A buffer's view: the pieces (shareable allocations) of a buffer that grew
 * in place or has holes, mapped at their offsets in one reserved address
 * range, with every granule between them mapped to one shared granule of
 * zeros. Every address of [ptr, ptr + len) is therefore backed: a read of a
 * hole reads zeros and nothing can fault, while a hole costs no memory of
 * its own. Writing into a hole would write the shared zeros: the store
 * backs a hole (vy_view_add) before anything may write there.
 *
 * Internal to the store (core/store.c), which holds its lock around these
 * calls and keeps the accounting. */
#ifndef VY_VIEW_H
#define VY_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"

typedef struct vy_piece {
	uint64_t off;
	vy_dptr p;
	uint64_t bytes;
} vy_piece;

/* The granule of zeros every hole maps (the store allocates it). */
typedef struct vy_zeros {
	vy_dptr p;     /* 0 while no hole is mapped anywhere */
	uint64_t g;    /* its bytes: the share granularity */
	uint64_t maps; /* granules mapped to it, over every view */
} vy_zeros;

typedef struct vy_view {
	vy_dptr ptr;       /* 0: no view */
	uint64_t reserved; /* the range's bytes */
	uint64_t len;      /* mapped from ptr: pieces and holes, whole granules */
	uint64_t holes;    /* bytes of len that are holes */
	uint32_t n;
	vy_piece *piece; /* VY_CHUNKS_MAX of them, sorted by offset */
} vy_view;

/* Map everything of `v` (or, for a buffer without a view, the one piece
 * `first`) into a new range of `reserved` bytes, then let the old range go.
 * Addresses change; memory does not. */
vy_err vy_view_move(vy_device *d, vy_view *v, vy_zeros *z, uint64_t reserved, vy_error *e);

/* Unmap everything and release the range (the pieces stay the caller's).
 * Waits for the device first: nothing of this process may still use it. */
vy_err vy_view_drop(vy_device *d, vy_view *v, vy_zeros *z, vy_error *e);

/* Map piece `pc` where `v` has holes only, or at its end (growing len).
 * The range must have room (vy_view_move first). */
vy_err vy_view_add(vy_device *d, vy_view *v, vy_zeros *z, vy_piece pc, vy_error *e);

/* Holes up to `len` (a multiple of the granularity, within the range). */
vy_err vy_view_extend(vy_device *d, vy_view *v, vy_zeros *z, uint64_t len, vy_error *e);

/* Take piece `i` out: a hole where it was; or, with `shorten` for the
 * last piece, nothing: the view then ends at `keep` (at most the piece's
 * offset), or where the pieces before it end if that is later. */
vy_err vy_view_remove(vy_device *d, vy_view *v, vy_zeros *z, uint32_t i, bool shorten, uint64_t keep, vy_error *e);

/* Drop the holes past max(len, the last piece's end). */
vy_err vy_view_shorten(vy_device *d, vy_view *v, vy_zeros *z, uint64_t len, vy_error *e);

/* Whether [off, off + len) has no hole. */
bool vy_view_backed(const vy_view *v, uint64_t off, uint64_t len);

/* The first hole at or after `off` (len if none), or the first byte of a
 * piece at or after `off` (UINT64_MAX if none). */
uint64_t vy_view_next_hole(const vy_view *v, uint64_t off);
uint64_t vy_view_next_data(const vy_view *v, uint64_t off);

#endif
