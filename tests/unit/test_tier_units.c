/* A backing mount's unit bitmaps (tier/units.h): set, clear, the next set
 * or clear unit, and keeping only another bitmap's units (a write-back's
 * end: what was written again while it ran stays due), each with its
 * count exact. */
#include "tests/unit/support.h"
#include "tier/units.h"

#include <stdint.h>

static uint64_t counted(const vy_tier_units *u)
{
	uint64_t n = 0;
	for (uint64_t i = 0; i < u->words * 64; i++)
		n += vy_tier_units_has(u, i);
	return n;
}

static void set_clear_and_next(void)
{
	vy_tier_units u = {0};
	CHECK(vy_tier_units_set(&u, 3, 200));
	CHECK_EQ(u.count, 197);
	CHECK_EQ(counted(&u), 197);
	CHECK(vy_tier_units_set(&u, 100, 150)); /* already set: counted once */
	CHECK_EQ(u.count, 197);
	vy_tier_units_clear(&u, 64, 128);
	CHECK_EQ(u.count, 133);
	CHECK_EQ(vy_tier_units_next(&u, 0, 1000, true), 3);
	CHECK_EQ(vy_tier_units_next(&u, 64, 1000, true), 128);
	CHECK_EQ(vy_tier_units_next(&u, 10, 1000, false), 64);
	CHECK_EQ(vy_tier_units_next(&u, 200, 150, true), 150); /* an empty range: its end */
	CHECK(vy_tier_units_all(&u, 3, 64));
	CHECK(!vy_tier_units_all(&u, 3, 65));
	vy_tier_units_clear(&u, 0, UINT64_MAX);
	CHECK_EQ(u.count, 0);
	CHECK_EQ(counted(&u), 0);
	vy_tier_units_free(&u);
}

static void keep_only_what_the_mask_has(void)
{
	vy_tier_units u = {0}, mask = {0}, none = {0};
	CHECK(vy_tier_units_set(&u, 0, 300));
	CHECK(vy_tier_units_set(&mask, 10, 20));
	CHECK(vy_tier_units_set(&mask, 250, 260));
	CHECK(vy_tier_units_set(&mask, 1000, 1100)); /* past u: adds nothing */
	vy_tier_units_keep_only(&u, &mask);
	CHECK_EQ(u.count, 20);
	CHECK_EQ(counted(&u), 20);
	CHECK(vy_tier_units_has(&u, 10) && vy_tier_units_has(&u, 259));
	CHECK(!vy_tier_units_has(&u, 9) && !vy_tier_units_has(&u, 260) && !vy_tier_units_has(&u, 1000));
	/* A mask shorter than u (none grown yet): u keeps nothing. */
	vy_tier_units_keep_only(&u, &none);
	CHECK_EQ(u.count, 0);
	CHECK_EQ(counted(&u), 0);
	vy_tier_units_free(&u);
	vy_tier_units_free(&mask);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(set_clear_and_next),
		TEST_CASE(keep_only_what_the_mask_has),
	};
	return vy_test_main("tier_units", cases, sizeof(cases) / sizeof(cases[0]));
}
