/* Unit bitmaps (units.h). */
#include "tier/units.h"

#include <stdlib.h>
#include <string.h>

static bool room_for(vy_tier_units *u, uint64_t units)
{
	uint64_t words = units / 64 + 1;
	if (words <= u->words)
		return true;
	uint64_t want = u->words ? u->words : 4;
	while (want < words)
		want *= 2;
	uint64_t *b = realloc(u->bits, want * sizeof(*b));
	if (!b)
		return false;
	memset(b + u->words, 0, (want - u->words) * sizeof(*b));
	u->bits = b;
	u->words = want;
	return true;
}

bool vy_tier_units_has(const vy_tier_units *u, uint64_t i)
{
	return i / 64 < u->words && (u->bits[i / 64] >> (i % 64) & 1);
}

bool vy_tier_units_set(vy_tier_units *u, uint64_t from, uint64_t to)
{
	if (from >= to)
		return true;
	if (!room_for(u, to))
		return false;
	for (uint64_t i = from; i < to; i++)
		if (!(u->bits[i / 64] >> (i % 64) & 1)) {
			u->bits[i / 64] |= (uint64_t)1 << (i % 64);
			u->count++;
		}
	return true;
}

void vy_tier_units_clear(vy_tier_units *u, uint64_t from, uint64_t to)
{
	uint64_t top = u->words * 64;
	if (to > top)
		to = top;
	for (uint64_t i = vy_tier_units_next(u, from, to, true); i < to; i = vy_tier_units_next(u, i + 1, to, true)) {
		u->bits[i / 64] &= ~((uint64_t)1 << (i % 64));
		u->count--;
	}
}

uint64_t vy_tier_units_next(const vy_tier_units *u, uint64_t from, uint64_t to, bool want)
{
	for (uint64_t i = from; i < to;) {
		uint64_t w = i / 64;
		uint64_t word = w < u->words ? u->bits[w] : 0;
		if (!want)
			word = ~word;
		word &= ~(uint64_t)0 << (i % 64);
		if (word) {
			uint64_t at = w * 64 + (uint64_t)__builtin_ctzll(word);
			return at < to ? at : to;
		}
		i = (w + 1) * 64;
	}
	return to;
}

bool vy_tier_units_all(const vy_tier_units *u, uint64_t from, uint64_t to)
{
	return vy_tier_units_next(u, from, to, false) >= to;
}

void vy_tier_units_keep_only(vy_tier_units *u, const vy_tier_units *mask)
{
	u->count = 0;
	for (uint64_t w = 0; w < u->words; w++) {
		u->bits[w] &= w < mask->words ? mask->bits[w] : 0;
		u->count += (uint64_t)__builtin_popcountll(u->bits[w]);
	}
}

void vy_tier_units_free(vy_tier_units *u)
{
	free(u->bits);
	memset(u, 0, sizeof(*u));
}
