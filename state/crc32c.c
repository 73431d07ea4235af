/* CRC-32C, reflected polynomial 0x82f63b78, initial and final xor ~0. */
#include "state/crc32c.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define VY_CRC_HW 1
#endif

#define POLY 0x82f63b78u

static uint32_t table[8][256];

/* Built before main: no lock and no first-call branch on the hot path. */
__attribute__((constructor)) static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

/* Slicing by 8: eight table lookups per 8 bytes. */
uint32_t vy_crc32c_table(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t c = ~crc;
	for (; n >= 8; n -= 8, b += 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		w ^= c;
		c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
		    table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
		    table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *b++) & 0xff];
	return ~c;
}

#ifdef VY_CRC_HW
__attribute__((target("sse4.2"))) uint32_t vy_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t c = ~crc;
	for (; n >= 8; n -= 8, b += 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		c = _mm_crc32_u64(c, w);
	}
	uint32_t c32 = (uint32_t)c;
	while (n--)
		c32 = _mm_crc32_u8(c32, *b++);
	return ~c32;
}

bool vy_crc32c_hw_present(void)
{
	__builtin_cpu_init(); /* we may be asked from a constructor, before libgcc's */
	return __builtin_cpu_supports("sse4.2");
}
#else
uint32_t vy_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
	return vy_crc32c_table(crc, p, n);
}

bool vy_crc32c_hw_present(void)
{
	return false;
}
#endif

static uint32_t (*pick(void))(uint32_t, const void *, size_t)
{
	return vy_crc32c_hw_present() ? vy_crc32c_hw : vy_crc32c_table;
}

/* An ifunc would do the same; a pointer set once is plainer and the
 * branch predictor sees one target. */
static uint32_t (*crc_fn)(uint32_t, const void *, size_t);

__attribute__((constructor)) static void crc_pick(void)
{
	crc_fn = pick();
}

uint32_t vy_crc32c(uint32_t crc, const void *p, size_t n)
{
	return crc_fn(crc, p, n);
}
