/* Transfers: byte-exact round trips, fusion (copy and sync counts), bounds,
 * zero-length requests, fill/clear/copy on the device, staging reuse,
 * concurrency. Staging chunks are 1 MiB here so multi-round paths run. */
#include "core/transfer.h"
#include "tests/unit/support.h"

#include <pthread.h>
#include <stdlib.h>

#define MiB (1ull << 20)

typedef struct fixture {
	vy_counting_device *d;
	vy_core *c;
	uint64_t free0;
} fixture;

static void fx_open(fixture *f)
{
	vy_error e;
	uint64_t total;
	vy_core_options o;
	vy_test_core_options(&o);
	f->d = vy_test_device_open();
	vy_test_warm_streams(&f->d->base, o.streams);
	if (f->d->base.ops->mem_info(&f->d->base, &f->free0, &total, &e) != VY_OK ||
	    vy_core_attach(&f->d->base, &o, &f->c, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
}

static void fx_close(fixture *f)
{
	vy_error e;
	vy_err rc = vy_core_close(f->c, &e);
	if (rc != VY_OK)
		fprintf(stderr, "  close: %s\n", e.msg);
	CHECK(rc == VY_OK);
	vy_test_expect_baseline_and_close(f->d, f->free0);
}

static vy_telemetry_snapshot snap(fixture *f)
{
	vy_telemetry_snapshot s;
	vy_telemetry_snapshot_take(f->c->tel, &s);
	return s;
}

/* Telemetry difference since `a`, field by field. */
#define DELTA(f, a, field) (snap(f).field - (a).field)

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	return p;
}

static void round_trips_are_byte_exact(void)
{
	static const uint64_t sizes[] = {1, 4095, 4096, 1 * MiB, 1 * MiB + 7, 3 * MiB + 5};
	fixture f;
	fx_open(&f);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t n = sizes[i];
		unsigned char *src = xmalloc(n), *back = xmalloc(n);
		vy_test_fill_pattern(src, n, (unsigned)i + 1);
		memset(back, 0, n);
		vy_handle h;
		vy_telemetry_snapshot a = snap(&f);
		MUST(vy_store_alloc(f.c->store, n, &h, E));
		MUST(vy_upload_whole(f.c, h, src, n, E));
		vy_readback rb = {h, 0, back, n};
		MUST(vy_readback_many(f.c, &rb, 1, E));
		CHECK(memcmp(src, back, n) == 0);
		/* One fused copy per direction, split per 1 MiB staging round. */
		uint64_t rounds = (n + MiB - 1) / MiB;
		CHECK_EQ(DELTA(&f, a, h2d_bytes), n);
		CHECK_EQ(DELTA(&f, a, d2h_bytes), n);
		CHECK_EQ(DELTA(&f, a, h2d_ops), rounds);
		CHECK_EQ(DELTA(&f, a, d2h_ops), rounds);
		CHECK_EQ(DELTA(&f, a, syncs), 2 * rounds);
		MUST(vy_store_free(f.c->store, h, E));
		free(src);
		free(back);
	}
	fx_close(&f);
}

static void upload_whole_refuses_length_drift(void)
{
	fixture f;
	fx_open(&f);
	vy_handle h;
	char buf[200] = {0};
	MUST(vy_store_alloc(f.c->store, 100, &h, E));
	vy_counts before = vy_counts_get(f.d);
	MUST_FAIL(VY_EINVAL, vy_upload_whole(f.c, h, buf, 99, E));
	CHECK(strstr(vy_test_last_error.msg, "length drift") != NULL);
	MUST_FAIL(VY_EINVAL, vy_upload_whole(f.c, h, buf, 101, E));
	MUST_FAIL(VY_ENOENT, vy_upload_whole(f.c, h + 1, buf, 100, E));
	vy_counts after = vy_counts_get(f.d);
	CHECK_EQ(vy_counts_driver_calls(&after), vy_counts_driver_calls(&before));
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

/* A batch with one bad request moves nothing at all. */
static void bad_ranges_move_nothing(void)
{
	fixture f;
	fx_open(&f);
	vy_handle h;
	unsigned char zero[64] = {0}, ones[64], back[64];
	memset(ones, 1, sizeof(ones));
	MUST(vy_store_alloc(f.c->store, 64, &h, E));
	MUST(vy_upload_whole(f.c, h, zero, 64, E));
	vy_counts before = vy_counts_get(f.d);
	vy_upload ups[2] = {{h, 0, ones, 32}, {h, 40, ones, 32}}; /* second overruns */
	MUST_FAIL(VY_ERANGE, vy_upload_many(f.c, ups, 2, E));
	CHECK(strstr(vy_test_last_error.msg, "overruns") != NULL);
	vy_upload wrap = {h, UINT64_MAX - 2, ones, 8}; /* offset + len wraps */
	MUST_FAIL(VY_ERANGE, vy_upload_many(f.c, &wrap, 1, E));
	vy_readback rb_bad = {h, 65, back, 0}; /* empty, but past the end */
	MUST_FAIL(VY_ERANGE, vy_readback_many(f.c, &rb_bad, 1, E));
	vy_readback rb_unknown = {h + 7, 0, back, 0};
	MUST_FAIL(VY_ENOENT, vy_readback_many(f.c, &rb_unknown, 1, E));
	vy_upload no_src = {h, 0, NULL, 4};
	MUST_FAIL(VY_EINVAL, vy_upload_many(f.c, &no_src, 1, E));
	vy_counts after = vy_counts_get(f.d);
	CHECK_EQ(vy_counts_driver_calls(&after), vy_counts_driver_calls(&before));
	CHECK_EQ(vy_store_inflight(f.c->store, h), 0); /* pins undone */
	vy_readback rb = {h, 0, back, 64};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(memcmp(back, zero, 64) == 0);
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

static void zero_length_requests_touch_no_driver(void)
{
	fixture f;
	fx_open(&f);
	vy_handle h;
	MUST(vy_store_alloc(f.c->store, 4096, &h, E));
	vy_counts before = vy_counts_get(f.d);
	vy_telemetry_snapshot a = snap(&f);
	vy_readback rbs[3] = {{h, 0, NULL, 0}, {h, 4096, NULL, 0}, {h, 17, NULL, 0}};
	MUST(vy_readback_many(f.c, rbs, 3, E));
	vy_upload ups[2] = {{h, 0, NULL, 0}, {h, 100, NULL, 0}};
	MUST(vy_upload_many(f.c, ups, 2, E));
	MUST(vy_upload_many(f.c, NULL, 0, E));
	MUST(vy_readback_many(f.c, NULL, 0, E));
	MUST(vy_fill(f.c, h, 10, 0, 0xFF, E));
	MUST(vy_copy(f.c, h, 0, h, 100, 0, E));
	MUST(vy_copy(f.c, h, 64, h, 64, 128, E)); /* onto itself */
	vy_counts after = vy_counts_get(f.d);
	CHECK_EQ(vy_counts_driver_calls(&after), vy_counts_driver_calls(&before));
	CHECK_EQ(DELTA(&f, a, syncs), 0);
	CHECK_EQ(DELTA(&f, a, h2d_ops) + DELTA(&f, a, d2h_ops) + DELTA(&f, a, d2d_ops) + DELTA(&f, a, memset_ops), 0);
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

static void readbacks_fuse_per_buffer(void)
{
	fixture f;
	fx_open(&f);
	const uint64_t n = 8192;
	unsigned char *src = xmalloc(n), *back = xmalloc(3 * n);
	vy_test_fill_pattern(src, n, 7);
	vy_handle h, g;
	MUST(vy_store_alloc(f.c->store, n, &h, E));
	MUST(vy_store_alloc(f.c->store, n, &g, E));
	MUST(vy_upload_whole(f.c, h, src, n, E));
	MUST(vy_upload_whole(f.c, g, src, n, E));

	/* Adjacent, given out of order: one copy of their union, one sync. */
	vy_telemetry_snapshot a = snap(&f);
	vy_readback adj[3] = {{h, 200, back + 200, 100}, {h, 0, back, 100}, {h, 100, back + 100, 100}};
	MUST(vy_readback_many(f.c, adj, 3, E));
	CHECK(memcmp(back, src, 300) == 0);
	CHECK_EQ(DELTA(&f, a, d2h_ops), 1);
	CHECK_EQ(DELTA(&f, a, d2h_bytes), 300);
	CHECK_EQ(DELTA(&f, a, syncs), 1);

	/* Overlapping: one copy of the union; each output gets its own range. */
	a = snap(&f);
	vy_readback ov[2] = {{h, 1000, back, 500}, {h, 1200, back + n, 600}};
	MUST(vy_readback_many(f.c, ov, 2, E));
	CHECK(memcmp(back, src + 1000, 500) == 0);
	CHECK(memcmp(back + n, src + 1200, 600) == 0);
	CHECK_EQ(DELTA(&f, a, d2h_ops), 1);
	CHECK_EQ(DELTA(&f, a, d2h_bytes), 800);

	/* A gap and a second buffer: three copies, still one sync. */
	a = snap(&f);
	vy_readback gap[3] = {{h, 0, back, 10}, {h, 20, back + 10, 10}, {g, 10, back + 20, 10}};
	MUST(vy_readback_many(f.c, gap, 3, E));
	CHECK(memcmp(back, src, 10) == 0);
	CHECK(memcmp(back + 10, src + 20, 10) == 0);
	CHECK(memcmp(back + 20, src + 10, 10) == 0);
	CHECK_EQ(DELTA(&f, a, d2h_ops), 3);
	CHECK_EQ(DELTA(&f, a, d2h_bytes), 30);
	CHECK_EQ(DELTA(&f, a, syncs), 1);

	/* Empty requests mixed in take no part in fusion. */
	a = snap(&f);
	vy_readback mixed[3] = {{h, 0, back, 50}, {h, 4000, NULL, 0}, {h, 50, back + 50, 50}};
	MUST(vy_readback_many(f.c, mixed, 3, E));
	CHECK(memcmp(back, src, 100) == 0);
	CHECK_EQ(DELTA(&f, a, d2h_ops), 1);
	MUST(vy_store_free(f.c->store, h, E));
	MUST(vy_store_free(f.c->store, g, E));
	free(src);
	free(back);
	fx_close(&f);
}

static void uploads_fuse_and_later_writes_win(void)
{
	fixture f;
	fx_open(&f);
	unsigned char a1[100], b1[100], back[300];
	memset(a1, 'a', sizeof(a1));
	memset(b1, 'b', sizeof(b1));
	vy_handle h, g;
	MUST(vy_store_alloc(f.c->store, 300, &h, E));
	MUST(vy_store_alloc(f.c->store, 300, &g, E));
	MUST(vy_fill(f.c, h, 0, 300, '.', E));

	vy_telemetry_snapshot a = snap(&f);
	vy_upload ov[2] = {{h, 0, a1, 100}, {h, 50, b1, 100}};
	MUST(vy_upload_many(f.c, ov, 2, E));
	CHECK_EQ(DELTA(&f, a, h2d_ops), 1);
	CHECK_EQ(DELTA(&f, a, h2d_bytes), 150);
	CHECK_EQ(DELTA(&f, a, syncs), 1);
	vy_readback rb = {h, 0, back, 300};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	unsigned char want[300];
	memset(want, '.', 300);
	memset(want, 'a', 50);
	memset(want + 50, 'b', 100);
	CHECK(memcmp(back, want, 300) == 0);

	/* [0,10) [20,30) then [10,20) bridges them: one copy in the end. */
	a = snap(&f);
	vy_upload bridge[3] = {{h, 0, b1, 10}, {h, 20, b1, 10}, {h, 10, a1, 10}};
	MUST(vy_upload_many(f.c, bridge, 3, E));
	CHECK_EQ(DELTA(&f, a, h2d_ops), 1);
	CHECK_EQ(DELTA(&f, a, h2d_bytes), 30);

	/* Different buffers, or a gap: separate copies, one sync. */
	a = snap(&f);
	vy_upload apart[3] = {{h, 200, a1, 10}, {g, 210, a1, 10}, {h, 250, b1, 10}};
	MUST(vy_upload_many(f.c, apart, 3, E));
	CHECK_EQ(DELTA(&f, a, h2d_ops), 3);
	CHECK_EQ(DELTA(&f, a, syncs), 1);
	MUST(vy_readback_many(f.c, &rb, 1, E));
	memset(want, 'b', 10);
	memset(want + 10, 'a', 10);
	memset(want + 20, 'b', 10);
	memset(want + 200, 'a', 10);
	memset(want + 250, 'b', 10);
	CHECK(memcmp(back, want, 300) == 0);
	MUST(vy_store_free(f.c->store, h, E));
	MUST(vy_store_free(f.c->store, g, E));
	fx_close(&f);
}

/* Past one staging chunk, a batch takes one fence per chunk. */
static void large_batches_fence_once_per_chunk(void)
{
	fixture f;
	fx_open(&f);
	const uint64_t n = 2 * MiB + 100;
	unsigned char *src = xmalloc(n), *back = xmalloc(4 * MiB);
	vy_test_fill_pattern(src, n, 3);
	vy_handle h;
	MUST(vy_store_alloc(f.c->store, n, &h, E));
	vy_telemetry_snapshot a = snap(&f);
	/* Three pieces in caller order, fused into one 2 MiB + 100 copy. */
	vy_upload ups[3] = {{h, 0, src, MiB}, {h, MiB, src + MiB, MiB}, {h, 2 * MiB, src + 2 * MiB, 100}};
	MUST(vy_upload_many(f.c, ups, 3, E));
	CHECK_EQ(DELTA(&f, a, syncs), 3);
	CHECK_EQ(DELTA(&f, a, h2d_ops), 3);
	CHECK_EQ(DELTA(&f, a, h2d_bytes), n);
	/* Overlapping readbacks straddling chunk edges: their union
	 * [5, 2 MiB + 5) is read once, in two chunks. */
	vy_readback rbs[2] = {{h, MiB - 3, back, MiB + 6}, {h, 5, back + MiB + 6, 2 * MiB}};
	a = snap(&f);
	MUST(vy_readback_many(f.c, rbs, 2, E));
	CHECK(memcmp(back, src + MiB - 3, MiB + 6) == 0);
	CHECK(memcmp(back + MiB + 6, src + 5, 2 * MiB) == 0);
	CHECK_EQ(DELTA(&f, a, d2h_bytes), 2 * MiB);
	CHECK_EQ(DELTA(&f, a, syncs), 2);
	MUST(vy_store_free(f.c->store, h, E));
	free(src);
	free(back);
	fx_close(&f);
}

static void fill_and_clear_are_device_memsets(void)
{
	fixture f;
	fx_open(&f);
	const uint64_t n = 1 * MiB + 3;
	unsigned char *src = xmalloc(n), *back = xmalloc(n);
	vy_test_fill_pattern(src, n, 9);
	vy_handle h;
	MUST(vy_store_alloc(f.c->store, n, &h, E));
	MUST(vy_upload_whole(f.c, h, src, n, E));
	vy_telemetry_snapshot a = snap(&f);
	MUST(vy_fill(f.c, h, 4095, 70000, 0xAB, E));
	CHECK_EQ(DELTA(&f, a, h2d_bytes), 0);
	CHECK_EQ(DELTA(&f, a, h2d_ops), 0);
	CHECK_EQ(DELTA(&f, a, memset_ops), 1);
	CHECK_EQ(DELTA(&f, a, memset_bytes), 70000);
	CHECK_EQ(DELTA(&f, a, syncs), 1);
	memset(src + 4095, 0xAB, 70000);
	vy_readback rb = {h, 0, back, n};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(memcmp(back, src, n) == 0);
	MUST_FAIL(VY_ERANGE, vy_fill(f.c, h, n - 10, 11, 1, E));
	MUST_FAIL(VY_ENOENT, vy_fill(f.c, h + 1, 0, 1, 1, E));
	a = snap(&f);
	MUST(vy_clear(f.c, h, E));
	CHECK_EQ(DELTA(&f, a, h2d_bytes), 0);
	CHECK_EQ(DELTA(&f, a, memset_bytes), n);
	MUST(vy_readback_many(f.c, &rb, 1, E));
	memset(src, 0, n);
	CHECK(memcmp(back, src, n) == 0);
	MUST(vy_store_free(f.c->store, h, E));
	free(src);
	free(back);
	fx_close(&f);
}

static void copies_stay_on_the_device(void)
{
	fixture f;
	fx_open(&f);
	const uint64_t n = 65536;
	unsigned char *src = xmalloc(n), *back = xmalloc(n), *want = xmalloc(n);
	vy_test_fill_pattern(src, n, 11);
	vy_handle a_ = 0, b_ = 0;
	MUST(vy_store_alloc(f.c->store, n, &a_, E));
	MUST(vy_store_alloc(f.c->store, n, &b_, E));
	MUST(vy_upload_whole(f.c, a_, src, n, E));
	MUST(vy_clear(f.c, b_, E));
	vy_telemetry_snapshot a = snap(&f);
	MUST(vy_copy(f.c, a_, 100, b_, 1000, 30000, E));
	CHECK_EQ(DELTA(&f, a, h2d_bytes) + DELTA(&f, a, d2h_bytes), 0);
	CHECK_EQ(DELTA(&f, a, d2d_ops), 1);
	CHECK_EQ(DELTA(&f, a, d2d_bytes), 30000);
	CHECK_EQ(DELTA(&f, a, syncs), 1);
	memset(want, 0, n);
	memcpy(want + 1000, src + 100, 30000);
	vy_readback rb = {b_, 0, back, n};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(memcmp(back, want, n) == 0);

	/* Overlapping ranges of one buffer copy as memmove would, both ways. */
	memcpy(want, src, n);
	memmove(want + 10, want, 40000);
	MUST(vy_copy(f.c, a_, 0, a_, 10, 40000, E));
	memmove(want + 5, want + 20000, 30000);
	MUST(vy_copy(f.c, a_, 20000, a_, 5, 30000, E));
	rb.handle = a_;
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(memcmp(back, want, n) == 0);
	vy_store_usage u;
	vy_store_usage_get(f.c->store, &u);
	CHECK_EQ(u.buffers, 2); /* the bounce buffers are gone */

	MUST_FAIL(VY_ERANGE, vy_copy(f.c, a_, n - 5, b_, 0, 6, E));
	MUST_FAIL(VY_ERANGE, vy_copy(f.c, a_, 0, b_, n - 5, 6, E));
	MUST_FAIL(VY_ENOENT, vy_copy(f.c, a_, 0, b_ + 5, 0, 1, E));
	CHECK_EQ(vy_store_inflight(f.c->store, a_), 0);
	MUST(vy_store_free(f.c->store, a_, E));
	MUST(vy_store_free(f.c->store, b_, E));
	free(src);
	free(back);
	free(want);
	fx_close(&f);
}

static void staging_buffers_are_reused(void)
{
	fixture f;
	fx_open(&f);
	unsigned char buf[5000] = {1};
	vy_handle h;
	MUST(vy_store_alloc(f.c->store, sizeof(buf), &h, E));
	MUST(vy_upload_whole(f.c, h, buf, sizeof(buf), E));
	uint64_t pinned = vy_counts_get(f.d).host_alloc;
	vy_telemetry_snapshot a = snap(&f);
	for (int i = 0; i < 5; i++) {
		MUST(vy_upload_whole(f.c, h, buf, sizeof(buf), E));
		vy_readback rb = {h, 0, buf, sizeof(buf)};
		MUST(vy_readback_many(f.c, &rb, 1, E));
	}
	CHECK_EQ(vy_counts_get(f.d).host_alloc, pinned);
	CHECK_EQ(DELTA(&f, a, staging_hits), 10);
	CHECK_EQ(DELTA(&f, a, staging_misses), 0);
	CHECK_EQ(snap(&f).staging_cached_bytes, 8192);
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

typedef struct worker_arg {
	vy_core *c;
	unsigned seed;
	int mismatches, failures;
} worker_arg;

static void *worker(void *p)
{
	worker_arg *w = p;
	const size_t n = 300000;
	unsigned char *src = malloc(n), *back = malloc(n);
	vy_error e;
	vy_handle h;
	if (!src || !back || vy_store_alloc(w->c->store, n, &h, &e) != VY_OK) {
		w->failures++;
		free(src);
		free(back);
		return NULL;
	}
	for (int i = 0; i < 20; i++) {
		vy_test_fill_pattern(src, n, w->seed * 100 + (unsigned)i);
		vy_upload ups[2] = {{h, 0, src, n / 2}, {h, n / 2, src + n / 2, n - n / 2}};
		vy_readback rb = {h, 0, back, n};
		w->failures += vy_upload_many(w->c, ups, 2, &e) != VY_OK;
		w->failures += vy_readback_many(w->c, &rb, 1, &e) != VY_OK;
		w->mismatches += memcmp(src, back, n) != 0;
	}
	w->failures += vy_store_free(w->c->store, h, &e) != VY_OK;
	free(src);
	free(back);
	return NULL;
}

static void concurrent_transfers_lose_nothing(void)
{
	fixture f;
	fx_open(&f);
	pthread_t t[4];
	worker_arg w[4];
	for (int i = 0; i < 4; i++) {
		w[i] = (worker_arg){.c = f.c, .seed = (unsigned)i + 1};
		CHECK(pthread_create(&t[i], NULL, worker, &w[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(w[i].failures, 0);
		CHECK_EQ(w[i].mismatches, 0);
	}
	CHECK_EQ(snap(&f).h2d_bytes, 4 * 20 * 300000ull);
	CHECK_EQ(snap(&f).d2h_bytes, 4 * 20 * 300000ull);
	fx_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(round_trips_are_byte_exact),
		TEST_CASE(upload_whole_refuses_length_drift),
		TEST_CASE(bad_ranges_move_nothing),
		TEST_CASE(zero_length_requests_touch_no_driver),
		TEST_CASE(readbacks_fuse_per_buffer),
		TEST_CASE(uploads_fuse_and_later_writes_win),
		TEST_CASE(large_batches_fence_once_per_chunk),
		TEST_CASE(fill_and_clear_are_device_memsets),
		TEST_CASE(copies_stay_on_the_device),
		TEST_CASE(staging_buffers_are_reused),
		TEST_CASE(concurrent_transfers_lose_nothing),
	};
	return vy_test_main("transfer", cases, sizeof(cases) / sizeof(cases[0]));
}
