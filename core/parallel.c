/* Work over a range of items on several threads (parallel.h). */
#include "core/parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef struct run {
	_Atomic size_t next; /* the first item no worker took yet */
	size_t n, chunk;
	vy_parallel_fn *fn;
	void *ctx;
} run;

typedef struct worker {
	run *r;
	unsigned id;
} worker;

/* Runs of items, taken in turn until none is left: a worker whose items
 * cost more (a larger directory) takes fewer. */
static void work(run *r, unsigned id)
{
	for (;;) {
		size_t lo = atomic_fetch_add(&r->next, r->chunk);
		if (lo >= r->n)
			return;
		size_t hi = r->n - lo < r->chunk ? r->n : lo + r->chunk;
		r->fn(r->ctx, id, lo, hi);
	}
}

static void *thread(void *arg)
{
	worker *w = arg;
	work(w->r, w->id);
	return NULL;
}

unsigned vy_parallel_workers(size_t n, size_t per_worker)
{
	cpu_set_t set;
	unsigned cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
	size_t want = per_worker ? n / per_worker : n;
	if (want > cpus)
		want = cpus;
	if (want > VY_PARALLEL_MAX)
		want = VY_PARALLEL_MAX;
	return want ? (unsigned)want : 1;
}

void vy_parallel_run(size_t n, size_t chunk, unsigned workers, vy_parallel_fn *fn, void *ctx)
{
	run r = {.n = n, .chunk = chunk ? chunk : 1, .fn = fn, .ctx = ctx};
	atomic_init(&r.next, 0);
	if (workers > VY_PARALLEL_MAX)
		workers = VY_PARALLEL_MAX;
	pthread_t t[VY_PARALLEL_MAX];
	worker w[VY_PARALLEL_MAX];
	bool started[VY_PARALLEL_MAX] = {false};
	for (unsigned i = 1; i < workers; i++) {
		w[i] = (worker){&r, i};
		started[i] = pthread_create(&t[i], NULL, thread, &w[i]) == 0;
	}
	work(&r, 0);
	for (unsigned i = 1; i < workers; i++)
		if (started[i])
			pthread_join(t[i], NULL);
}
