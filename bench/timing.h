/* The clock and the median the bench programs share (header only: each
 * bench program is one file, with nothing of vyrefs in cudaraw). */
#ifndef VY_BENCH_TIMING_H
#define VY_BENCH_TIMING_H

#include <stddef.h>
#include <stdlib.h>
#include <time.h>

static inline double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median of n samples (sorts them). */
static inline double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return v[n / 2];
}

#endif
