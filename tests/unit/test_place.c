/* Placement's format reading (core/place.h): a safetensors start gives
 * the lead that puts its data section on 4 KiB; anything else, none. */
#include "core/place.h"
#include "tests/unit/support.h"

#include <string.h>

/* The first bytes of a file: u64 little-endian n, then `text`. */
static uint32_t lead_of(uint64_t n, const char *text)
{
	uint8_t head[VY_PLACE_HEAD] = {0};
	for (int i = 0; i < 8; i++)
		head[i] = (uint8_t)(n >> (8 * i));
	memcpy(head + 8, text, 2);
	return vy_place_lead(head);
}

static void safetensors_data_lands_on_a_page(void)
{
	CHECK_EQ(lead_of(368, "{\""), 4096 - 376);
	CHECK_EQ(lead_of(4088, "{\""), 0);        /* on a page already */
	CHECK_EQ(lead_of(4096, "{\""), 4088);
	CHECK_EQ(lead_of(2, "{}"), 4086);
	CHECK_EQ(lead_of(30000, "{ "), 4096 - 30008 % 4096);
	CHECK_EQ(lead_of(100000000, "{\""), 4096 - 100000008 % 4096); /* safetensors' largest header */
}

static void other_starts_are_not_placed(void)
{
	CHECK_EQ(lead_of(100000001, "{\""), 0); /* past safetensors' limit */
	CHECK_EQ(lead_of(1, "{\""), 0);
	CHECK_EQ(lead_of(0, "{\""), 0);
	CHECK_EQ(lead_of(368, "[\""), 0);
	CHECK_EQ(lead_of(368, "{x"), 0);
	CHECK_EQ(lead_of(UINT64_MAX, "{\""), 0);
	uint8_t elf[VY_PLACE_HEAD] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0};
	CHECK_EQ(vy_place_lead(elf), 0);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(safetensors_data_lands_on_a_page),
		TEST_CASE(other_starts_are_not_placed),
	};
	return vy_test_main("place", cases, sizeof(cases) / sizeof(cases[0]));
}
