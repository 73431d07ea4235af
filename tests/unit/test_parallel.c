/* Work over a range on several threads (core/parallel.h): every item is
 * done exactly once, by a worker numbered below the count asked, whatever
 * the chunk; the worker count stays within the CPUs and the cap. */
#include "core/parallel.h"
#include "tests/unit/support.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct seen {
	_Atomic uint32_t *times; /* per item */
	_Atomic uint32_t bad_worker;
	unsigned workers;
	_Atomic uint64_t calls;
} seen;

static void mark(void *ctx, unsigned worker, size_t lo, size_t hi)
{
	seen *s = ctx;
	if (worker >= s->workers || lo >= hi)
		atomic_fetch_add(&s->bad_worker, 1);
	for (size_t i = lo; i < hi; i++)
		atomic_fetch_add(&s->times[i], 1);
	atomic_fetch_add(&s->calls, 1);
}

static void check_run(size_t n, size_t chunk, unsigned workers)
{
	seen s = {.times = calloc(n ? n : 1, sizeof(*s.times)), .workers = workers};
	CHECK(s.times != NULL);
	if (!s.times)
		return;
	vy_parallel_run(n, chunk, workers, mark, &s);
	size_t wrong = 0;
	for (size_t i = 0; i < n; i++)
		wrong += atomic_load(&s.times[i]) != 1;
	CHECK_EQ(wrong, 0);
	CHECK_EQ(atomic_load(&s.bad_worker), 0);
	size_t c = chunk ? chunk : 1;
	CHECK_EQ(atomic_load(&s.calls), (n + c - 1) / c); /* whole chunks, the last one short */
	free(s.times);
}

static void each_item_once(void)
{
	check_run(100003, 7, VY_PARALLEL_MAX);
	check_run(100000, 512, 4);
	check_run(5, 64, 8); /* fewer items than one chunk */
	check_run(1, 1, 2);
	check_run(0, 16, 3); /* nothing: fn never called */
	check_run(1000, 0, 2); /* a chunk of 0 is taken as 1 */
	check_run(999, 10, 1); /* the caller alone */
	check_run(4096, 3, VY_PARALLEL_MAX + 5); /* more than the cap: capped */
}

static void workers_within_cpus_and_cap(void)
{
	cpu_set_t set;
	CHECK_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
	unsigned cpus = (unsigned)CPU_COUNT(&set), most = cpus < VY_PARALLEL_MAX ? cpus : VY_PARALLEL_MAX;
	CHECK_EQ(vy_parallel_workers(0, 2048), 1);
	CHECK_EQ(vy_parallel_workers(2047, 2048), 1);
	CHECK_EQ(vy_parallel_workers(4096, 2048), 2 < most ? 2 : most);
	CHECK_EQ(vy_parallel_workers((size_t)1 << 40, 1), most);
	CHECK_EQ(vy_parallel_workers(3, 0), 3 < most ? 3 : most);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(each_item_once),
		TEST_CASE(workers_within_cpus_and_cap),
	};
	return vy_test_main("parallel", cases, sizeof(cases) / sizeof(cases[0]));
}
