/* The device interface: backend names and selection, what each backend
 * reports about itself, the host backend's capacity and refusals, and
 * allocations, copies, memsets and events through the raw table. */
#include "core/device.h"
#include "tests/unit/support.h"

#include <stdlib.h>
#include <time.h>

#define KiB (1ull << 10)
#define MiB (1ull << 20)

static void backend_names_parse_and_print(void)
{
	static const struct {
		const char *name;
		vy_backend_kind kind;
	} good[] = {{"auto", VY_BACKEND_AUTO}, {"cuda", VY_BACKEND_CUDA}, {"host", VY_BACKEND_HOST}};
	for (size_t i = 0; i < 3; i++) {
		vy_backend_kind k = (vy_backend_kind)77;
		CHECK_EQ(vy_backend_parse(good[i].name, &k), 1);
		CHECK_EQ(k, good[i].kind);
		CHECK(strcmp(vy_backend_name(good[i].kind), good[i].name) == 0);
	}
	static const char *const bad[] = {"", "gpu", "hostx", "cud", "auto ", "nvidia"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		vy_backend_kind k = (vy_backend_kind)77;
		CHECK_EQ(vy_backend_parse(bad[i], &k), 0);
		CHECK_EQ(k, 77); /* untouched */
	}
	CHECK(strcmp(vy_backend_name((vy_backend_kind)99), "unknown") == 0);
}

/* What the device under test says about itself. */
static void device_info_describes_the_device(void)
{
	vy_counting_device *d = vy_test_device_open();
	const vy_device_info *i = &d->base.info;
	uint64_t free_b = 0, total = 0;
	MUST(d->base.ops->mem_info(&d->base, &free_b, &total, E));
	CHECK(total > 0);
	CHECK(free_b <= total);
	if (vy_test_backend() == VY_BACKEND_CUDA) {
		CHECK(strcmp(i->backend, "cuda") == 0);
		CHECK(i->name[0] != '\0');
		CHECK(i->cc_major >= 1);
		CHECK(i->multiprocessors > 0);
		CHECK(i->max_threads_per_block >= 64);
		CHECK(i->max_block[0] > 0);
		CHECK(i->max_grid[0] > 0);
		CHECK(i->max_shared_per_block > 0);
		CHECK(i->total_bytes > 0);
		CHECK(i->driver_version >= 12000);
		CHECK_EQ(i->ordinal, 0);
		printf("  device: %s, cc %d.%d, %d SMs, %" PRIu64 " MiB, driver %d\n", i->name, i->cc_major,
		       i->cc_minor, i->multiprocessors, i->total_bytes >> 20, i->driver_version);
	} else {
		CHECK(strcmp(i->backend, "host") == 0);
		CHECK(strcmp(i->name, "host memory") == 0);
		CHECK_EQ(i->total_bytes, VY_TEST_HOST_MEMORY);
		CHECK_EQ(total, VY_TEST_HOST_MEMORY);
		CHECK_EQ(free_b, VY_TEST_HOST_MEMORY);
		CHECK_EQ(i->cc_major, 0);
		CHECK_EQ(i->driver_version, 0);
	}
	vy_test_device_close(d);
}

/* auto takes the GPU when the driver has one and the host backend, with a
 * note saying why, when it has none; cuda never falls back. */
static void backend_selection_matches_the_machine(void)
{
	vy_device *probe = NULL;
	vy_error why = {0};
	vy_err probe_rc = vy_device_cuda_open(0, &probe, &why);
	vy_device_options o = {.backend = VY_BACKEND_AUTO, .ordinal = 0, .host_memory = 1 * MiB};
	vy_device *d = NULL;
	char note[VY_NOTE_MAX];
	memset(note, 'x', sizeof(note));
	if (probe_rc == VY_ENODEV) {
		CHECK(strstr(why.msg, "(Fix: ") != NULL);
		CHECK(vy_test_backend() == VY_BACKEND_HOST); /* a cuda run needs a GPU */
		MUST(vy_device_open(&o, &d, note, sizeof(note), E));
		CHECK(strcmp(d->info.backend, "host") == 0);
		CHECK_EQ(d->info.total_bytes, 1 * MiB);
		CHECK(note[0] != '\0');
		CHECK(strlen(note) < sizeof(note));
		CHECK(strstr(note, "host backend") != NULL);
		vy_device_close(d);
		/* A short note buffer is cut and terminated. */
		char small[12];
		memset(small, 'x', sizeof(small));
		MUST(vy_device_open(&o, &d, small, 8, E));
		CHECK_EQ(strlen(small), 7);
		CHECK(small[8] == 'x');
		vy_device_close(d);
		/* No note buffer at all is fine. */
		MUST(vy_device_open(&o, &d, NULL, 0, E));
		CHECK(strcmp(d->info.backend, "host") == 0);
		vy_device_close(d);
		/* Asked for by name, cuda fails rather than fall back. */
		o.backend = VY_BACKEND_CUDA;
		d = NULL;
		MUST_FAIL(VY_ENODEV, vy_device_open(&o, &d, note, sizeof(note), E));
		CHECK(d == NULL);
		CHECK_EQ(note[0], '\0');
		MUST_FAIL(VY_ENODEV, vy_device_cuda_open(9999, &d, E));
	} else if (probe_rc == VY_OK) {
		CHECK(strcmp(probe->info.backend, "cuda") == 0);
		vy_device_close(probe);
		MUST(vy_device_open(&o, &d, note, sizeof(note), E));
		CHECK(strcmp(d->info.backend, "cuda") == 0);
		CHECK_EQ(note[0], '\0');
		vy_device_close(d);
		o.backend = VY_BACKEND_CUDA;
		MUST(vy_device_open(&o, &d, NULL, 0, E));
		CHECK(strcmp(d->info.backend, "cuda") == 0);
		vy_device_close(d);
		MUST_FAIL(VY_EINVAL, vy_device_cuda_open(9999, &d, E));
		CHECK(strstr(vy_test_last_error.msg, "9999") != NULL);
		MUST_FAIL(VY_EINVAL, vy_device_cuda_open(-1, &d, E));
		o.ordinal = 9999; /* auto does not hide a bad ordinal behind the host */
		o.backend = VY_BACKEND_AUTO;
		MUST_FAIL(VY_EINVAL, vy_device_open(&o, &d, note, sizeof(note), E));
	} else {
		/* A GPU that is there but failed: auto must report it too. */
		vy_error seen = {0};
		CHECK_EQ(vy_device_open(&o, &d, note, sizeof(note), &seen), probe_rc);
		fprintf(stderr, "  cuda open failed: %s\n", why.msg);
	}
	/* host by name: a host device and an empty note. */
	o = (vy_device_options){.backend = VY_BACKEND_HOST, .host_memory = 1 * MiB};
	memset(note, 'x', sizeof(note));
	MUST(vy_device_open(&o, &d, note, sizeof(note), E));
	CHECK(strcmp(d->info.backend, "host") == 0);
	CHECK_EQ(note[0], '\0');
	vy_device_close(d);
}

static void host_capacity_is_enforced(void)
{
	vy_device *d;
	MUST(vy_device_host_open(1 * MiB, &d, E));
	const vy_device_ops *ops = d->ops;
	uint64_t free_b = 0, total = 0;
	MUST(ops->mem_info(d, &free_b, &total, E));
	CHECK_EQ(free_b, 1 * MiB);
	CHECK_EQ(total, 1 * MiB);
	CHECK_EQ(d->info.total_bytes, 1 * MiB);
	vy_dptr a = 0, b = 0, c = 0;
	MUST(ops->alloc(d, 1 * MiB, &a, E));
	CHECK(a != 0);
	MUST(ops->mem_info(d, &free_b, &total, E));
	CHECK_EQ(free_b, 0);
	CHECK_EQ(total, 1 * MiB);
	MUST_FAIL(VY_ENOSPC, ops->alloc(d, 1, &b, E));
	CHECK(strstr(vy_test_last_error.msg, "1048576") != NULL); /* says the capacity */
	CHECK(b == 0);
	MUST(ops->free(d, a, E));
	MUST(ops->mem_info(d, &free_b, &total, E));
	CHECK_EQ(free_b, 1 * MiB);
	/* Odd sizes add up exactly. */
	MUST(ops->alloc(d, 300 * KiB + 1, &a, E));
	MUST(ops->alloc(d, 700 * KiB - 1, &b, E));
	MUST(ops->mem_info(d, &free_b, &total, E));
	CHECK_EQ(free_b, 24 * KiB);
	MUST_FAIL(VY_ENOSPC, ops->alloc(d, 24 * KiB + 1, &c, E));
	MUST(ops->alloc(d, 24 * KiB, &c, E));
	MUST_FAIL(VY_ENOSPC, ops->alloc(d, 1, &c, E));
	MUST_FAIL(VY_ENOSPC, ops->alloc(d, UINT64_MAX, &c, E)); /* as the driver says */
	MUST(ops->free(d, a, E));
	MUST(ops->free(d, b, E));
	MUST(ops->free(d, c, E));
	MUST(ops->mem_info(d, &free_b, &total, E));
	CHECK_EQ(free_b, 1 * MiB);
	vy_device_close(d);

	/* Capacity 0 means a quarter of the machine's memory. */
	MUST(vy_device_host_open(0, &d, E));
	MUST(d->ops->mem_info(d, &free_b, &total, E));
	CHECK(total >= 16 * MiB);
	CHECK_EQ(free_b, total);
	CHECK_EQ(d->info.total_bytes, total);
	vy_device_close(d);
}

static void host_free_refuses_foreign_and_freed_pointers(void)
{
	vy_device *d;
	MUST(vy_device_host_open(1 * MiB, &d, E));
	const vy_device_ops *ops = d->ops;
	uint64_t free_b, total;
	vy_dptr a;
	vy_stream *s;
	MUST(ops->alloc(d, 1024, &a, E));
	MUST(ops->stream_create(d, &s, E));
	MUST(ops->memset8(d, s, a, 0, 1024, E));
	MUST(ops->stream_sync(d, s, E));
	MUST(ops->stream_destroy(d, s, E));
	MUST_FAIL(VY_EINVAL, ops->free(d, 0, E));
	MUST_FAIL(VY_EINVAL, ops->free(d, a + 1, E));   /* not where it starts */
	MUST_FAIL(VY_EINVAL, ops->free(d, a + 512, E)); /* inside, aligned */
	/* Host memory of our own, aligned like a device pointer. */
	unsigned char *mine = aligned_alloc(256, 1024);
	CHECK(mine != NULL);
	if (mine) {
		memset(mine, 0, 1024);
		MUST_FAIL(VY_EINVAL, ops->free(d, (vy_dptr)(uintptr_t)(mine + 512), E));
		free(mine);
	}
	MUST(ops->mem_info(d, &free_b, &total, E));
	CHECK_EQ(free_b, 1 * MiB - 1024); /* the refusals changed nothing */
	MUST(ops->free(d, a, E));
	MUST(ops->mem_info(d, &free_b, &total, E));
	CHECK_EQ(free_b, 1 * MiB);
	/* Freed already: refused from the live map, without reading the
	 * freed memory (valgrind would flag a read after free). */
	MUST_FAIL(VY_EINVAL, ops->free(d, a, E));
	MUST(ops->mem_info(d, &free_b, &total, E));
	CHECK_EQ(free_b, 1 * MiB);
	vy_device_close(d);
}

static void zero_byte_allocation_is_refused(void)
{
	vy_counting_device *d = vy_test_device_open();
	vy_dptr p = 0;
	MUST_FAIL(VY_EINVAL, d->base.ops->alloc(&d->base, 0, &p, E));
	CHECK(p == 0);
	CHECK(strstr(vy_test_last_error.msg, "zero-byte") != NULL);
	vy_test_device_close(d);
}

static void device_pointers_are_256_byte_aligned(void)
{
	vy_counting_device *d = vy_test_device_open();
	vy_device *dev = &d->base;
	static const uint64_t sizes[] = {1, 3, 255, 256, 257, 4097, 65535, 1 * MiB + 7};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	vy_dptr p[N] = {0};
	for (size_t i = 0; i < N; i++) {
		MUST(dev->ops->alloc(dev, sizes[i], &p[i], E));
		CHECK(p[i] != 0);
		CHECK_EQ(p[i] % 256, 0);
	}
	for (size_t i = 0; i < N; i++)
		for (size_t j = i + 1; j < N; j++)
			CHECK(p[i] != p[j]);
	for (size_t i = 0; i < N; i++)
		MUST(dev->ops->free(dev, p[i], E));
	vy_test_device_close(d);
}

/* Upload, memset a range, copy device to device, read back: byte-exact,
 * through pinned buffers from host_alloc and a stream. */
static void copies_and_memset_round_trip(void)
{
	vy_counting_device *d = vy_test_device_open();
	vy_device *dev = &d->base;
	const vy_device_ops *ops = dev->ops;
	const uint64_t n = 3 * MiB + 13;
	vy_dptr a = 0, b = 0;
	void *src = NULL, *dst = NULL;
	vy_stream *s = NULL;
	unsigned char *want = malloc(n);
	CHECK(want != NULL);
	if (!want)
		goto out;
	MUST(ops->alloc(dev, n, &a, E));
	MUST(ops->alloc(dev, n, &b, E));
	MUST(ops->host_alloc(dev, n, &src, E));
	MUST(ops->host_alloc(dev, n, &dst, E));
	MUST(ops->stream_create(dev, &s, E));
	vy_test_fill_pattern(src, n, 7);
	memcpy(want, src, n);
	memset(dst, 0x5a, n);
	MUST(ops->copy_htod(dev, s, a, src, n, E));
	MUST(ops->memset8(dev, s, a + 4099, 0xAB, 1 * MiB + 1, E)); /* unaligned range */
	memset(want + 4099, 0xAB, 1 * MiB + 1);
	MUST(ops->memset8(dev, s, b, 0x00, n, E));
	MUST(ops->copy_dtod(dev, s, b + 1, a, n - 1, E)); /* shifted by one */
	MUST(ops->copy_dtoh(dev, s, dst, b, n, E));
	MUST(ops->stream_sync(dev, s, E));
	unsigned char *got = dst;
	CHECK_EQ(got[0], 0);
	CHECK(memcmp(got + 1, want, n - 1) == 0);
	/* The upload itself, read straight back. */
	memset(dst, 0x5a, n);
	MUST(ops->copy_dtoh(dev, s, dst, a, n, E));
	MUST(ops->stream_sync(dev, s, E));
	CHECK(memcmp(dst, want, n) == 0);
	/* Whole-buffer memset to every value class. */
	static const uint8_t values[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
	for (size_t v = 0; v < sizeof(values); v++) {
		MUST(ops->memset8(dev, s, a, values[v], n, E));
		MUST(ops->copy_dtoh(dev, s, dst, a, n, E));
		MUST(ops->stream_sync(dev, s, E));
		size_t bad = 0;
		for (uint64_t k = 0; k < n; k++)
			bad += got[k] != values[v];
		CHECK_EQ(bad, 0);
	}
	vy_counts c = vy_counts_get(d);
	CHECK_EQ(c.copy_htod, 1);
	CHECK_EQ(c.copy_dtoh, 7);
	CHECK_EQ(c.copy_dtod, 1);
	CHECK_EQ(c.memset8, 7);
	CHECK_EQ(c.stream_sync, 7);
out:
	if (s)
		MUST(ops->stream_destroy(dev, s, E));
	if (src)
		MUST(ops->host_free(dev, src, E));
	if (dst)
		MUST(ops->host_free(dev, dst, E));
	if (a)
		MUST(ops->free(dev, a, E));
	if (b)
		MUST(ops->free(dev, b, E));
	free(want);
	vy_test_device_close(d);
}

static void host_events_time_a_sleep(void)
{
	vy_device *d;
	MUST(vy_device_host_open(1 * MiB, &d, E));
	const vy_device_ops *ops = d->ops;
	vy_stream *s;
	vy_event *start, *end;
	double us = -1;
	MUST(ops->stream_create(d, &s, E));
	MUST(ops->event_create(d, &start, E));
	MUST(ops->event_create(d, &end, E));
	MUST_FAIL(VY_EINVAL, ops->event_elapsed_us(d, start, end, &us, E)); /* not recorded */
	CHECK(us == -1);
	MUST(ops->event_record(d, start, s, E));
	MUST_FAIL(VY_EINVAL, ops->event_elapsed_us(d, start, end, &us, E));
	MUST(ops->event_sync(d, start, E)); /* waits for what came before it */
	struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
	nanosleep(&ts, NULL);
	MUST(ops->event_record(d, end, s, E));
	MUST(ops->stream_sync(d, s, E));
	MUST(ops->event_elapsed_us(d, start, end, &us, E));
	CHECK(us >= 1000 && us <= 1000000);
	double back = 0;
	MUST(ops->event_elapsed_us(d, end, start, &back, E));
	CHECK(back <= -1000); /* the other way round is negative */
	MUST(ops->event_destroy(d, start, E));
	MUST(ops->event_destroy(d, end, E));
	MUST(ops->stream_destroy(d, s, E));
	vy_device_close(d);
}

static void events_time_a_64mib_memset(void)
{
	vy_counting_device *d = vy_test_device_open();
	vy_device *dev = &d->base;
	const vy_device_ops *ops = dev->ops;
	vy_stream *s = NULL;
	vy_event *start = NULL, *end = NULL;
	vy_dptr p = 0;
	double us = 0;
	MUST(ops->alloc(dev, 64 * MiB, &p, E));
	MUST(ops->stream_create(dev, &s, E));
	MUST(ops->event_create(dev, &start, E));
	MUST(ops->event_create(dev, &end, E));
	MUST(ops->event_record(dev, start, s, E));
	MUST(ops->memset8(dev, s, p, 0x3c, 64 * MiB, E));
	MUST(ops->event_record(dev, end, s, E));
	MUST(ops->stream_sync(dev, s, E));
	MUST(ops->event_elapsed_us(dev, start, end, &us, E));
	CHECK(us > 0);
	CHECK(us < 10e6);
	/* The memset happened: spot-check both ends. */
	unsigned char edge[2] = {0, 0};
	void *h = NULL;
	MUST(ops->host_alloc(dev, 4096, &h, E));
	MUST(ops->copy_dtoh(dev, s, h, p, 1, E));
	MUST(ops->copy_dtoh(dev, s, (char *)h + 1, p + 64 * MiB - 1, 1, E));
	MUST(ops->stream_sync(dev, s, E));
	memcpy(edge, h, 2);
	CHECK_EQ(edge[0], 0x3c);
	CHECK_EQ(edge[1], 0x3c);
	MUST(ops->host_free(dev, h, E));
	CHECK_EQ(vy_counts_get(d).event_record, 2);
	CHECK_EQ(vy_counts_get(d).event_elapsed, 1);
	MUST(ops->event_destroy(dev, start, E));
	MUST(ops->event_destroy(dev, end, E));
	MUST(ops->stream_destroy(dev, s, E));
	MUST(ops->free(dev, p, E));
	vy_test_device_close(d);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(backend_names_parse_and_print),
		TEST_CASE(device_info_describes_the_device),
		TEST_CASE(backend_selection_matches_the_machine),
		HOST_ONLY(host_capacity_is_enforced),
		HOST_ONLY(host_free_refuses_foreign_and_freed_pointers),
		TEST_CASE(zero_byte_allocation_is_refused),
		TEST_CASE(device_pointers_are_256_byte_aligned),
		TEST_CASE(copies_and_memset_round_trip),
		HOST_ONLY(host_events_time_a_sleep),
		TEST_CASE(events_time_a_64mib_memset),
	};
	return vy_test_main("device", cases, sizeof(cases) / sizeof(cases[0]));
}
