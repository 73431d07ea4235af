/* Shareable memory and the launcher runner: buffers of the share
 * granularity are shareable from birth and counted rounded up; a small one
 * moves once to memory of its own with its bytes; an exported buffer's free
 * waits for its mappings; another mapping of an export sees the same bytes;
 * and the launcher process maps each buffer once per generation, gives
 * mappings back when files go, refuses a generation it was not given, and
 * is replaced after it dies, with accounting back to the baseline. */
#include "core/span.h"
#include "core/transfer.h"
#include "ctl/runner.h"
#include "tests/unit/support.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1ull << 20)

typedef struct fixture {
	vy_counting_device *d;
	vy_core *c;
	uint64_t free0, g;
} fixture;

static void fx_open(fixture *f)
{
	vy_error e;
	uint64_t total;
	vy_core_options o;
	vy_test_core_options(&o);
	f->d = vy_test_device_open_shared();
	f->g = f->d->base.info.share_granularity;
	/* The core's streams and one a test makes beside them: the driver
	 * keeps the memory of the most streams a context had (device.h). */
	vy_test_warm_streams(&f->d->base, o.streams + 1);
	if (f->d->base.ops->mem_info(&f->d->base, &f->free0, &total, &e) != VY_OK ||
	    vy_core_attach(&f->d->base, &o, &f->c, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
}

static void fx_close(fixture *f)
{
	CHECK(vy_core_close(f->c, NULL) == VY_OK);
	vy_test_expect_baseline_and_close(f->d, f->free0);
}

static vy_telemetry_snapshot snap(fixture *f)
{
	vy_telemetry_snapshot s;
	vy_telemetry_snapshot_take(f->c->tel, &s);
	return s;
}

static void large_buffers_are_shareable_from_birth(void)
{
	fixture f;
	fx_open(&f);
	CHECK_EQ(f.g, 2 * MiB);
	vy_handle h, s;
	MUST(vy_store_alloc(f.c->store, 3 * MiB, &h, E));
	MUST(vy_store_alloc(f.c->store, 4096, &s, E));
	CHECK(vy_store_shareable(f.c->store, h));
	CHECK(!vy_store_shareable(f.c->store, s));
	vy_buffer_view v;
	MUST(vy_store_view(f.c->store, h, &v, E));
	CHECK_EQ(v.len, 3 * MiB);
	CHECK_EQ(v.alloc, 4 * MiB);
	CHECK_EQ(snap(&f).resident_bytes, 4 * MiB + 4096);
	MUST(vy_store_free(f.c->store, h, E));
	MUST(vy_store_free(f.c->store, s, E));
	CHECK_EQ(snap(&f).resident_bytes, 0);
	CHECK_EQ(snap(&f).pooled_bytes, 4 * MiB + 4096);
	/* The pool serves a 3.5 MiB request with the 4 MiB buffer. */
	uint64_t allocs = vy_counts_get(f.d).alloc;
	MUST(vy_store_alloc(f.c->store, 7 * MiB / 2, &h, E));
	CHECK_EQ(vy_counts_get(f.d).alloc, allocs);
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

static void small_buffer_moves_once_with_its_bytes(void)
{
	fixture f;
	fx_open(&f);
	vy_handle h;
	char data[100], back[100];
	for (int i = 0; i < 100; i++)
		data[i] = (char)(i * 7 + 1);
	MUST(vy_store_alloc(f.c->store, 100, &h, E));
	MUST(vy_upload_whole(f.c, h, data, 100, E));
	vy_buffer_view before, after;
	MUST(vy_store_view(f.c->store, h, &before, E));
	vy_telemetry_snapshot a = snap(&f);
	MUST(vy_core_share(f.c, h, E));
	vy_telemetry_snapshot b = snap(&f);
	MUST(vy_store_view(f.c->store, h, &after, E));
	CHECK(vy_store_shareable(f.c->store, h));
	CHECK(after.ptr != before.ptr);
	CHECK(after.gen != before.gen);
	CHECK_EQ(after.alloc, f.g);
	CHECK_EQ(after.len, 100);
	CHECK_EQ(b.share_moves - a.share_moves, 1);
	CHECK_EQ(b.d2d_bytes - a.d2d_bytes, 100);
	CHECK_EQ(b.resident_bytes, f.g);
	CHECK_EQ(b.pooled_bytes - a.pooled_bytes, 100); /* the old memory */
	vy_readback rb = {.handle = h, .dst = back, .len = 100};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(memcmp(data, back, 100) == 0);
	MUST(vy_core_share(f.c, h, E)); /* already: nothing moves */
	CHECK_EQ(snap(&f).share_moves, b.share_moves);
	MUST(vy_store_view(f.c->store, h, &before, E));
	CHECK_EQ(before.gen, after.gen);
	/* A pinned buffer is not moved under its user. */
	vy_handle p;
	MUST(vy_store_alloc(f.c->store, 64, &p, E));
	MUST(vy_store_pin_many(f.c->store, &p, 1, &before, E));
	MUST_FAIL(VY_EBUSY, vy_core_share(f.c, p, E));
	MUST(vy_store_unpin_many(f.c->store, &p, 1, E));
	MUST(vy_store_free(f.c->store, p, E));
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

static void exported_free_waits_for_its_mappings(void)
{
	fixture f;
	fx_open(&f);
	vy_handle h, s;
	MUST(vy_store_alloc(f.c->store, 2 * MiB, &h, E));
	MUST(vy_store_alloc(f.c->store, 64, &s, E));
	vy_export x;
	vy_buffer_view v;
	MUST_FAIL(VY_EINVAL, vy_store_export(f.c->store, s, 0, &v, &x, E));
	CHECK_EQ(x.n, 0);
	MUST(vy_store_export(f.c->store, h, VY_EXPORT_UNTRUSTED, &v, &x, E));
	CHECK_EQ(x.n, 1);
	CHECK(x.fd[0] >= 0);
	CHECK_EQ(v.alloc, 2 * MiB);
	/* Another mapping of the export sees and changes the same bytes. */
	vy_device *inner = f.d->inner;
	vy_span sp;
	MUST(vy_span_import(inner, x.fd, x.chunk, x.n, &sp, E));
	vy_export_close(&x);
	vy_dptr other = sp.ptr;
	vy_stream *st;
	MUST(inner->ops->stream_create(inner, &st, E));
	MUST(inner->ops->memset8(inner, st, other + 1000, 0xab, 24, E));
	MUST(inner->ops->stream_sync(inner, st, E));
	MUST(inner->ops->stream_destroy(inner, st, E));
	unsigned char back[32];
	vy_readback rb = {.handle = h, .offset = 996, .dst = back, .len = 32};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(back[3] != 0xab && back[4] == 0xab && back[27] == 0xab && back[28] != 0xab);
	uint64_t frees = vy_store_export_frees(f.c->store);
	CHECK(vy_store_current(f.c->store, h, v.gen));
	MUST(vy_store_free(f.c->store, h, E));
	CHECK(!vy_store_current(f.c->store, h, v.gen));
	CHECK_EQ(vy_store_export_frees(f.c->store), frees + 1);
	CHECK_EQ(snap(&f).resident_bytes, 2 * MiB + 64); /* still mapped: not reused */
	CHECK_EQ(snap(&f).deferred_frees, 1);
	MUST(vy_span_release(inner, &sp, E));
	uint64_t pooled = snap(&f).pooled_bytes, driver_frees = vy_counts_get(f.d).free;
	MUST(vy_store_unexport(f.c->store, h, E));
	CHECK_EQ(snap(&f).resident_bytes, 64);
	/* A client's export could be mapped again from a kept fd: its memory
	 * goes to the driver, never to the pool for another file. */
	CHECK_EQ(snap(&f).pooled_bytes, pooled);
	CHECK_EQ(vy_counts_get(f.d).free, driver_frees + 1);
	MUST_FAIL(VY_EINTERNAL, vy_store_unexport(f.c->store, h, E));
	MUST(vy_store_free(f.c->store, s, E));
	fx_close(&f);
}

/* ---- the launcher runner ------------------------------------------------ */

static vy_runner *launcher_open(fixture *f, uint64_t timeout_ms)
{
	const char *exe = getenv("VYREFS");
	vy_launcher_options o = {.exe = exe ? exe : "build/vyrefs",
				 .backend = vy_test_backend(),
				 .host_memory = VY_TEST_HOST_MEMORY,
				 .timeout_ms = timeout_ms};
	vy_runner *r = NULL;
	vy_error e;
	if (vy_runner_launcher_open(f->c->store, f->c->tel, &o, &r, &e) != VY_OK) {
		fprintf(stderr, "launcher: %s\n", e.msg);
		exit(2);
	}
	return r;
}

/* A sequence of `times` fills of `len` bytes of buffer 0 with `byte`
 * (gen 0: the buffer's own), stopped by *stop (may be NULL). */
static vy_err fills(vy_runner *r, vy_core *c, vy_handle h, uint64_t gen, uint64_t len, uint8_t byte, uint64_t times,
		    const _Atomic uint32_t *stop, vy_run_result *res, vy_error *e)
{
	vy_buffer_view v;
	vy_err rc = vy_store_pin_many(c->store, &h, 1, &v, e);
	if (rc != VY_OK)
		return rc;
	vy_wire_buffer b = {.handle = h, .gen = gen ? gen : v.gen, .len = len};
	vy_wire_step st = {.kind = VY_WIRE_FILL, .line = 1, .a = 0, .length = len, .byte = byte};
	vy_wire_group g = {.times = times, .first = 0, .count = 1};
	vy_seq seq = {.buffers = &b, .steps = &st, .groups = &g, .nbuffers = 1, .nsteps = 1, .ngroups = 1};
	rc = r->ops->run(r, &seq, &v, stop, res, e);
	vy_store_unpin_many(c->store, &h, 1, NULL);
	return rc;
}

static vy_err fill(vy_runner *r, vy_core *c, vy_handle h, uint64_t gen, uint64_t len, uint8_t byte,
		   vy_run_result *res, vy_error *e)
{
	return fills(r, c, h, gen, len, byte, 1, NULL, res, e);
}

/* A shareable buffer grows by mapping more memory at its end: no byte is
 * copied, its bytes stay, its address holds while the view has room, and
 * an export of it is every piece in order. Shrinking gives back whole
 * trailing pieces, only while nothing else maps them. */
static void buffer_grows_in_place_and_shrinks_by_pieces(void)
{
	fixture f;
	fx_open(&f);
	vy_handle h;
	MUST(vy_store_alloc(f.c->store, 2 * MiB, &h, E));
	unsigned char *pat = malloc(2 * MiB), *back = malloc(2 * MiB);
	CHECK(pat && back);
	vy_test_fill_pattern(pat, 2 * MiB, 7);
	vy_upload up = {.handle = h, .offset = 0, .src = pat, .len = 2 * MiB};
	MUST(vy_upload_many(f.c, &up, 1, E));
	vy_buffer_view v0, v;
	MUST(vy_store_view(f.c->store, h, &v0, E));
	uint64_t d2d = snap(&f).d2d_bytes;
	/* 2 MiB more is needed and 1/8 is less: exactly 2 MiB more. */
	MUST(vy_store_grow(f.c->store, h, 3 * MiB, &v, E));
	CHECK_EQ(v.alloc, 4 * MiB);
	CHECK_EQ(v.len, 4 * MiB);
	CHECK(v.gen != v0.gen);
	MUST(vy_store_grow(f.c->store, h, 40 * MiB, &v, E));
	CHECK_EQ(v.alloc, 40 * MiB);
	vy_dptr at = v.ptr;
	/* Now 1/8 of 40 MiB, in granules (6 MiB), is more than needed; the
	 * view (twice 40 MiB) has room, so the address holds. */
	MUST(vy_store_grow(f.c->store, h, 40 * MiB + 1, &v, E));
	CHECK_EQ(v.alloc, 46 * MiB);
	CHECK_EQ(v.ptr, at);
	MUST(vy_store_grow(f.c->store, h, 5 * MiB, &v, E)); /* already there: nothing */
	CHECK_EQ(v.alloc, 46 * MiB);
	CHECK_EQ(snap(&f).grows, 3);
	CHECK_EQ(snap(&f).d2d_bytes, d2d);
	CHECK_EQ(snap(&f).resident_bytes, 46 * MiB);
	vy_readback rb = {.handle = h, .offset = 0, .dst = back, .len = 2 * MiB};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(memcmp(pat, back, 2 * MiB) == 0);
	/* Bytes across a piece's edge, and an export of every piece. */
	up = (vy_upload){.handle = h, .offset = 40 * MiB - 1 * MiB, .src = pat, .len = 2 * MiB};
	MUST(vy_upload_many(f.c, &up, 1, E));
	vy_export x;
	MUST(vy_store_export(f.c->store, h, 0, &v, &x, E));
	CHECK_EQ(x.n, 4);
	CHECK(x.chunk[0] == 2 * MiB && x.chunk[1] == 2 * MiB && x.chunk[2] == 36 * MiB && x.chunk[3] == 6 * MiB);
	vy_device *inner = f.d->inner;
	vy_span sp;
	MUST(vy_span_import(inner, x.fd, x.chunk, x.n, &sp, E));
	vy_export_close(&x);
	CHECK_EQ(sp.bytes, 46 * MiB);
	vy_stream *st;
	MUST(inner->ops->stream_create(inner, &st, E));
	MUST(inner->ops->copy_dtoh(inner, st, back, sp.ptr + 39 * MiB, 2 * MiB, E));
	MUST(inner->ops->stream_sync(inner, st, E));
	CHECK(memcmp(pat, back, 2 * MiB) == 0);
	/* Mapped elsewhere: the pieces stay. */
	MUST(vy_store_shrink(f.c->store, h, 3 * MiB, &v, E));
	CHECK_EQ(v.alloc, 46 * MiB);
	MUST(vy_span_release(inner, &sp, E));
	MUST(inner->ops->stream_destroy(inner, st, E));
	MUST(vy_store_unexport(f.c->store, h, E));
	MUST(vy_store_shrink(f.c->store, h, 3 * MiB, &v, E));
	CHECK_EQ(v.alloc, 4 * MiB);
	CHECK_EQ(v.ptr, at);
	CHECK_EQ(snap(&f).resident_bytes, 4 * MiB);
	rb = (vy_readback){.handle = h, .offset = 0, .dst = back, .len = 2 * MiB};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(memcmp(pat, back, 2 * MiB) == 0);
	/* A small buffer cannot grow in place: it moves (the fs's part). */
	vy_handle s;
	MUST(vy_store_alloc(f.c->store, 100, &s, E));
	MUST_FAIL(VY_ENOTSUP, vy_store_grow(f.c->store, s, 4 * MiB, &v, E));
	MUST(vy_store_free(f.c->store, s, E));
	MUST(vy_store_free(f.c->store, h, E));
	free(pat);
	free(back);
	fx_close(&f);
}

/* Near the end of the budget a step that does not fit is halved, down to
 * what is needed: a buffer grows to the budget's last granule. */
static void growth_fills_the_budget_to_the_last_granule(void)
{
	fixture f;
	fx_open(&f);
	vy_store_usage u;
	vy_store_usage_get(f.c->store, &u);
	uint64_t room = u.budget - u.resident - u.pooled;
	vy_handle h;
	MUST(vy_store_alloc(f.c->store, 2 * MiB, &h, E));
	vy_buffer_view v;
	uint64_t len = 2 * MiB;
	vy_err rc;
	while ((rc = vy_store_grow(f.c->store, h, len + 1, &v, NULL)) == VY_OK)
		len = v.alloc;
	CHECK_EQ(rc, VY_ENOSPC);
	CHECK_EQ(len, room / f.g * f.g);
	CHECK(snap(&f).grows < VY_CHUNKS_MAX);
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

/* Holes: a buffer of holes costs no memory and reads zeros; a write into
 * a hole is refused (nothing written) until the range is backed; backing
 * takes zeroed memory for the granules asked; SEEK_DATA/SEEK_HOLE answers
 * follow; a punch gives whole pieces back; a buffer with holes is not
 * exported; accounting returns to nothing. */
static vy_err zero_with_core(void *ctx, vy_dptr p, uint64_t len, vy_error *e)
{
	vy_core *c = ctx;
	vy_stream *st;
	vy_err rc = c->dev->ops->stream_create(c->dev, &st, e);
	if (rc != VY_OK)
		return rc;
	rc = c->dev->ops->memset8(c->dev, st, p, 0, len, e);
	if (rc == VY_OK)
		rc = c->dev->ops->stream_sync(c->dev, st, e);
	c->dev->ops->stream_destroy(c->dev, st, NULL);
	return rc;
}

static void holes_cost_nothing_until_backed(void)
{
	fixture f;
	fx_open(&f);
	vy_handle h;
	MUST(vy_store_alloc_holes(f.c->store, 7 * MiB, &h, E)); /* 8 MiB of holes */
	vy_buffer_view v;
	MUST(vy_store_view(f.c->store, h, &v, E));
	CHECK_EQ(v.len, 8 * MiB);
	CHECK_EQ(v.holes, 8 * MiB);
	CHECK_EQ(snap(&f).resident_bytes, 0);
	CHECK(!vy_store_shareable(f.c->store, h));
	unsigned char *back = malloc(8 * MiB), *pat = malloc(4096);
	CHECK(back && pat);
	vy_readback rb = {.handle = h, .offset = 0, .dst = back, .len = 8 * MiB};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	for (size_t i = 0; i < 8 * MiB; i++)
		if (back[i]) {
			CHECK(!"a hole reads zeros");
			break;
		}
	vy_test_fill_pattern(pat, 4096, 3);
	vy_upload up = {.handle = h, .offset = 5 * MiB, .src = pat, .len = 4096};
	MUST_FAIL(VY_EINTERNAL, vy_upload_many(f.c, &up, 1, E));
	MUST_FAIL(VY_EINTERNAL, vy_fill(f.c, h, 5 * MiB, 1, 9, E));
	MUST(vy_store_back(f.c->store, h, 5 * MiB, 4096, zero_with_core, f.c, &v, E));
	CHECK_EQ(v.holes, 6 * MiB);
	CHECK_EQ(snap(&f).resident_bytes, 2 * MiB);
	MUST(vy_upload_many(f.c, &up, 1, E));
	CHECK_EQ(vy_store_seek(f.c->store, h, 0, true), 4 * MiB);
	CHECK_EQ(vy_store_seek(f.c->store, h, 0, false), 0);
	CHECK_EQ(vy_store_seek(f.c->store, h, 4 * MiB, false), 6 * MiB);
	CHECK_EQ(vy_store_seek(f.c->store, h, 6 * MiB, true), UINT64_MAX);
	rb = (vy_readback){.handle = h, .offset = 4 * MiB, .dst = back, .len = 2 * MiB};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(memcmp(back + MiB, pat, 4096) == 0 && back[0] == 0 && back[MiB - 1] == 0 && back[MiB + 4096] == 0);
	vy_export x;
	MUST_FAIL(VY_EINVAL, vy_store_export(f.c->store, h, 0, &v, &x, E));
	MUST(vy_store_punch(f.c->store, h, 3 * MiB, 4 * MiB, &v, E));
	CHECK_EQ(v.holes, 8 * MiB);
	CHECK_EQ(snap(&f).resident_bytes, 0);
	MUST(vy_store_back(f.c->store, h, 0, UINT64_MAX, zero_with_core, f.c, &v, E));
	CHECK_EQ(v.holes, 0);
	CHECK(vy_store_shareable(f.c->store, h));
	MUST(vy_store_export(f.c->store, h, 0, &v, &x, E));
	CHECK_EQ(x.n, 1); /* one run of holes, one piece */
	vy_export_close(&x);
	MUST(vy_store_unexport(f.c->store, h, E));
	MUST(vy_store_free(f.c->store, h, E));
	CHECK_EQ(snap(&f).resident_bytes, 0);
	free(back);
	free(pat);
	fx_close(&f);
}

/* Long holes: on cuda a run of holes maps a larger allocation of zeros
 * where it covers one whole (cuda.h, zrun); a piece backed inside such a
 * run splits it, and the zeros on both sides of the piece, over the run's
 * edges too, still read as zeros. 256 MiB of holes, a granule backed in
 * the middle of the second 64 MiB, then punched, then everything backed:
 * the bytes and the accounting exact at each step, and device memory back
 * at the baseline after (the zero run released with its last mapping). */
static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void long_holes_split_around_a_piece(void)
{
	fixture f;
	fx_open(&f);
	vy_handle h;
	uint64_t len = 256 * MiB, at = 100 * MiB;
	MUST(vy_store_alloc_holes(f.c->store, len, &h, E));
	vy_buffer_view v;
	unsigned char *back = malloc(8 * MiB), pat[4096];
	CHECK(back != NULL);
	vy_test_fill_pattern(pat, sizeof(pat), 5);
	MUST(vy_store_back(f.c->store, h, at, sizeof(pat), zero_with_core, f.c, &v, E));
	CHECK_EQ(v.holes, len - f.g);
	CHECK_EQ(snap(&f).resident_bytes, f.g);
	vy_upload up = {.handle = h, .offset = at, .src = pat, .len = sizeof(pat)};
	MUST(vy_upload_many(f.c, &up, 1, E));
	/* 4 MiB either side of the piece, and the run's edges at 64 and 128 MiB. */
	uint64_t from[] = {at - 4 * MiB, 60 * MiB, 124 * MiB, len - 8 * MiB};
	for (size_t k = 0; k < sizeof(from) / sizeof(from[0]); k++) {
		vy_readback rb = {.handle = h, .offset = from[k], .dst = back, .len = 8 * MiB};
		MUST(vy_readback_many(f.c, &rb, 1, E));
		uint64_t in = at - from[k]; /* where the pattern is, if inside */
		if (k == 0) {
			CHECK(all_zero(back, in) && memcmp(back + in, pat, sizeof(pat)) == 0);
			CHECK(all_zero(back + in + sizeof(pat), 8 * MiB - in - sizeof(pat)));
		} else {
			CHECK(all_zero(back, 8 * MiB));
		}
	}
	MUST(vy_store_punch(f.c->store, h, at, f.g, &v, E));
	CHECK_EQ(v.holes, len);
	CHECK_EQ(snap(&f).resident_bytes, 0);
	vy_readback rb = {.handle = h, .offset = at - 4 * MiB, .dst = back, .len = 8 * MiB};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(all_zero(back, 8 * MiB));
	MUST(vy_store_back(f.c->store, h, 0, UINT64_MAX, zero_with_core, f.c, &v, E));
	CHECK_EQ(v.holes, 0);
	CHECK_EQ(snap(&f).resident_bytes, len);
	MUST(vy_store_free(f.c->store, h, E));
	CHECK_EQ(snap(&f).resident_bytes, 0);
	free(back);
	fx_close(&f);
}

static void *stop_later(void *arg)
{
	usleep(300000);
	atomic_store((_Atomic uint32_t *)arg, 1);
	return NULL;
}

static void launcher_maps_once_per_generation_and_gives_back(void)
{
	fixture f;
	fx_open(&f);
	vy_runner *r = launcher_open(&f, 10000);
	vy_handle a, b;
	MUST(vy_store_alloc(f.c->store, 2 * MiB, &a, E));
	MUST(vy_store_alloc(f.c->store, 2 * MiB, &b, E));
	vy_run_result res;
	MUST(fill(r, f.c, a, 0, 2 * MiB, 0x5a, &res, E));
	CHECK_EQ(res.memset_ops, 1);
	CHECK_EQ(res.memset_bytes, 2 * MiB);
	CHECK_EQ(res.steps, 1);
	CHECK_EQ(res.syncs, 1);
	CHECK(vy_runner_launcher_pid(r) > 0);
	unsigned char back[4];
	vy_readback rb = {.handle = a, .offset = 2 * MiB - 4, .dst = back, .len = 4};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	CHECK(back[0] == 0x5a && back[3] == 0x5a);
	MUST(fill(r, f.c, a, 0, 16, 0x11, &res, E));
	CHECK_EQ(snap(&f).exports, 1); /* mapped once, used twice */
	/* A generation the launcher was not given is refused there. */
	vy_buffer_view v;
	MUST(vy_store_view(f.c->store, a, &v, E));
	MUST_FAIL(VY_EINTERNAL, fill(r, f.c, a, v.gen + 1000, 16, 0x22, &res, E));
	CHECK(strstr(vy_test_last_error.msg, "is not mapped here") != NULL);
	MUST(fill(r, f.c, b, 0, 16, 0x33, &res, E));
	CHECK_EQ(snap(&f).exports, 2);
	/* A freed buffer's mapping is given back at the sweep, then its
	 * memory is free. */
	MUST(vy_store_free(f.c->store, a, E));
	CHECK_EQ(snap(&f).resident_bytes, 4 * MiB);
	r->ops->sweep(r);
	CHECK_EQ(snap(&f).resident_bytes, 2 * MiB);
	/* A launcher killed while idle is replaced before the next sequence. */
	pid_t pid = vy_runner_launcher_pid(r);
	kill(pid, SIGKILL);
	usleep(100000);
	MUST(fill(r, f.c, b, 0, 16, 0x44, &res, E));
	CHECK(vy_runner_launcher_pid(r) != pid);
	CHECK_EQ(snap(&f).launcher_starts, 2);
	CHECK_EQ(snap(&f).launcher_restarts, 1);
	CHECK_EQ(snap(&f).exports, 3); /* b mapped again in the new one */
	vy_runner_close(r);
	MUST(vy_store_free(f.c->store, b, E));
	CHECK_EQ(snap(&f).resident_bytes, 0);
	fx_close(&f);
}

static void launcher_killed_in_a_sequence_costs_that_sequence(void)
{
	fixture f;
	fx_open(&f);
	vy_runner *r = launcher_open(&f, 0);
	vy_handle a;
	MUST(vy_store_alloc(f.c->store, 8 * MiB, &a, E));
	vy_run_result res;
	MUST(fill(r, f.c, a, 0, 16, 1, &res, E)); /* started and mapped */
	pid_t pid = vy_runner_launcher_pid(r);
	pid_t killer = fork();
	if (killer == 0) {
		usleep(200000);
		kill(pid, SIGKILL);
		_exit(0);
	}
	/* A long sequence: 10^6 fills of 8 MiB. */
	vy_error e;
	CHECK_EQ(fills(r, f.c, a, 0, 8 * MiB, 9, 1000000, NULL, &res, &e), VY_EDEVICE);
	CHECK(strstr(e.msg, "killed by signal 9") != NULL);
	CHECK(res.process_lost);
	waitpid(killer, NULL, 0);
	CHECK_EQ(vy_runner_launcher_pid(r), 0);
	CHECK_EQ(snap(&f).launcher_restarts, 0); /* counted when the next starts */
	MUST(fill(r, f.c, a, 0, 16, 2, &res, E));
	CHECK_EQ(snap(&f).launcher_restarts, 1);
	vy_runner_close(r);
	MUST(vy_store_free(f.c->store, a, E));
	fx_close(&f);
}

/* A stop asked for during a long sequence ends it at its next step: the
 * launcher answers EINTR with the steps it ran, and stays. */
static void a_stop_ends_the_sequence_at_its_next_step(void)
{
	fixture f;
	fx_open(&f);
	vy_runner *r = launcher_open(&f, 0);
	vy_handle a;
	MUST(vy_store_alloc(f.c->store, 8 * MiB, &a, E));
	vy_run_result res;
	MUST(fill(r, f.c, a, 0, 16, 1, &res, E));
	pid_t pid = vy_runner_launcher_pid(r);
	static _Atomic uint32_t stop;
	atomic_store(&stop, 0);
	pthread_t t;
	pthread_create(&t, NULL, stop_later, (void *)&stop);
	vy_error e;
	CHECK_EQ(fills(r, f.c, a, 0, 8 * MiB, 5, 10000000, &stop, &res, &e), VY_EINTR);
	pthread_join(t, NULL);
	CHECK(strstr(e.msg, "stopped after") != NULL);
	CHECK(res.steps > 0 && res.steps < 10000000);
	CHECK(!res.process_lost);
	CHECK_EQ(vy_runner_launcher_pid(r), pid); /* the same launcher goes on */
	MUST(fill(r, f.c, a, 0, 16, 2, &res, E));
	CHECK_EQ(snap(&f).launcher_restarts, 0);
	vy_runner_close(r);
	MUST(vy_store_free(f.c->store, a, E));
	fx_close(&f);
}

/* A placed buffer's lead (core/store.h) leaves the daemon as zeros: memory
 * from the pool holds another buffer's bytes there until vy_clear_past,
 * which a mapping goes through, clears it. */
static void the_lead_leaves_as_zeros(void)
{
	fixture f;
	fx_open(&f);
	vy_handle old, h;
	MUST(vy_store_alloc(f.c->store, 4 * MiB, &old, E));
	MUST(vy_fill(f.c, old, 0, 4 * MiB, 0xff, E));
	MUST(vy_store_free(f.c->store, old, E));
	uint64_t hits = snap(&f).pool_hits;
	MUST(vy_store_alloc_placed(f.c->store, 4 * MiB - 4088, 4088, &h, E));
	CHECK_EQ(snap(&f).pool_hits, hits + 1); /* the old buffer's memory */
	vy_buffer_view v;
	MUST(vy_store_view(f.c->store, h, &v, E));
	const unsigned char *lead = (const unsigned char *)(uintptr_t)(v.ptr - v.lead);
	CHECK_EQ(lead[0], 0xff);
	CHECK_EQ(lead[4087], 0xff);
	MUST(vy_clear_past(f.c, h, v.len, E));
	int nonzero = 0;
	for (uint64_t i = 0; i < v.lead; i++)
		nonzero += lead[i] != 0;
	CHECK_EQ(nonzero, 0);
	MUST(vy_store_free(f.c->store, h, E));
	fx_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(large_buffers_are_shareable_from_birth),
		TEST_CASE(small_buffer_moves_once_with_its_bytes),
		TEST_CASE(exported_free_waits_for_its_mappings),
		TEST_CASE(buffer_grows_in_place_and_shrinks_by_pieces),
		TEST_CASE(growth_fills_the_budget_to_the_last_granule),
		TEST_CASE(holes_cost_nothing_until_backed),
		TEST_CASE(long_holes_split_around_a_piece),
		TEST_CASE(launcher_maps_once_per_generation_and_gives_back),
		TEST_CASE(launcher_killed_in_a_sequence_costs_that_sequence),
		TEST_CASE(a_stop_ends_the_sequence_at_its_next_step),
		HOST_ONLY(the_lead_leaves_as_zeros),
	};
	return vy_test_main("share", cases, sizeof(cases) / sizeof(cases[0]));
}
