/* GPU-only checks, run by `make test-gpu` on the cuda backend: the budget at
 * the device's real scale, large transfers through multi-chunk staging, more
 * threads than streams, and the driver's free memory back to its baseline. */
#include "core/transfer.h"
#include "ctl/modules.h"
#include "tests/unit/support.h"

#include <pthread.h>
#include <stdlib.h>

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The core over the real device, with no wrapper in between. */
typedef struct fixture {
	vy_device *dev;
	vy_core *c;
	uint64_t free0;
} fixture;

static void fx_open(fixture *f, const vy_core_options *o)
{
	vy_error e;
	uint64_t total;
	if (vy_device_cuda_open(0, &f->dev, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
	vy_test_warm_streams(f->dev, o->streams);
	if (f->dev->ops->mem_info(f->dev, &f->free0, &total, &e) != VY_OK || vy_core_attach(f->dev, o, &f->c, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
}

static void fx_close(fixture *f)
{
	vy_error e;
	uint64_t free1, total;
	CHECK(vy_core_close(f->c, &e) == VY_OK);
	CHECK(f->dev->ops->mem_info(f->dev, &free1, &total, &e) == VY_OK);
	CHECK_EQ(free1, f->free0); /* cuMemGetInfo: every byte back */
	vy_device_close(f->dev);
}

static void budget_holds_at_device_scale(void)
{
	vy_core_options o;
	vy_core_options_default(&o);
	fixture f;
	fx_open(&f, &o);
	vy_store_usage u;
	vy_store_usage_get(f.c->store, &u);
	CHECK_EQ(u.budget, (uint64_t)(((unsigned __int128)u.total * 9) / 10));
	enum { MAX = 256 };
	vy_handle h[MAX];
	size_t n = 0;
	vy_error e;
	vy_err rc = VY_OK;
	while (n < MAX && (rc = vy_store_alloc(f.c->store, 4 * GiB, &h[n], &e)) == VY_OK)
		n++;
	CHECK_EQ(rc, VY_ENOSPC);
	CHECK(strstr(e.msg, "(Fix: ") != NULL);
	vy_store_usage_get(f.c->store, &u);
	printf("  %zu x 4 GiB resident of a %" PRIu64 "-byte budget; refusal: %s\n", n, u.budget, e.msg);
	CHECK_EQ(u.resident, n * 4 * GiB);
	CHECK(u.resident <= u.budget);
	CHECK(u.resident + 4 * GiB > u.budget - 8 * GiB); /* it got close */
	for (size_t i = 0; i < n; i++)
		MUST(vy_store_free(f.c->store, h[i], E));
	vy_store_usage_get(f.c->store, &u);
	CHECK_EQ(u.resident, 0);
	fx_close(&f);
}

static void large_round_trip_through_staging(void)
{
	vy_core_options o;
	vy_core_options_default(&o); /* 64 MiB chunks */
	fixture f;
	fx_open(&f, &o);
	const uint64_t n = 512 * MiB + 4099;
	unsigned char *src = malloc(n), *back = malloc(n);
	CHECK(src && back);
	if (!src || !back)
		return;
	vy_test_fill_pattern(src, n, 42);
	vy_handle h;
	MUST(vy_store_alloc(f.c->store, n, &h, E));
	vy_telemetry_snapshot a, b;
	vy_telemetry_snapshot_take(f.c->tel, &a);
	MUST(vy_upload_whole(f.c, h, src, n, E));
	vy_readback rb = {h, 0, back, n};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	vy_telemetry_snapshot_take(f.c->tel, &b);
	CHECK(memcmp(src, back, n) == 0);
	uint64_t rounds = (n + 64 * MiB - 1) / (64 * MiB);
	CHECK_EQ(b.syncs - a.syncs, 2 * rounds);
	CHECK_EQ(b.h2d_bytes - a.h2d_bytes, n);
	CHECK_EQ(b.d2h_bytes - a.d2h_bytes, n);
	/* A ranged readback deep inside, at an odd offset. */
	unsigned char small[333];
	vy_readback r2 = {h, 300 * MiB + 17, small, sizeof(small)};
	MUST(vy_readback_many(f.c, &r2, 1, E));
	CHECK(memcmp(small, src + 300 * MiB + 17, sizeof(small)) == 0);
	MUST(vy_store_free(f.c->store, h, E));
	free(src);
	free(back);
	fx_close(&f);
}

static void fill_of_a_gigabyte_moves_no_host_bytes(void)
{
	vy_core_options o;
	vy_core_options_default(&o);
	fixture f;
	fx_open(&f, &o);
	vy_handle h;
	MUST(vy_store_alloc(f.c->store, GiB, &h, E));
	vy_telemetry_snapshot a, b;
	vy_telemetry_snapshot_take(f.c->tel, &a);
	MUST(vy_fill(f.c, h, 0, GiB, 0x5A, E));
	vy_telemetry_snapshot_take(f.c->tel, &b);
	CHECK_EQ(b.h2d_bytes, a.h2d_bytes);
	CHECK_EQ(b.memset_bytes - a.memset_bytes, GiB);
	unsigned char probe[4096], want[4096];
	memset(want, 0x5A, sizeof(want));
	vy_readback rb[2] = {{h, 0, probe, 2048}, {h, GiB - 2048, probe + 2048, 2048}};
	MUST(vy_readback_many(f.c, rb, 2, E));
	CHECK(memcmp(probe, want, sizeof(want)) == 0);
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

typedef struct job {
	vy_core *c;
	unsigned seed;
	int bad;
} job;

static void *transfer_job(void *p)
{
	job *j = p;
	const size_t n = 24 * MiB + j->seed;
	unsigned char *src = malloc(n), *back = malloc(n);
	vy_error e;
	vy_handle h;
	if (!src || !back || vy_store_alloc(j->c->store, n, &h, &e) != VY_OK) {
		j->bad++;
		free(src);
		free(back);
		return NULL;
	}
	for (int i = 0; i < 4; i++) {
		vy_test_fill_pattern(src, n, j->seed * 10 + (unsigned)i);
		vy_readback rb = {h, 0, back, n};
		j->bad += vy_upload_whole(j->c, h, src, n, &e) != VY_OK;
		j->bad += vy_readback_many(j->c, &rb, 1, &e) != VY_OK;
		j->bad += memcmp(src, back, n) != 0;
	}
	j->bad += vy_store_free(j->c->store, h, &e) != VY_OK;
	free(src);
	free(back);
	return NULL;
}

static void more_threads_than_streams(void)
{
	vy_core_options o;
	vy_core_options_default(&o);
	o.streams = 3;
	o.staging_chunk = 4 * MiB;
	fixture f;
	fx_open(&f, &o);
	pthread_t t[12];
	job j[12];
	for (int i = 0; i < 12; i++) {
		j[i] = (job){.c = f.c, .seed = (unsigned)i + 1};
		CHECK(pthread_create(&t[i], NULL, transfer_job, &j[i]) == 0);
	}
	for (int i = 0; i < 12; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(j[i].bad, 0);
	}
	CHECK(f.c->streams.made <= 3);
	fx_close(&f);
}

static void events_time_device_work(void)
{
	vy_device *d;
	MUST(vy_device_cuda_open(0, &d, E));
	vy_dptr p;
	vy_stream *s;
	vy_event *a, *b;
	double us = 0;
	MUST(d->ops->alloc(d, GiB, &p, E));
	MUST(d->ops->stream_create(d, &s, E));
	MUST(d->ops->event_create(d, &a, E));
	MUST(d->ops->event_create(d, &b, E));
	MUST(d->ops->event_record(d, a, s, E));
	MUST(d->ops->memset8(d, s, p, 1, GiB, E));
	MUST(d->ops->event_record(d, b, s, E));
	MUST(d->ops->stream_sync(d, s, E));
	MUST(d->ops->event_elapsed_us(d, a, b, &us, E));
	CHECK(us > 0);
	printf("  memset of 1 GiB: %.0f us by events (%.0f GB/s)\n", us, (double)GiB / us / 1e3);
	MUST(d->ops->event_destroy(d, a, E));
	MUST(d->ops->event_destroy(d, b, E));
	MUST(d->ops->stream_destroy(d, s, E));
	MUST(d->ops->free(d, p, E));
	vy_device_close(d);
}

/* A module held by a sequence (vy_modules_get) cannot be unloaded or
 * replaced; once put back it can. Kernel parameters come from the driver. */
static void module_in_use_is_busy(void)
{
	vy_device *d;
	MUST(vy_device_cuda_open(0, &d, E));
	vy_runner *r;
	MUST(vy_runner_local_open(d, &r, E));
	vy_modules *m;
	MUST(vy_modules_open(r, &m, E));
	FILE *f = fopen("tests/gpu/fixtures/kernels.ptx", "rb");
	CHECK(f != NULL);
	if (!f)
		return;
	static char ptx[65536];
	size_t n = fread(ptx, 1, sizeof(ptx), f);
	fclose(f);
	MUST(vy_modules_load(m, "kernels", ptx, n, E));
	vy_function_info info;
	MUST(vy_modules_get(m, "kernels", "saxpy", &info, E));
	CHECK_EQ(info.nparams, 4);
	CHECK(info.param_size[0] == 8 && info.param_size[1] == 8 && info.param_size[2] == 4 && info.param_size[3] == 4);
	CHECK(info.max_threads >= 256);
	MUST_FAIL(VY_EBUSY, vy_modules_unload(m, "kernels", E));
	MUST_FAIL(VY_EBUSY, vy_modules_load(m, "kernels", ptx, n, E));
	vy_modules_put(m, "kernels");
	MUST_FAIL(VY_ENOENT, vy_modules_get(m, "kernels", "nothere", &info, E));
	MUST(vy_modules_unload(m, "kernels", E));
	CHECK(!vy_modules_loaded(m, "kernels"));
	vy_modules_close(m);
	vy_runner_close(r);
	vy_device_close(d);
}

int main(void)
{
	if (vy_test_backend() != VY_BACKEND_CUDA) {
		printf("0 passed, 0 failed, 0 skipped\n");
		return 0;
	}
	static const vy_test_case cases[] = {
		TEST_CASE(budget_holds_at_device_scale),
		TEST_CASE(large_round_trip_through_staging),
		TEST_CASE(fill_of_a_gigabyte_moves_no_host_bytes),
		TEST_CASE(more_threads_than_streams),
		TEST_CASE(events_time_device_work),
		TEST_CASE(module_in_use_is_busy),
	};
	return vy_test_main("gpu", cases, sizeof(cases) / sizeof(cases[0]));
}
