/* Placement: where a file's byte 0 sits in its device memory, chosen from
 * the file's format so that what the format puts at some offset lands on
 * the alignment its readers want (docs/core.md, "Placement").
 *
 * A safetensors file's data starts at 8 + the header's length, a multiple
 * of 8 only; a tensor mapped in place sits at its file offset, and GPU
 * libraries pick other (slower, differently rounding) kernels for operands
 * that are not 16-, 128- or 256-byte aligned. Placed `lead` bytes into a
 * page-aligned allocation, the data section starts on a 4 KiB boundary, so
 * every tensor at a multiple of 512 in it sits where PyTorch's own
 * allocator would put it. The file's bytes do not change.
 *
 * This is the one place that reads a format; the store only honours the
 * lead it is given (core/store.h). */
#ifndef VY_CORE_PLACE_H
#define VY_CORE_PLACE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of a file's start that decide its placement. */
#define VY_PLACE_HEAD 10u
/* The alignment a placed format's data section gets. */
#define VY_PLACE_ALIGN 4096u

/* The lead for a file that begins with `head` (VY_PLACE_HEAD bytes): the
 * bytes before byte 0 that put its data section on VY_PLACE_ALIGN; 0 for
 * a format vyrefs does not place. */
uint32_t vy_place_lead(const uint8_t head[VY_PLACE_HEAD]);

#endif
