/* Which formats are placed, and where (core/place.h). */
#include "core/place.h"

/* The safetensors package refuses headers past this (its MAX_HEADER_SIZE). */
#define SAFETENSORS_HEADER_MAX 100000000ull

/* Whether `c` may follow a JSON object's '{' as writers emit it. */
static int object_follows(uint8_t c)
{
	return c == '"' || c == '}' || c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

uint32_t vy_place_lead(const uint8_t head[VY_PLACE_HEAD])
{
	uint64_t n = 0;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | head[i];
	/* safetensors: u64 little-endian N, then N bytes of a JSON object. */
	if (n < 2 || n > SAFETENSORS_HEADER_MAX || head[8] != '{' || !object_follows(head[9]))
		return 0;
	uint64_t data = 8 + n;
	return (uint32_t)((VY_PLACE_ALIGN - data % VY_PLACE_ALIGN) % VY_PLACE_ALIGN);
}
