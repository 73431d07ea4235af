/* Staging: power-of-two buckets, cache hits without driver calls, the byte
 * cap and the per-bucket slot limit, frees at close, and concurrent use. */
#include "core/staging.h"
#include "tests/unit/support.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#define KiB (1ull << 10)
#define MiB (1ull << 20)

typedef struct fixture {
	vy_counting_device *d;
	vy_telemetry tel;
	vy_staging *st;
} fixture;

static void fx_open(fixture *f, uint64_t cache_cap)
{
	vy_error e;
	f->d = vy_test_device_open();
	vy_telemetry_init(&f->tel);
	if (vy_staging_open(&f->d->base, &f->tel, cache_cap, &f->st, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
}

/* Close, and check every pinned buffer went back to the driver. */
static void fx_close(fixture *f)
{
	vy_error e;
	vy_err rc = vy_staging_close(f->st, &e);
	if (rc != VY_OK)
		fprintf(stderr, "  close: %s\n", e.msg);
	CHECK(rc == VY_OK);
	vy_counts n = vy_counts_get(f->d);
	CHECK_EQ(n.host_alloc, n.host_free);
	vy_telemetry_snapshot s;
	vy_telemetry_snapshot_take(&f->tel, &s);
	CHECK_EQ(s.staging_cached_bytes, 0);
	vy_test_device_close(f->d);
}

static vy_telemetry_snapshot snap(fixture *f)
{
	vy_telemetry_snapshot s;
	vy_telemetry_snapshot_take(&f->tel, &s);
	return s;
}

static void sizes_round_up_to_power_of_two_buckets(void)
{
	fixture f;
	fx_open(&f, 64 * MiB);
	static const struct {
		size_t ask, size;
	} cases[] = {
		{0, 4096}, {1, 4096}, {4095, 4096}, {4096, 4096}, {4097, 8192},
		{65535, 65536}, {1 * MiB, 1 * MiB}, {1 * MiB + 1, 2 * MiB},
	};
	enum { N = sizeof(cases) / sizeof(cases[0]) };
	vy_staging_buf b[N];
	uint64_t sum = 0;
	for (size_t i = 0; i < N; i++) {
		MUST(vy_staging_acquire(f.st, cases[i].ask, &b[i], E));
		CHECK_EQ(b[i].size, cases[i].size);
		CHECK(b[i].ptr != NULL);
		CHECK_EQ(vy_counts_get(f.d).host_alloc, i + 1); /* each a new buffer */
		memset(b[i].ptr, (int)i, b[i].size);      /* all of it is usable */
		sum += b[i].size;
	}
	for (size_t i = 1; i < N; i++)
		CHECK(b[i].ptr != b[i - 1].ptr);
	CHECK_EQ(snap(&f).staging_misses, N);
	CHECK_EQ(snap(&f).staging_hits, 0);
	CHECK_EQ(snap(&f).staging_cached_bytes, 0);
	for (size_t i = 0; i < N; i++) {
		vy_staging_release(f.st, &b[i]);
		CHECK(b[i].ptr == NULL); /* the caller's handle is cleared */
		CHECK_EQ(b[i].size, 0);
	}
	CHECK_EQ(snap(&f).staging_cached_bytes, sum);
	CHECK_EQ(vy_counts_get(f.d).host_free, 0);
	vy_staging_release(f.st, &b[0]); /* a released buffer again: nothing */
	CHECK_EQ(vy_counts_get(f.d).host_free, 0);
	CHECK_EQ(snap(&f).staging_cached_bytes, sum);
	fx_close(&f);
}

static void oversized_request_is_refused(void)
{
	fixture f;
	fx_open(&f, 64 * MiB);
	vy_staging_buf b = {0};
	MUST_FAIL(VY_EOVERFLOW, vy_staging_acquire(f.st, SIZE_MAX, &b, E));
	MUST_FAIL(VY_EOVERFLOW, vy_staging_acquire(f.st, ((size_t)1 << 63) + 1, &b, E));
	CHECK(b.ptr == NULL);
	CHECK_EQ(vy_counts_get(f.d).host_alloc, 0);
	fx_close(&f);
}

static void release_then_acquire_is_a_hit(void)
{
	fixture f;
	fx_open(&f, 64 * MiB);
	vy_staging_buf a, b, c;
	MUST(vy_staging_acquire(f.st, 5000, &a, E));
	CHECK_EQ(a.size, 8192);
	void *p = a.ptr;
	vy_test_fill_pattern(a.ptr, a.size, 1);
	vy_staging_release(f.st, &a);
	CHECK_EQ(snap(&f).staging_cached_bytes, 8192);
	vy_counts before = vy_counts_get(f.d);
	MUST(vy_staging_acquire(f.st, 6000, &b, E)); /* same bucket */
	vy_counts after = vy_counts_get(f.d);
	CHECK(b.ptr == p);
	CHECK_EQ(b.size, 8192);
	CHECK_EQ(vy_counts_driver_calls(&after), vy_counts_driver_calls(&before)); /* no driver call */
	CHECK_EQ(after.host_alloc, 1);
	CHECK_EQ(snap(&f).staging_hits, 1);
	CHECK_EQ(snap(&f).staging_misses, 1);
	CHECK_EQ(snap(&f).staging_cached_bytes, 0);
	/* Another bucket is a miss even with a buffer cached in this one. */
	vy_staging_release(f.st, &b);
	MUST(vy_staging_acquire(f.st, 3000, &c, E));
	CHECK_EQ(c.size, 4096);
	CHECK(c.ptr != p);
	CHECK_EQ(vy_counts_get(f.d).host_alloc, 2);
	CHECK_EQ(snap(&f).staging_misses, 2);
	CHECK_EQ(snap(&f).staging_hits, 1);
	CHECK_EQ(snap(&f).staging_cached_bytes, 8192);
	vy_staging_release(f.st, &c);
	CHECK_EQ(snap(&f).staging_cached_bytes, 8192 + 4096);
	CHECK_EQ(vy_counts_get(f.d).host_free, 0);
	/* Two cached of one size come back as two distinct buffers. */
	MUST(vy_staging_acquire(f.st, 100, &a, E)); /* the cached 4K: a hit */
	MUST(vy_staging_acquire(f.st, 8192, &b, E)); /* the cached 8K: a hit */
	MUST(vy_staging_acquire(f.st, 4096, &c, E)); /* 4K, a miss */
	void *pa = a.ptr, *pc = c.ptr;
	CHECK(pa != pc);
	vy_staging_release(f.st, &a);
	vy_staging_release(f.st, &c);
	CHECK_EQ(snap(&f).staging_cached_bytes, 4096 + 4096);
	vy_staging_buf x, y;
	MUST(vy_staging_acquire(f.st, 1, &x, E));
	MUST(vy_staging_acquire(f.st, 1, &y, E));
	CHECK(x.ptr != y.ptr);
	CHECK((x.ptr == pa && y.ptr == pc) || (x.ptr == pc && y.ptr == pa));
	CHECK_EQ(vy_counts_get(f.d).host_alloc, 3);
	CHECK_EQ(snap(&f).staging_cached_bytes, 0);
	vy_staging_release(f.st, &x);
	vy_staging_release(f.st, &y);
	vy_staging_release(f.st, &b);
	fx_close(&f);
}

static void cache_cap_bounds_idle_bytes(void)
{
	fixture f;
	fx_open(&f, 16384);
	vy_staging_buf b[3];
	size_t asks[3] = {8192, 5000, 8000};
	for (int i = 0; i < 3; i++) {
		MUST(vy_staging_acquire(f.st, asks[i], &b[i], E));
		CHECK_EQ(b[i].size, 8192);
	}
	void *third = b[2].ptr;
	for (int i = 0; i < 3; i++)
		vy_staging_release(f.st, &b[i]);
	CHECK_EQ(snap(&f).staging_cached_bytes, 16384);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1); /* the third did not fit */
	/* The two kept come back as hits, and the freed one is not among them. */
	for (int i = 0; i < 3; i++)
		MUST(vy_staging_acquire(f.st, 8192, &b[i], E));
	CHECK_EQ(snap(&f).staging_hits, 2);
	CHECK_EQ(vy_counts_get(f.d).host_alloc, 4);
	CHECK(b[0].ptr != third && b[1].ptr != third);
	CHECK(b[0].ptr != b[1].ptr && b[2].ptr != b[0].ptr && b[2].ptr != b[1].ptr);
	/* A cache full of one size leaves no room for another. */
	vy_staging_release(f.st, &b[0]);
	vy_staging_release(f.st, &b[1]);
	vy_staging_buf small;
	MUST(vy_staging_acquire(f.st, 1, &small, E));
	vy_staging_release(f.st, &small);
	CHECK_EQ(vy_counts_get(f.d).host_free, 2);
	CHECK_EQ(snap(&f).staging_cached_bytes, 16384);
	vy_staging_release(f.st, &b[2]);
	CHECK_EQ(vy_counts_get(f.d).host_free, 3);
	fx_close(&f);
}

static void buffer_larger_than_cap_is_freed(void)
{
	fixture f;
	fx_open(&f, 16384);
	vy_staging_buf b;
	MUST(vy_staging_acquire(f.st, 16385, &b, E));
	CHECK_EQ(b.size, 32768);
	vy_staging_release(f.st, &b);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	CHECK_EQ(snap(&f).staging_cached_bytes, 0);
	MUST(vy_staging_acquire(f.st, 16384, &b, E)); /* exactly the cap: kept */
	vy_staging_release(f.st, &b);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	CHECK_EQ(snap(&f).staging_cached_bytes, 16384);
	fx_close(&f);

	/* A cap of 0 keeps nothing. */
	fx_open(&f, 0);
	MUST(vy_staging_acquire(f.st, 1, &b, E));
	vy_staging_release(f.st, &b);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	MUST(vy_staging_acquire(f.st, 1, &b, E));
	CHECK_EQ(snap(&f).staging_hits, 0);
	CHECK_EQ(vy_counts_get(f.d).host_alloc, 2);
	vy_staging_release(f.st, &b);
	fx_close(&f);
}

/* Release `n` buffers of `ask` bytes acquired at once. */
static void acquire_release_many(fixture *f, size_t ask, size_t n)
{
	vy_staging_buf *b = calloc(n, sizeof(*b));
	CHECK(b != NULL);
	if (!b)
		return;
	size_t failed = 0;
	vy_error e;
	for (size_t i = 0; i < n; i++)
		failed += vy_staging_acquire(f->st, ask, &b[i], &e) != VY_OK;
	CHECK_EQ(failed, 0);
	for (size_t i = 0; i < n; i++)
		vy_staging_release(f->st, &b[i]);
	free(b);
}

/* One size keeps at most cache_cap/size buffers, and never more than 1024
 * even when the byte cap has room. */
static void per_bucket_slot_limit(void)
{
	fixture f;
	fx_open(&f, 64 * KiB); /* 64K bucket: 1 slot; 4K bucket: 16 */
	acquire_release_many(&f, 64 * KiB, 2);
	CHECK_EQ(snap(&f).staging_cached_bytes, 64 * KiB);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	fx_close(&f);

	fx_open(&f, 64 * KiB);
	acquire_release_many(&f, 4 * KiB, 17);
	CHECK_EQ(snap(&f).staging_cached_bytes, 64 * KiB);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	fx_close(&f);

	/* 8 MiB / 4 KiB = 2048 slots, clamped to 1024: the 1025th buffer is
	 * freed with 4 MiB of the cap still free ... */
	fx_open(&f, 8 * MiB);
	acquire_release_many(&f, 4 * KiB, 1025);
	CHECK_EQ(snap(&f).staging_cached_bytes, 1024 * 4 * KiB);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	/* ... and that room serves other sizes. */
	acquire_release_many(&f, 8 * KiB, 2);
	CHECK_EQ(snap(&f).staging_cached_bytes, 1024 * 4 * KiB + 2 * 8 * KiB);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	/* All 1024 come back as hits. */
	uint64_t allocs = vy_counts_get(f.d).host_alloc;
	acquire_release_many(&f, 4 * KiB, 1024);
	CHECK_EQ(vy_counts_get(f.d).host_alloc, allocs);
	fx_close(&f);

	/* A cap that is not a multiple: 12K keeps three 4K buffers, one 8K. */
	fx_open(&f, 12 * KiB);
	acquire_release_many(&f, 4 * KiB, 4);
	CHECK_EQ(snap(&f).staging_cached_bytes, 12 * KiB);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	fx_close(&f);
	fx_open(&f, 12 * KiB);
	acquire_release_many(&f, 8 * KiB, 2);
	CHECK_EQ(snap(&f).staging_cached_bytes, 8 * KiB);
	CHECK_EQ(vy_counts_get(f.d).host_free, 1);
	fx_close(&f);
}

static void close_frees_every_cached_buffer(void)
{
	fixture f;
	fx_open(&f, 64 * MiB);
	size_t asks[] = {1, 4096, 4097, 100000, 1 * MiB, 3 * MiB, 1, 4097};
	enum { N = sizeof(asks) / sizeof(asks[0]) };
	vy_staging_buf b[N];
	for (size_t i = 0; i < N; i++)
		MUST(vy_staging_acquire(f.st, asks[i], &b[i], E));
	for (size_t i = 0; i < N; i++)
		vy_staging_release(f.st, &b[i]);
	CHECK_EQ(vy_counts_get(f.d).host_alloc, N);
	CHECK_EQ(vy_counts_get(f.d).host_free, 0);
	CHECK_EQ(snap(&f).staging_cached_bytes, 3 * 4096 + 2 * 8192 + 131072 + 1 * MiB + 4 * MiB);
	fx_close(&f); /* host_alloc == host_free, cached bytes 0 */
	CHECK_EQ(vy_staging_close(NULL, NULL), VY_OK);
}

typedef struct worker {
	vy_staging *st;
	unsigned id;
	int failures;
	int corrupt;
} worker;

static void *work(void *p)
{
	worker *w = p;
	uint32_t x = 0x9e3779b9u * (w->id + 1);
	vy_error e;
	for (unsigned i = 0; i < 500; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		size_t ask = 1 + x % (300 * 1024);
		vy_staging_buf b;
		if (vy_staging_acquire(w->st, ask, &b, &e) != VY_OK) {
			w->failures++;
			continue;
		}
		if (b.size < ask || b.size < VY_STAGING_MIN_BUCKET || (b.size & (b.size - 1)))
			w->failures++;
		unsigned seed = w->id * 100000 + i;
		vy_test_fill_pattern(b.ptr, b.size, seed);
		sched_yield(); /* let another thread write a buffer it shares */
		unsigned char *ref = malloc(b.size);
		if (!ref) {
			w->failures++;
		} else {
			vy_test_fill_pattern(ref, b.size, seed);
			w->corrupt += memcmp(b.ptr, ref, b.size) != 0;
			free(ref);
		}
		vy_staging_release(w->st, &b);
	}
	return NULL;
}

static void concurrent_use_without_corruption(void)
{
	fixture f;
	fx_open(&f, 1 * MiB);
	pthread_t t[4];
	worker w[4];
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (worker){.st = f.st, .id = i};
		CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(w[i].failures, 0);
		CHECK_EQ(w[i].corrupt, 0);
	}
	vy_telemetry_snapshot s = snap(&f);
	vy_counts n = vy_counts_get(f.d);
	CHECK_EQ(s.staging_hits + s.staging_misses, 4 * 500);
	CHECK_EQ(s.staging_misses, n.host_alloc);
	CHECK(s.staging_hits > 0);
	CHECK(s.staging_cached_bytes <= 1 * MiB);
	/* What is not cached went back to the driver. */
	CHECK(n.host_alloc >= n.host_free);
	fx_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(sizes_round_up_to_power_of_two_buckets),
		TEST_CASE(oversized_request_is_refused),
		TEST_CASE(release_then_acquire_is_a_hit),
		TEST_CASE(cache_cap_bounds_idle_bytes),
		TEST_CASE(buffer_larger_than_cap_is_freed),
		TEST_CASE(per_bucket_slot_limit),
		TEST_CASE(close_frees_every_cached_buffer),
		TEST_CASE(concurrent_use_without_corruption),
	};
	return vy_test_main("staging", cases, sizeof(cases) / sizeof(cases[0]));
}
