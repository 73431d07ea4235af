/* Which units of a file are in some state (on the device, or dirty): a
 * bitmap over VY_TIER_UNIT-sized pieces of the file that grows as needed.
 * No locking: the caller's lock guards it. */
#ifndef VY_TIER_UNITS_H
#define VY_TIER_UNITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 2 MiB: a GPU's granule, so a unit loaded is a piece of memory mapped. */
#define VY_TIER_UNIT ((uint64_t)2 << 20)

typedef struct vy_tier_units {
	uint64_t *bits;
	uint64_t words; /* bits covers words * 64 units */
	uint64_t count; /* units set */
} vy_tier_units;

/* Units [from, to) set: false without memory (nothing changed then). */
bool vy_tier_units_set(vy_tier_units *u, uint64_t from, uint64_t to);
/* Units [from, to) clear (to may be UINT64_MAX). */
void vy_tier_units_clear(vy_tier_units *u, uint64_t from, uint64_t to);
bool vy_tier_units_has(const vy_tier_units *u, uint64_t i);
/* Whether every unit of [from, to) is set. */
bool vy_tier_units_all(const vy_tier_units *u, uint64_t from, uint64_t to);
/* The first unit at or after `from` that is set (want) or clear (!want),
 * below `to`; `to` when none. */
uint64_t vy_tier_units_next(const vy_tier_units *u, uint64_t from, uint64_t to, bool want);
/* u keeps only the units `mask` has set too (u &= mask). */
void vy_tier_units_keep_only(vy_tier_units *u, const vy_tier_units *mask);
void vy_tier_units_free(vy_tier_units *u);

/* The units [first, end) that bytes [off, off + len) touch. */
static inline uint64_t vy_tier_unit_of(uint64_t off)
{
	return off / VY_TIER_UNIT;
}
static inline uint64_t vy_tier_units_to(uint64_t end)
{
	return end / VY_TIER_UNIT + (end % VY_TIER_UNIT != 0);
}
/* The bytes of the unit at u (a multiple of VY_TIER_UNIT) in a span of n
 * bytes: a whole unit, or the span's short last one. */
static inline size_t vy_tier_unit_len(size_t n, size_t u)
{
	return n - u < VY_TIER_UNIT ? n - u : (size_t)VY_TIER_UNIT;
}

#endif
