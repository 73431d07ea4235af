/* Resident store and pool: accounting, budget, live-memory cap, pool reuse
 * and eviction order, in-flight pins, handle ids, baseline after close. */
#include "core/store.h"
#include "tests/unit/support.h"

#include <pthread.h>
#include <stdlib.h>

#define MiB (1ull << 20)

typedef struct fixture {
	vy_counting_device *d;
	vy_telemetry tel;
	vy_store *s;
	uint64_t free0;
} fixture;

static void fx_open(fixture *f, uint64_t budget, uint64_t pool_cap)
{
	vy_error e;
	uint64_t total;
	f->d = vy_test_device_open();
	vy_telemetry_init(&f->tel);
	vy_store_options o = {.budget_bytes = budget, .pool_cap = pool_cap};
	if (f->d->base.ops->mem_info(&f->d->base, &f->free0, &total, &e) != VY_OK ||
	    vy_store_open(&f->d->base, &f->tel, &o, &f->s, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
}

/* Close, and check the device is exactly back where it was. */
static void fx_close(fixture *f)
{
	vy_error e;
	vy_err rc = vy_store_close(f->s, &e);
	if (rc != VY_OK)
		fprintf(stderr, "  close: %s\n", e.msg);
	CHECK(rc == VY_OK);
	vy_test_expect_baseline_and_close(f->d, f->free0);
}

static vy_telemetry_snapshot snap(fixture *f)
{
	vy_telemetry_snapshot s;
	vy_telemetry_snapshot_take(&f->tel, &s);
	return s;
}

static void alloc_free_accounting(void)
{
	fixture f;
	fx_open(&f, 64 * MiB, VY_POOL_CAP_DEFAULT);
	vy_handle h[3];
	uint64_t sizes[3] = {1 * MiB, 2 * MiB + 1, 3 * MiB + 17};
	for (int i = 0; i < 3; i++)
		MUST(vy_store_alloc(f.s, sizes[i], &h[i], E));
	vy_store_usage u;
	vy_store_usage_get(f.s, &u);
	CHECK_EQ(u.resident, sizes[0] + sizes[1] + sizes[2]);
	CHECK_EQ(u.buffers, 3);
	CHECK_EQ(u.budget, 64 * MiB);
	CHECK_EQ(snap(&f).resident_bytes, u.resident);
	CHECK_EQ(snap(&f).driver_allocs, 3);
	vy_buffer_view v;
	MUST(vy_store_view(f.s, h[1], &v, E));
	CHECK_EQ(v.len, sizes[1]);
	CHECK(v.ptr != 0);
	for (int i = 0; i < 3; i++)
		MUST(vy_store_free(f.s, h[i], E));
	vy_store_usage_get(f.s, &u);
	CHECK_EQ(u.resident, 0);
	CHECK_EQ(u.buffers, 0);
	CHECK_EQ(u.pooled, sizes[0] + sizes[1] + sizes[2]);
	CHECK_EQ(snap(&f).pooled_buffers, 3);
	CHECK_EQ(vy_counts_get(f.d).free, 0);
	fx_close(&f);
}

static void zero_length_refused(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_handle h = 0;
	MUST_FAIL(VY_EINVAL, vy_store_alloc(f.s, 0, &h, E));
	CHECK(strstr(vy_test_last_error.msg, "zero-length") != NULL);
	CHECK_EQ(vy_counts_get(f.d).alloc, 0);
	CHECK_EQ(h, 0);
	fx_close(&f);
}

static void ids_monotonic_never_reused(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_handle a, b, c;
	MUST(vy_store_alloc(f.s, 4096, &a, E));
	CHECK_EQ(a, 1);
	MUST(vy_store_free(f.s, a, E));
	MUST(vy_store_alloc(f.s, 4096, &b, E)); /* same memory from the pool */
	MUST(vy_store_alloc(f.s, 4096, &c, E));
	CHECK_EQ(b, 2);
	CHECK_EQ(c, 3);
	vy_buffer_view v;
	MUST_FAIL(VY_ENOENT, vy_store_view(f.s, a, &v, E));
	MUST_FAIL(VY_ENOENT, vy_store_free(f.s, a, E));
	MUST_FAIL(VY_ENOENT, vy_store_free(f.s, 0, E));
	MUST_FAIL(VY_ENOENT, vy_store_free(f.s, 999, E));
	MUST(vy_store_free(f.s, b, E));
	MUST(vy_store_free(f.s, c, E));
	fx_close(&f);
}

static void id_overflow_is_an_error(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_store_test_set_next_id(f.s, UINT64_MAX - 1);
	vy_handle last, h = 0;
	MUST(vy_store_alloc(f.s, 4096, &last, E));
	CHECK_EQ(last, UINT64_MAX - 1);
	uint64_t allocs = vy_counts_get(f.d).alloc;
	MUST_FAIL(VY_EOVERFLOW, vy_store_alloc(f.s, 4096, &h, E));
	CHECK(strstr(vy_test_last_error.msg, "exhausted") != NULL);
	CHECK_EQ(vy_counts_get(f.d).alloc, allocs);
	vy_store_usage u;
	vy_store_usage_get(f.s, &u);
	CHECK_EQ(u.resident, 4096);
	CHECK_EQ(u.buffers, 1);
	MUST(vy_store_free(f.s, last, E));
	fx_close(&f);
}

static void budget_refusal_rolls_back(void)
{
	fixture f;
	fx_open(&f, 4 * MiB, 0);
	vy_handle a, b = 0;
	MUST(vy_store_alloc(f.s, 3 * MiB, &a, E));
	uint64_t allocs = vy_counts_get(f.d).alloc;
	MUST_FAIL(VY_ENOSPC, vy_store_alloc(f.s, 2 * MiB, &b, E));
	/* The message says what was asked, what is in use and what is left. */
	CHECK(strstr(vy_test_last_error.msg, "2097152") != NULL);
	CHECK(strstr(vy_test_last_error.msg, "3145728") != NULL);
	CHECK(strstr(vy_test_last_error.msg, "1048576 left") != NULL);
	CHECK_EQ(vy_counts_get(f.d).alloc, allocs);
	vy_store_usage u;
	vy_store_usage_get(f.s, &u);
	CHECK_EQ(u.resident, 3 * MiB);
	CHECK_EQ(u.buffers, 1);
	/* Exactly the budget fits. */
	MUST(vy_store_alloc(f.s, 1 * MiB, &b, E));
	MUST(vy_store_free(f.s, a, E));
	MUST(vy_store_free(f.s, b, E));
	MUST(vy_store_alloc(f.s, 4 * MiB, &a, E));
	MUST(vy_store_free(f.s, a, E));
	fx_close(&f);
}

static void budget_from_percent_and_limits(void)
{
	vy_counting_device *d = vy_test_device_open();
	vy_telemetry tel;
	vy_telemetry_init(&tel);
	vy_store *s;
	vy_store_usage u;
	vy_store_options o = {.budget_percent = 50, .pool_cap = 0};
	MUST(vy_store_open(&d->base, &tel, &o, &s, E));
	vy_store_usage_get(s, &u);
	CHECK_EQ(u.budget, u.total / 2);
	MUST(vy_store_close(s, E));
	o = (vy_store_options){.pool_cap = 0};
	MUST(vy_store_open(&d->base, &tel, &o, &s, E));
	vy_store_usage_get(s, &u);
	CHECK_EQ(u.budget, (uint64_t)(((unsigned __int128)u.total * 9) / 10));
	MUST(vy_store_close(s, E));
	o = (vy_store_options){.budget_bytes = u.total + 1};
	MUST_FAIL(VY_EINVAL, vy_store_open(&d->base, &tel, &o, &s, E));
	vy_test_device_close(d);
}

/* Another user of the device takes most of its memory: allocations the
 * budget would allow are refused past 90% of what is free now. */
static void live_free_memory_caps_allocations(void)
{
	fixture f;
	fx_open(&f, 0, 0);
	vy_device *dev = &f.d->base;
	uint64_t free_now, total, take;
	MUST(dev->ops->mem_info(dev, &free_now, &total, E));
	vy_dptr other = 0;
	vy_error e;
	for (take = free_now - 64 * MiB; take > 64 * MiB; take -= 256 * MiB)
		if (dev->ops->alloc(dev, take, &other, &e) == VY_OK)
			break;
	CHECK(other != 0);
	if (!other)
		return;
	MUST(dev->ops->mem_info(dev, &free_now, &total, E));
	vy_store_usage u;
	vy_store_usage_get(f.s, &u);
	CHECK(free_now < u.budget); /* the budget alone would allow more */
	vy_handle h = 0;
	MUST_FAIL(VY_ENOSPC, vy_store_alloc(f.s, free_now, &h, E));
	CHECK(strstr(vy_test_last_error.msg, "free") != NULL);
	MUST(vy_store_alloc(f.s, free_now / 2, &h, E));
	MUST(vy_store_free(f.s, h, E));
	MUST(dev->ops->free(dev, other, E));
	fx_close(&f);
}

static void pool_reuse_makes_no_driver_allocation(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_handle a, b, c;
	MUST(vy_store_alloc(f.s, 1 * MiB, &a, E));
	vy_buffer_view va, vb;
	MUST(vy_store_view(f.s, a, &va, E));
	MUST(vy_store_free(f.s, a, E));
	vy_counts before = vy_counts_get(f.d);
	MUST(vy_store_alloc(f.s, 1 * MiB, &b, E));
	vy_counts after = vy_counts_get(f.d);
	CHECK_EQ(after.alloc, before.alloc);
	CHECK_EQ(after.mem_info, before.mem_info); /* a hit needs no budget query */
	MUST(vy_store_view(f.s, b, &vb, E));
	CHECK_EQ(vb.ptr, va.ptr);
	CHECK_EQ(snap(&f).pool_hits, 1);
	CHECK_EQ(snap(&f).pool_misses, 1);
	/* One byte more is another size: a miss and a driver allocation. */
	MUST(vy_store_alloc(f.s, 1 * MiB + 1, &c, E));
	CHECK_EQ(vy_counts_get(f.d).alloc, after.alloc + 1);
	CHECK_EQ(snap(&f).pool_misses, 2);
	MUST(vy_store_free(f.s, b, E));
	MUST(vy_store_free(f.s, c, E));
	fx_close(&f);
}

static void pool_cap_evicts_largest_first(void)
{
	fixture f;
	fx_open(&f, 0, 10 * MiB);
	uint64_t sizes[4] = {1 * MiB, 4 * MiB, 2 * MiB, 3 * MiB};
	vy_handle h[4];
	for (int i = 0; i < 4; i++)
		MUST(vy_store_alloc(f.s, sizes[i], &h[i], E));
	for (int i = 0; i < 4; i++)
		MUST(vy_store_free(f.s, h[i], E));
	CHECK_EQ(snap(&f).pooled_bytes, 10 * MiB);
	CHECK_EQ(snap(&f).pool_evictions, 0);
	/* 2.5 MiB more needs room: the 4 MiB buffer goes, nothing else. */
	vy_handle x;
	MUST(vy_store_alloc(f.s, 5 * MiB / 2, &x, E));
	MUST(vy_store_free(f.s, x, E));
	CHECK_EQ(snap(&f).pool_evictions, 1);
	CHECK_EQ(snap(&f).pooled_bytes, 1 * MiB + 2 * MiB + 3 * MiB + 5 * MiB / 2);
	CHECK_EQ(vy_counts_get(f.d).free, 1);
	uint64_t allocs = vy_counts_get(f.d).alloc;
	vy_handle y;
	MUST(vy_store_alloc(f.s, 3 * MiB, &y, E)); /* still pooled: hit */
	CHECK_EQ(vy_counts_get(f.d).alloc, allocs);
	MUST(vy_store_free(f.s, y, E));
	MUST(vy_store_alloc(f.s, 4 * MiB, &y, E)); /* evicted: miss */
	CHECK_EQ(vy_counts_get(f.d).alloc, allocs + 1);
	MUST(vy_store_free(f.s, y, E));
	fx_close(&f);
}

static void pool_never_evicts_the_incoming_buffer(void)
{
	fixture f;
	fx_open(&f, 0, 10 * MiB);
	vy_handle a, b, big;
	MUST(vy_store_alloc(f.s, 1 * MiB, &a, E));
	MUST(vy_store_alloc(f.s, 2 * MiB, &b, E));
	MUST(vy_store_alloc(f.s, 9 * MiB, &big, E));
	MUST(vy_store_free(f.s, a, E));
	MUST(vy_store_free(f.s, b, E));
	MUST(vy_store_free(f.s, big, E)); /* largest, but it is the one coming in */
	CHECK_EQ(snap(&f).pool_evictions, 1);
	CHECK_EQ(snap(&f).pooled_bytes, 10 * MiB);
	uint64_t allocs = vy_counts_get(f.d).alloc;
	MUST(vy_store_alloc(f.s, 9 * MiB, &big, E));
	MUST(vy_store_alloc(f.s, 1 * MiB, &a, E));
	CHECK_EQ(vy_counts_get(f.d).alloc, allocs);
	MUST(vy_store_free(f.s, big, E));
	MUST(vy_store_free(f.s, a, E));
	fx_close(&f);
}

static void pool_bypasses_buffers_larger_than_cap(void)
{
	fixture f;
	fx_open(&f, 0, 1 * MiB);
	vy_handle a;
	MUST(vy_store_alloc(f.s, 2 * MiB, &a, E));
	MUST(vy_store_free(f.s, a, E));
	CHECK_EQ(snap(&f).pool_bypasses, 1);
	CHECK_EQ(snap(&f).pooled_bytes, 0);
	CHECK_EQ(vy_counts_get(f.d).free, 1);
	fx_close(&f);
}

static void pool_off_frees_at_once(void)
{
	fixture f;
	fx_open(&f, 0, 0);
	vy_handle a;
	for (int i = 0; i < 3; i++) {
		MUST(vy_store_alloc(f.s, 4096, &a, E));
		MUST(vy_store_free(f.s, a, E));
	}
	CHECK_EQ(vy_counts_get(f.d).alloc, 3);
	CHECK_EQ(vy_counts_get(f.d).free, 3);
	CHECK_EQ(snap(&f).pool_hits, 0);
	fx_close(&f);
}

/* A full budget evicts pooled buffers (largest first, only as many as
 * needed) before it refuses anything. */
static void budget_reclaims_pooled_bytes(void)
{
	fixture f;
	fx_open(&f, 10 * MiB, 10 * MiB);
	vy_handle a, b, c, d;
	MUST(vy_store_alloc(f.s, 4 * MiB, &a, E));
	MUST(vy_store_alloc(f.s, 3 * MiB, &b, E));
	MUST(vy_store_free(f.s, a, E));
	MUST(vy_store_free(f.s, b, E));
	MUST(vy_store_alloc(f.s, 2 * MiB, &c, E)); /* 7 pooled + 2 fits */
	CHECK_EQ(snap(&f).pool_evictions, 0);
	MUST(vy_store_alloc(f.s, 5 * MiB, &d, E)); /* needs the 4 MiB back */
	CHECK_EQ(snap(&f).pool_evictions, 1);
	CHECK_EQ(snap(&f).pooled_bytes, 3 * MiB);
	vy_handle x = 0;
	MUST_FAIL(VY_ENOSPC, vy_store_alloc(f.s, 4 * MiB, &x, E)); /* 2+5 live */
	CHECK_EQ(snap(&f).pooled_bytes, 0); /* it tried everything first */
	MUST(vy_store_free(f.s, c, E));
	MUST(vy_store_free(f.s, d, E));
	fx_close(&f);
}

static void driver_out_of_memory_evicts_and_retries(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_handle a, b;
	MUST(vy_store_alloc(f.s, 1 * MiB, &a, E));
	MUST(vy_store_free(f.s, a, E));
	atomic_store(&f.d->fail_allocs, 1);
	MUST(vy_store_alloc(f.s, 2 * MiB, &b, E));
	CHECK_EQ(snap(&f).pool_evictions, 1);
	CHECK_EQ(snap(&f).pooled_bytes, 0);
	/* With nothing to evict, the driver's answer is the caller's. */
	atomic_store(&f.d->fail_allocs, 1);
	MUST_FAIL(VY_ENOSPC, vy_store_alloc(f.s, 3 * MiB, &a, E));
	vy_store_usage u;
	vy_store_usage_get(f.s, &u);
	CHECK_EQ(u.resident, 2 * MiB);
	MUST(vy_store_free(f.s, b, E));
	fx_close(&f);
}

static void accounting_overflow_is_refused(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_handle a, b = 0;
	MUST_FAIL(VY_ENOSPC, vy_store_alloc(f.s, UINT64_MAX, &b, E));
	MUST(vy_store_alloc(f.s, 4096, &a, E));
	MUST_FAIL(VY_EOVERFLOW, vy_store_alloc(f.s, UINT64_MAX - 100, &b, E));
	CHECK_EQ(vy_counts_get(f.d).alloc, 1);
	MUST(vy_store_free(f.s, a, E));
	fx_close(&f);
}

static void inflight_free_is_deferred(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_handle a;
	vy_buffer_view v;
	MUST(vy_store_alloc(f.s, 1 * MiB, &a, E));
	MUST(vy_store_pin_many(f.s, &a, 1, &v, E));
	CHECK_EQ(vy_store_inflight(f.s, a), 1);
	MUST(vy_store_free(f.s, a, E)); /* accepted, deferred */
	CHECK_EQ(snap(&f).deferred_frees, 1);
	vy_store_usage u;
	vy_store_usage_get(f.s, &u);
	CHECK_EQ(u.resident, 1 * MiB); /* still in use by the work */
	CHECK_EQ(u.pooled, 0);
	MUST_FAIL(VY_ENOENT, vy_store_view(f.s, a, &v, E));
	MUST_FAIL(VY_ENOENT, vy_store_pin_many(f.s, &a, 1, &v, E));
	MUST_FAIL(VY_ENOENT, vy_store_free(f.s, a, E));
	MUST(vy_store_unpin_many(f.s, &a, 1, E)); /* the last pin releases it */
	vy_store_usage_get(f.s, &u);
	CHECK_EQ(u.resident, 0);
	CHECK_EQ(u.buffers, 0);
	CHECK_EQ(u.pooled, 1 * MiB);
	MUST_FAIL(VY_EINTERNAL, vy_store_unpin_many(f.s, &a, 1, E));
	fx_close(&f);
}

static void pins_count_and_are_all_or_none(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_handle a, b;
	MUST(vy_store_alloc(f.s, 4096, &a, E));
	MUST(vy_store_alloc(f.s, 8192, &b, E));
	vy_handle list[3] = {a, b, a};
	vy_buffer_view v[3];
	MUST(vy_store_pin_many(f.s, list, 3, v, E));
	CHECK_EQ(vy_store_inflight(f.s, a), 2);
	CHECK_EQ(vy_store_inflight(f.s, b), 1);
	CHECK_EQ(v[1].len, 8192);
	CHECK_EQ(v[2].ptr, v[0].ptr);
	vy_handle bad[3] = {a, b, 12345};
	MUST_FAIL(VY_ENOENT, vy_store_pin_many(f.s, bad, 3, v, E));
	CHECK_EQ(vy_store_inflight(f.s, a), 2); /* unchanged by the failed pin */
	CHECK_EQ(vy_store_inflight(f.s, b), 1);
	MUST(vy_store_unpin_many(f.s, list, 3, E));
	CHECK_EQ(vy_store_inflight(f.s, a), 0);
	MUST(vy_store_free(f.s, a, E));
	MUST(vy_store_free(f.s, b, E));
	CHECK_EQ(snap(&f).deferred_frees, 0);
	fx_close(&f);
}

static void close_returns_every_byte(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	vy_handle h[6];
	for (int i = 0; i < 6; i++)
		MUST(vy_store_alloc(f.s, (uint64_t)(i + 1) * 65536 + 3, &h[i], E));
	for (int i = 0; i < 6; i += 2)
		MUST(vy_store_free(f.s, h[i], E)); /* three pooled, three live */
	fx_close(&f); /* checks allocs == frees and free memory == baseline */
}

static void close_reports_work_in_flight(void)
{
	vy_counting_device *d = vy_test_device_open();
	vy_telemetry tel;
	vy_telemetry_init(&tel);
	vy_store *s;
	vy_store_options o = {.pool_cap = VY_POOL_CAP_DEFAULT};
	uint64_t free0, free1, total;
	MUST(d->base.ops->mem_info(&d->base, &free0, &total, E));
	MUST(vy_store_open(&d->base, &tel, &o, &s, E));
	vy_handle a;
	vy_buffer_view v;
	MUST(vy_store_alloc(s, 4096, &a, E));
	MUST(vy_store_pin_many(s, &a, 1, &v, E));
	MUST_FAIL(VY_EBUSY, vy_store_close(s, E));
	MUST(d->base.ops->mem_info(&d->base, &free1, &total, E));
	CHECK_EQ(free1, free0); /* freed anyway */
	vy_test_device_close(d);
}

typedef struct churn_arg {
	vy_store *s;
	unsigned seed;
	int failures;
} churn_arg;

static void *churn(void *p)
{
	churn_arg *a = p;
	vy_handle live[8] = {0};
	vy_error e;
	for (int i = 0; i < 400; i++) {
		unsigned slot = (a->seed = a->seed * 1103515245u + 12345u) >> 16 & 7;
		if (live[slot]) {
			a->failures += vy_store_free(a->s, live[slot], &e) != VY_OK;
			live[slot] = 0;
		} else {
			uint64_t size = 4096u << (a->seed >> 20 & 3);
			a->failures += vy_store_alloc(a->s, size, &live[slot], &e) != VY_OK;
		}
	}
	for (int i = 0; i < 8; i++)
		if (live[i])
			a->failures += vy_store_free(a->s, live[i], &e) != VY_OK;
	return NULL;
}

static void concurrent_churn_keeps_exact_accounting(void)
{
	fixture f;
	fx_open(&f, 0, VY_POOL_CAP_DEFAULT);
	pthread_t t[4];
	churn_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] = (churn_arg){.s = f.s, .seed = (unsigned)i + 1};
		CHECK(pthread_create(&t[i], NULL, churn, &args[i]) == 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(args[i].failures, 0);
	}
	vy_store_usage u;
	vy_store_usage_get(f.s, &u);
	CHECK_EQ(u.resident, 0);
	CHECK_EQ(u.buffers, 0);
	vy_counts n = vy_counts_get(f.d);
	vy_telemetry_snapshot s = snap(&f);
	CHECK_EQ(n.alloc - n.free, s.pooled_buffers);
	CHECK_EQ(s.pool_hits + s.pool_misses, s.driver_allocs + s.pool_hits);
	CHECK(s.pool_hits > 0);
	fx_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(alloc_free_accounting),
		TEST_CASE(zero_length_refused),
		TEST_CASE(ids_monotonic_never_reused),
		TEST_CASE(id_overflow_is_an_error),
		TEST_CASE(budget_refusal_rolls_back),
		TEST_CASE(budget_from_percent_and_limits),
		TEST_CASE(live_free_memory_caps_allocations),
		TEST_CASE(pool_reuse_makes_no_driver_allocation),
		TEST_CASE(pool_cap_evicts_largest_first),
		TEST_CASE(pool_never_evicts_the_incoming_buffer),
		TEST_CASE(pool_bypasses_buffers_larger_than_cap),
		TEST_CASE(pool_off_frees_at_once),
		TEST_CASE(budget_reclaims_pooled_bytes),
		TEST_CASE(driver_out_of_memory_evicts_and_retries),
		TEST_CASE(accounting_overflow_is_refused),
		TEST_CASE(inflight_free_is_deferred),
		TEST_CASE(pins_count_and_are_all_or_none),
		TEST_CASE(close_returns_every_byte),
		TEST_CASE(close_reports_work_in_flight),
		TEST_CASE(concurrent_churn_keeps_exact_accounting),
	};
	return vy_test_main("store", cases, sizeof(cases) / sizeof(cases[0]));
}
