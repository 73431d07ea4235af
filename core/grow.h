/* Growing an array by doubling, with the byte count checked. */
#ifndef VY_GROW_H
#define VY_GROW_H

#include <stdbool.h>
#include <stdlib.h>

#include "core/checked.h"

/* Make room for element n of *v (elem bytes each, *cap allocated); false
 * when memory or the size arithmetic runs out (the array is unchanged). */
static inline bool vy_grow(void **v, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return true;
	uint64_t c = *cap ? (uint64_t)*cap * 2 : 8, bytes;
	if (!vy_mul_u64(c, elem, &bytes) || bytes > SIZE_MAX)
		return false;
	void *p = realloc(*v, (size_t)bytes);
	if (!p)
		return false;
	*v = p;
	*cap = (size_t)c;
	return true;
}

#endif
