/* A buffer's shape in the resident store (store_shape.c): growth in place,
 * holes, shrinking. Included by core/store.h. */
#ifndef VY_STORE_SHAPE_H
#define VY_STORE_SHAPE_H

#include "core/store.h"

/* Growth in place (core/view.h): a buffer of the share granularity or
 * more is pieces, mapped in a reserved range; it grows to at least `len`
 * bytes by mapping one more piece at its end (it may get a new address,
 * never a copy). Its length becomes all it spans (`out`). VY_ENOTSUP for
 * a buffer that cannot (under the granularity, or a device that cannot
 * share): that one moves. Nothing of this process may use the buffer
 * meanwhile (the fs holds the file's write lock); it must not be pinned. */
vy_err vy_store_grow(vy_store *s, vy_handle h, uint64_t len, vy_buffer_view *out, vy_error *e);

/* Holes: whole granules that read as zeros and cost no memory (each maps
 * one shared granule of zeros). A buffer of only holes; holes up to
 * `len` at a buffer's end; and memory for every hole of [off, off + len),
 * zeroed by `zero` (device memory, `bytes` of it, waited for) before it is
 * mapped. Writing where a hole is would write the shared zeros: whoever
 * writes backs the range first (vy_store_backed says whether it is). */
typedef vy_err (*vy_store_zero_fn)(void *ctx, vy_dptr p, uint64_t bytes, vy_error *e);
vy_err vy_store_alloc_holes(vy_store *s, uint64_t len, vy_handle *out, vy_error *e);
/* The same, byte 0 `lead` bytes into its memory (vy_store_alloc_placed). */
vy_err vy_store_alloc_holes_placed(vy_store *s, uint64_t len, uint64_t lead, vy_handle *out, vy_error *e);
vy_err vy_store_extend(vy_store *s, vy_handle h, uint64_t len, vy_buffer_view *out, vy_error *e);
vy_err vy_store_back(vy_store *s, vy_handle h, uint64_t off, uint64_t len, vy_store_zero_fn zero, void *ctx,
		     vy_buffer_view *out, vy_error *e);
/* Give back every piece inside [off, off + len): a hole where it was
 * (FALLOC_FL_PUNCH_HOLE; the caller zeroes the rest of the range). */
vy_err vy_store_punch(vy_store *s, vy_handle h, uint64_t off, uint64_t len, vy_buffer_view *out, vy_error *e);
bool vy_store_backed(vy_store *s, vy_handle h, uint64_t off, uint64_t len);
/* SEEK_DATA (`data`) or SEEK_HOLE from `off`: the next byte that has
 * memory (UINT64_MAX: none), or the next hole (the end if none). */
uint64_t vy_store_seek(vy_store *s, vy_handle h, uint64_t off, bool data);

/* Give back the whole trailing pieces (and holes) that `len` bytes do not
 * need (a buffer of pieces only; an exported or pinned one keeps them). */
vy_err vy_store_shrink(vy_store *s, vy_handle h, uint64_t len, vy_buffer_view *out, vy_error *e);

#endif
