/* Work over a range of items on several threads: a takeover's bulk steps
 * (persist/replay_ns.c), where each item stands alone. */
#ifndef VY_CORE_PARALLEL_H
#define VY_CORE_PARALLEL_H

#include <stddef.h>

/* Most threads a run takes (the caller one of them). */
#define VY_PARALLEL_MAX 16

/* Items [lo, hi), on worker `worker` (0 .. workers-1): each item is given
 * to exactly one call, each worker's calls one after another. */
typedef void vy_parallel_fn(void *ctx, unsigned worker, size_t lo, size_t hi);

/* How many workers `n` items get, at least `per_worker` each: no more
 * than the CPUs this process may run on, nor VY_PARALLEL_MAX; at least 1. */
unsigned vy_parallel_workers(size_t n, size_t per_worker);

/* fn over [0, n) in runs of `chunk` items taken in turn by `workers`
 * workers; returns when every item is done. A thread that cannot be
 * started leaves its share to the others (the caller works too), so every
 * item is always done. */
void vy_parallel_run(size_t n, size_t chunk, unsigned workers, vy_parallel_fn *fn, void *ctx);

#endif
