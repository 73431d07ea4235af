/* bench/poolbench: what one allocation of 1 MiB costs through vyrefs' store,
 * with the pool (an exact-size reuse, no driver call) and without it (the
 * driver's allocator each time). Compared with cudaraw's raw.alloc_free_us.
 *   poolbench cuda|host   prints store.pool_alloc_free_us and
 *                         store.nopool_alloc_free_us (medians of alloc + free) */
#include "bench/timing.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 20000, LEN = 1 << 20 };

/* Median µs of alloc + free through a core with pool cap `pool_cap`. */
static int measure(vy_backend_kind backend, uint64_t pool_cap, double *out)
{
	static double v[N];
	vy_core_options o;
	vy_core_options_default(&o);
	o.device.backend = backend;
	o.store.pool_cap = pool_cap;
	vy_core *c;
	vy_error e;
	if (vy_core_open(&o, &c, &e) != VY_OK) {
		fprintf(stderr, "poolbench: %s\n", e.msg);
		return 1;
	}
	for (int i = 0; i < N; i++) {
		vy_handle h;
		double t0 = now_us();
		if (vy_store_alloc(c->store, LEN, &h, &e) != VY_OK || vy_store_free(c->store, h, &e) != VY_OK) {
			fprintf(stderr, "poolbench: %s\n", e.msg);
			vy_core_close(c, &e);
			return 1;
		}
		v[i] = now_us() - t0;
	}
	*out = median(v, N);
	vy_telemetry_snapshot t;
	vy_telemetry_snapshot_take(c->tel, &t);
	printf("store.%s_driver_allocs %llu\n", pool_cap ? "pool" : "nopool", (unsigned long long)t.driver_allocs);
	return vy_core_close(c, &e) == VY_OK ? 0 : (fprintf(stderr, "poolbench: %s\n", e.msg), 1);
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "cuda") && strcmp(argv[1], "host"))) {
		fprintf(stderr, "usage: poolbench cuda|host\n");
		return 2;
	}
	vy_backend_kind backend = strcmp(argv[1], "cuda") ? VY_BACKEND_HOST : VY_BACKEND_CUDA;
	double pooled, unpooled;
	if (measure(backend, VY_POOL_CAP_DEFAULT, &pooled) || measure(backend, 0, &unpooled))
		return 1;
	printf("store.pool_alloc_free_us %.3f\nstore.nopool_alloc_free_us %.2f\n", pooled, unpooled);
	return 0;
}
