/* Checked arithmetic on sizes and offsets: every result either fits or the
 * caller is told, never a silent wrap and never a saturation. */
#ifndef VY_CHECKED_H
#define VY_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

/* Each returns true on success and stores the result; false on overflow. */
static inline bool vy_add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_add_overflow(a, b, out);
}

static inline bool vy_sub_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_sub_overflow(a, b, out);
}

static inline bool vy_mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

/* [offset, offset+len) lies within [0, size). Zero-length ranges at any
 * offset <= size are inside. */
static inline bool vy_range_within(uint64_t offset, uint64_t len, uint64_t size)
{
	uint64_t end;
	return vy_add_u64(offset, len, &end) && end <= size;
}

/* a * num / den without overflow in the product (den > 0). */
static inline uint64_t vy_scale_u64(uint64_t a, uint64_t num, uint64_t den)
{
	return (uint64_t)(((unsigned __int128)a * num) / den);
}

/* The smallest power of two >= v (v >= 1); false if it does not fit. */
static inline bool vy_pow2_ceil_u64(uint64_t v, uint64_t *out)
{
	if (v <= 1) {
		*out = 1;
		return true;
	}
	int lz = __builtin_clzll(v - 1);
	if (lz == 0)
		return false;
	*out = (uint64_t)1 << (64 - lz);
	return true;
}

#endif
