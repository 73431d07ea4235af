/* CLOCK_MONOTONIC in nanoseconds: the one clock the daemon, the keeper and
 * a successor share, so a time one takes the other can subtract. */
#ifndef VY_CORE_CLOCK_H
#define VY_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* 0 only if the clock fails, which CLOCK_MONOTONIC cannot. */
static inline uint64_t vy_monotonic_ns(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
		return 0;
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#endif
