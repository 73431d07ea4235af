/* Unit-test support. */
#include "tests/unit/support.h"

#include <stdatomic.h>
#include <stdlib.h>

int vy_test_failures;
vy_error *vy_test_err;
vy_error vy_test_last_error;

vy_backend_kind vy_test_backend(void)
{
	const char *b = getenv("VY_TEST_BACKEND");
	vy_backend_kind k = VY_BACKEND_HOST;
	if (b && !vy_backend_parse(b, &k)) {
		fprintf(stderr, "VY_TEST_BACKEND=%s: use host or cuda\n", b);
		exit(2);
	}
	return k == VY_BACKEND_AUTO ? VY_BACKEND_HOST : k;
}

int vy_test_main(const char *suite, const vy_test_case *cases, size_t n)
{
	bool host = vy_test_backend() == VY_BACKEND_HOST;
	unsigned passed = 0, failed = 0, skipped = 0;
	for (size_t i = 0; i < n; i++) {
		if (cases[i].host_only && !host) {
			printf("skip %s.%s (host backend only)\n", suite, cases[i].name);
			skipped++;
			continue;
		}
		vy_test_failures = 0;
		cases[i].fn();
		if (vy_test_failures) {
			printf("FAIL %s.%s\n", suite, cases[i].name);
			failed++;
		} else {
			printf("ok %s.%s\n", suite, cases[i].name);
			passed++;
		}
		fflush(stdout);
	}
	printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
	return failed ? 1 : 0;
}

#define COUNT(d, field) atomic_fetch_add_explicit(&(d)->n.field, 1, memory_order_relaxed)

static vy_counting_device *cnt(vy_device *d)
{
	return (vy_counting_device *)d;
}

static void c_close(vy_device *d)
{
	(void)d; /* vy_test_device_close owns the inner device */
}

static vy_err c_mem_info(vy_device *d, uint64_t *f, uint64_t *t, vy_error *e)
{
	COUNT(cnt(d), mem_info);
	return cnt(d)->inner->ops->mem_info(cnt(d)->inner, f, t, e);
}

/* True when one of `*left` injected failures is used up by this call. */
static bool inject(_Atomic uint64_t *left)
{
	uint64_t n = atomic_load(left);
	while (n && !atomic_compare_exchange_weak(left, &n, n - 1))
		;
	return n != 0;
}

static vy_err c_alloc(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e)
{
	vy_counting_device *c = cnt(d);
	if (inject(&c->fail_allocs))
		return vy_fail(e, VY_ENOSPC, "free device memory", "test: injected out-of-memory");
	COUNT(c, alloc);
	return c->inner->ops->alloc(c->inner, bytes, out, e);
}

static vy_err c_copy_htod(vy_device *d, vy_stream *s, vy_dptr dst, const void *src, uint64_t n, vy_error *e)
{
	if (inject(&cnt(d)->fail_htod))
		return vy_fail(e, VY_EDEVICE, "check the device", "test: injected copy failure");
	COUNT(cnt(d), copy_htod);
	return cnt(d)->inner->ops->copy_htod(cnt(d)->inner, s, dst, src, n, e);
}

static vy_err c_copy_dtoh(vy_device *d, vy_stream *s, void *dst, vy_dptr src, uint64_t n, vy_error *e)
{
	if (inject(&cnt(d)->fail_dtoh))
		return vy_fail(e, VY_EDEVICE, "check the device", "test: injected copy failure");
	COUNT(cnt(d), copy_dtoh);
	return cnt(d)->inner->ops->copy_dtoh(cnt(d)->inner, s, dst, src, n, e);
}

static vy_err c_event_sync(vy_device *d, vy_event *ev, vy_error *e)
{
	if (inject(&cnt(d)->fail_event_syncs))
		return vy_fail(e, VY_EDEVICE, "check the device", "test: injected failure of queued work");
	COUNT(cnt(d), event_sync);
	return cnt(d)->inner->ops->event_sync(cnt(d)->inner, ev, e);
}

#define FORWARD(name, field, params, args)                               \
	static vy_err c_##name params                                    \
	{                                                                \
		COUNT(cnt(d), field);                                    \
		return cnt(d)->inner->ops->name args;                    \
	}

FORWARD(free, free, (vy_device *d, vy_dptr p, vy_error *e), (cnt(d)->inner, p, e))
FORWARD(host_alloc, host_alloc, (vy_device *d, size_t n, void **out, vy_error *e), (cnt(d)->inner, n, out, e))
FORWARD(host_free, host_free, (vy_device *d, void *p, vy_error *e), (cnt(d)->inner, p, e))
FORWARD(stream_create, stream_create, (vy_device *d, vy_stream **out, vy_error *e), (cnt(d)->inner, out, e))
FORWARD(stream_destroy, stream_destroy, (vy_device *d, vy_stream *s, vy_error *e), (cnt(d)->inner, s, e))
FORWARD(stream_sync, stream_sync, (vy_device *d, vy_stream *s, vy_error *e), (cnt(d)->inner, s, e))
FORWARD(copy_dtod, copy_dtod, (vy_device *d, vy_stream *s, vy_dptr dst, vy_dptr src, uint64_t n, vy_error *e),
	(cnt(d)->inner, s, dst, src, n, e))
FORWARD(memset8, memset8, (vy_device *d, vy_stream *s, vy_dptr dst, uint8_t v, uint64_t n, vy_error *e),
	(cnt(d)->inner, s, dst, v, n, e))
FORWARD(event_create, event_create, (vy_device *d, vy_event **out, vy_error *e), (cnt(d)->inner, out, e))
FORWARD(event_destroy, event_destroy, (vy_device *d, vy_event *ev, vy_error *e), (cnt(d)->inner, ev, e))
FORWARD(event_record, event_record, (vy_device *d, vy_event *ev, vy_stream *s, vy_error *e), (cnt(d)->inner, ev, s, e))
FORWARD(event_elapsed_us, event_elapsed, (vy_device *d, vy_event *a, vy_event *b, double *us, vy_error *e),
	(cnt(d)->inner, a, b, us, e))

FORWARD(module_load, module_load,
	(vy_device *d, const void *image, size_t len, vy_module **out, char *log, size_t cap, vy_error *e),
	(cnt(d)->inner, image, len, out, log, cap, e))
FORWARD(module_unload, module_unload, (vy_device *d, vy_module *m, vy_error *e), (cnt(d)->inner, m, e))
FORWARD(function_get, function_get, (vy_device *d, vy_module *m, const char *name, vy_function **out, vy_error *e),
	(cnt(d)->inner, m, name, out, e))
FORWARD(function_info, function_info, (vy_device *d, vy_function *f, vy_function_info *out, vy_error *e),
	(cnt(d)->inner, f, out, e))
FORWARD(launch, launch,
	(vy_device *d, vy_stream *s, vy_function *f, const unsigned grid[3], const unsigned block[3], unsigned shared,
	 void **args, vy_error *e),
	(cnt(d)->inner, s, f, grid, block, shared, args, e))

static vy_err c_synchronize(vy_device *d, vy_error *e)
{
	return cnt(d)->inner->ops->synchronize(cnt(d)->inner, e);
}

static const vy_device_ops counting_ops = {
	.close = c_close,
	.mem_info = c_mem_info,
	.alloc = c_alloc,
	.free = c_free,
	.host_alloc = c_host_alloc,
	.host_free = c_host_free,
	.stream_create = c_stream_create,
	.stream_destroy = c_stream_destroy,
	.stream_sync = c_stream_sync,
	.synchronize = c_synchronize,
	.copy_htod = c_copy_htod,
	.copy_dtoh = c_copy_dtoh,
	.copy_dtod = c_copy_dtod,
	.memset8 = c_memset8,
	.event_create = c_event_create,
	.event_destroy = c_event_destroy,
	.event_record = c_event_record,
	.event_sync = c_event_sync,
	.event_elapsed_us = c_event_elapsed_us,
	.module_load = c_module_load,
	.module_unload = c_module_unload,
	.function_get = c_function_get,
	.function_info = c_function_info,
	.launch = c_launch,
};

vy_counting_device *vy_test_device_open(void)
{
	vy_device_options o = {.backend = vy_test_backend(), .ordinal = 0, .host_memory = VY_TEST_HOST_MEMORY};
	vy_device *inner;
	vy_error e;
	if (vy_device_open(&o, &inner, NULL, 0, &e) != VY_OK) {
		fprintf(stderr, "cannot open the %s backend: %s\n", vy_backend_name(o.backend), e.msg);
		exit(2);
	}
	vy_counting_device *d = calloc(1, sizeof(*d));
	if (!d) {
		fprintf(stderr, "out of memory\n");
		exit(2);
	}
	d->base.ops = &counting_ops;
	d->base.info = inner->info;
	/* Exact sizes, as the suites written before sharing count them; those
	 * that test sharing ask vy_test_device_open_shared. */
	d->base.info.share_granularity = 0;
	d->inner = inner;
	return d;
}

static vy_err c_export_fd(vy_device *d, vy_dptr p, int *fd, vy_error *e)
{
	return cnt(d)->inner->share->export_fd(cnt(d)->inner, p, fd, e);
}

static vy_err c_reserve(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e)
{
	return cnt(d)->inner->share->reserve(cnt(d)->inner, bytes, out, e);
}

static vy_err c_unreserve(vy_device *d, vy_dptr p, uint64_t bytes, vy_error *e)
{
	return cnt(d)->inner->share->unreserve(cnt(d)->inner, p, bytes, e);
}

static vy_err c_map_fd(vy_device *d, int fd, uint64_t bytes, vy_dptr at, vy_error *e)
{
	return cnt(d)->inner->share->map_fd(cnt(d)->inner, fd, bytes, at, e);
}

static vy_err c_map_own(vy_device *d, vy_dptr p, uint64_t bytes, vy_dptr at, vy_error *e)
{
	return cnt(d)->inner->share->map_own(cnt(d)->inner, p, bytes, at, e);
}

static vy_err c_unmap(vy_device *d, vy_dptr at, uint64_t bytes, vy_error *e)
{
	return cnt(d)->inner->share->unmap(cnt(d)->inner, at, bytes, e);
}

static vy_err c_map_zeros(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e)
{
	return cnt(d)->inner->share->map_zeros(cnt(d)->inner, zero, at, bytes, e);
}

static vy_err c_unmap_zeros(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e)
{
	return cnt(d)->inner->share->unmap_zeros(cnt(d)->inner, zero, at, bytes, e);
}

static const vy_device_share_ops counting_share = {
	.export_fd = c_export_fd,
	.reserve = c_reserve,
	.unreserve = c_unreserve,
	.map_fd = c_map_fd,
	.map_own = c_map_own,
	.unmap = c_unmap,
	.map_zeros = c_map_zeros,
	.unmap_zeros = c_unmap_zeros,
};

vy_counting_device *vy_test_device_open_shared(void)
{
	vy_counting_device *d = vy_test_device_open();
	if (d->inner->share) {
		d->base.info.share_granularity = d->inner->info.share_granularity;
		d->base.share = &counting_share;
	}
	return d;
}

void vy_test_device_close(vy_counting_device *d)
{
	if (!d)
		return;
	vy_device_close(d->inner);
	free(d);
}

vy_counts vy_counts_get(vy_counting_device *d)
{
	vy_counts c;
#define VY_COUNT_LOAD(f) c.f = atomic_load(&d->n.f);
	VY_COUNT_FIELDS(VY_COUNT_LOAD)
#undef VY_COUNT_LOAD
	return c;
}

uint64_t vy_counts_driver_calls(const vy_counts *c)
{
	return c->alloc + c->free + c->host_alloc + c->host_free + c->stream_create + c->stream_destroy +
	       c->stream_sync + c->copy_htod + c->copy_dtoh + c->copy_dtod + c->memset8 + c->event_create +
	       c->event_destroy + c->event_record + c->event_sync + c->event_elapsed + c->module_load + c->module_unload +
	       c->function_get + c->function_info + c->launch;
}

void vy_test_expect_baseline_and_close(vy_counting_device *d, uint64_t free0)
{
	vy_error e;
	uint64_t free1 = 0, total;
	vy_counts n = vy_counts_get(d);
	CHECK_EQ(n.alloc, n.free);
	CHECK_EQ(n.host_alloc, n.host_free);
	CHECK_EQ(n.stream_create, n.stream_destroy);
	CHECK(d->base.ops->mem_info(&d->base, &free1, &total, &e) == VY_OK);
	CHECK_EQ(free1, free0);
	vy_test_device_close(d);
}

void vy_test_warm_streams(vy_device *d, unsigned n)
{
	vy_error e;
	if (vy_device_warm_streams(d, n, &e) != VY_OK) {
		fprintf(stderr, "warming streams: %s\n", e.msg);
		exit(2);
	}
}

void vy_test_core_options(vy_core_options *o)
{
	vy_core_options_default(o);
	o->device.backend = vy_test_backend();
	o->device.host_memory = VY_TEST_HOST_MEMORY;
	o->staging_chunk = 1u << 20;
}

void vy_test_fill_pattern(void *p, size_t n, unsigned seed)
{
	unsigned char *b = p;
	uint32_t x = seed * 2654435761u + 12345;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		b[i] = (unsigned char)(x >> 7);
	}
}
