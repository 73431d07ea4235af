/* The cuda backend's memory kept for a successor (core/cuda_keep.c) with
 * small allocations in slabs (core/cuda_alloc.c), on the real device, in
 * one process: small allocations share a slab (one keeper slot, each at
 * its offset), a larger one is whole granules of its own; no slab's memory
 * is ever exported; a second device adopts every slot from copies of the
 * fds and finds the same bytes in the same memory; a slot adopted twice,
 * of another class or off a slot's start is refused and takes no fd; an
 * undone adoption gives its fd back; an emptied slab is kept for reuse
 * and counted free; and after every free and close the driver's free
 * memory is back where it was. */
#include "core/device_keep.h"
#include "core/slab.h"
#include "core/store_keep.h"
#include "tests/unit/support.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define SLOTS 64

typedef struct table {
	int fd[SLOTS];
	uint32_t next;
	unsigned adds, drops, bad_drops;
	vy_keep_sink sink;
} table;

static vy_keep_slot t_add(void *ctx, int fd)
{
	table *t = ctx;
	int copy = t->next < SLOTS ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (copy < 0)
		return 0;
	t->fd[t->next] = copy;
	t->adds++;
	return t->next++;
}

static void t_drop(void *ctx, vy_keep_slot slot)
{
	table *t = ctx;
	if (slot >= SLOTS || t->fd[slot] < 0) {
		t->bad_drops++;
		return;
	}
	close(t->fd[slot]);
	t->fd[slot] = -1;
	t->drops++;
}

static void t_init(table *t, uint32_t first)
{
	*t = (table){.next = first, .sink = {.ctx = t, .add = t_add, .drop = t_drop}};
	for (int i = 0; i < SLOTS; i++)
		t->fd[i] = -1;
}

static vy_device *open_cuda(void)
{
	vy_device *d = NULL;
	vy_error e;
	if (vy_device_cuda_open(0, &d, &e) != VY_OK) {
		fprintf(stderr, "cuda: %s\n", e.msg);
		exit(2);
	}
	return d;
}

static void put(vy_device *d, vy_stream *s, vy_dptr p, const void *src, uint64_t n)
{
	MUST(d->ops->copy_htod(d, s, p, src, n, E));
	MUST(d->ops->stream_sync(d, s, E));
}

static void get(vy_device *d, vy_stream *s, void *dst, vy_dptr p, uint64_t n)
{
	MUST(d->ops->copy_dtoh(d, s, dst, p, n, E));
	MUST(d->ops->stream_sync(d, s, E));
}

enum { A, B, C, BIG, N };

static void small_allocations_share_a_kept_slab(void)
{
	static const uint64_t size[N] = {[A] = 700, [B] = 800, [C] = 300, [BIG] = MiB + MiB / 2};
	static unsigned char pat[N][2 * MiB], back[2 * MiB];
	/* `watch` holds the context (and its streams' high-water mark) from
	 * the first free-memory reading to the last. */
	vy_device *watch = open_cuda(), *d = open_cuda(), *d2 = open_cuda();
	if (!d->keep) {
		printf("  (this GPU cannot share memory: nothing to keep)\n");
		vy_device_close(d2);
		vy_device_close(d);
		vy_device_close(watch);
		return;
	}
	uint64_t g = d->info.share_granularity, free0, free1, total;
	vy_stream *s, *s2;
	vy_test_warm_streams(watch, 4);
	MUST(watch->ops->mem_info(watch, &free0, &total, E));
	MUST(d->ops->stream_create(d, &s, E));
	MUST(d2->ops->stream_create(d2, &s2, E));
	table t, t2;
	t_init(&t, 6);
	t_init(&t2, SLOTS / 2);
	MUST(d->keep->start(d, &t.sink, E));
	CHECK(d->whole_granules);
	CHECK_EQ(d->slab_max, VY_SLAB_MAX);
	CHECK_EQ(vy_device_alloc_size(d, 700), 1024);      /* a slot: its class's size */
	CHECK_EQ(vy_device_alloc_size(d, MiB), MiB);
	CHECK_EQ(vy_device_alloc_size(d, MiB + 1), g);      /* over a slot: whole granules */

	vy_dptr p[N];
	vy_keep_slot slot[N];
	uint64_t at[N];
	for (int i = 0; i < N; i++) {
		MUST(d->ops->alloc(d, size[i], &p[i], E));
		vy_test_fill_pattern((char *)pat[i], (size_t)size[i], (unsigned)i + 7);
		put(d, s, p[i], pat[i], size[i]);
		CHECK(d->keep->where(d, p[i], &slot[i], &at[i]));
		CHECK(slot[i] != 0);
	}
	/* 700 and 800 bytes: slots of one 1 KiB-class slab, apart; 300 bytes
	 * another class's slab; 1.5 MiB a granule of its own. */
	CHECK_EQ(t.adds, 3);
	CHECK_EQ(slot[A], slot[B]);
	CHECK_EQ(at[B] - at[A], 1024);
	CHECK_EQ(p[B] - p[A], 1024);
	CHECK(slot[C] != slot[A] && slot[BIG] != slot[A] && slot[BIG] != slot[C]);
	CHECK_EQ(at[BIG], 0);
	/* A slab holds several files: never exported, not even its first slot. */
	int fd = -1;
	for (int i = A; i <= C; i++)
		CHECK(d->share->export_fd(d, p[i], &fd, NULL) != VY_OK);
	MUST(d->share->export_fd(d, p[BIG], &fd, E));
	close(fd);
	/* A freed slot is refused a second time; its slab stays for A. */
	MUST(d->ops->free(d, p[B], E));
	CHECK(d->ops->free(d, p[B], NULL) != VY_OK);
	CHECK_EQ(t.drops, 0);

	/* The successor: copies of the kept fds, as the keeper hands them;
	 * its keeper still holds each (daemon/keeper_memory.c seeds so). */
	MUST(d2->keep->start(d2, &t2.sink, E));
	int fds_arr[SLOTS];
	for (int i = 0; i < SLOTS; i++) {
		fds_arr[i] = t.fd[i] >= 0 ? fcntl(t.fd[i], F_DUPFD_CLOEXEC, 0) : -1;
		t2.fd[i] = t.fd[i] >= 0 ? fcntl(t.fd[i], F_DUPFD_CLOEXEC, 0) : -1;
	}
	vy_keep_fds fds = {.fd = fds_arr, .n = SLOTS};
	vy_dptr q[N];
	MUST(d2->keep->adopt(d2, slot[A], at[A], 1024, &fds, &q[A], E));
	CHECK_EQ(fds_arr[slot[A]], -1);                     /* taken by the slab */
	MUST_FAIL(VY_EINVAL, d2->keep->adopt(d2, slot[A], at[A], 1024, &fds, &q[B], E)); /* twice */
	MUST_FAIL(VY_EINVAL, d2->keep->adopt(d2, slot[A], at[A] + 1024, 512, &fds, &q[B], E)); /* another class */
	MUST_FAIL(VY_EINVAL, d2->keep->adopt(d2, slot[A], at[A] + 1, 1024, &fds, &q[B], E)); /* off a slot */
	MUST_FAIL(VY_EINVAL, d2->keep->adopt(d2, slot[A], 0, g, &fds, &q[B], E)); /* the slab as a whole */
	MUST(d2->keep->adopt(d2, slot[C], at[C], 512, &fds, &q[C], E));
	MUST(d2->keep->adopt(d2, slot[BIG], 0, g, &fds, &q[BIG], E));
	CHECK_EQ(t2.adds, 0);                               /* adopted memory is kept already */
	for (int i = 0; i < N; i++) {
		if (i == B)
			continue;
		get(d2, s2, back, q[i], size[i]);
		CHECK(memcmp(back, pat[i], (size_t)size[i]) == 0);
		vy_keep_slot ks;
		uint64_t ka;
		CHECK(d2->keep->where(d2, q[i], &ks, &ka));
		CHECK_EQ(ks, slot[i]);
		CHECK_EQ(ka, at[i]);
	}
	/* The same memory: a write through the successor shows in the first. */
	unsigned char x = 0xa5;
	put(d2, s2, q[A] + 3, &x, 1);
	get(d, s, back, p[A], size[A]);
	CHECK_EQ(back[3], 0xa5);
	/* A new slot of that class goes in the adopted slab. */
	vy_dptr n1;
	MUST(d2->ops->alloc(d2, 1000, &n1, E));
	vy_keep_slot ns;
	uint64_t na;
	CHECK(d2->keep->where(d2, n1, &ns, &na));
	CHECK_EQ(ns, slot[A]);
	CHECK_EQ(t2.adds, 0);
	MUST(d2->ops->free(d2, n1, E));
	/* An undone adoption: C's slab goes, its fd back where it was taken. */
	d2->keep->unadopt(d2, q[C], &fds);
	CHECK(fds_arr[slot[C]] >= 0);

	CHECK_EQ(t2.drops, 0);
	uint64_t f_a, f_b;
	MUST(d2->ops->mem_info(d2, &f_a, &total, E));
	MUST(d2->ops->free(d2, q[A], E));  /* its slab empty: kept for reuse, */
	MUST(d2->ops->mem_info(d2, &f_b, &total, E));
	CHECK_EQ(f_b - f_a, g);                             /* and counted free, as if it went */
	MUST(d2->ops->free(d2, q[BIG], E));
	CHECK_EQ(t2.drops, 1);                              /* BIG's slot, nothing else */
	CHECK(t2.fd[slot[A]] >= 0);
	CHECK_EQ(t2.fd[slot[BIG]], -1);
	CHECK_EQ(t2.bad_drops, 0);
	MUST(d2->ops->stream_destroy(d2, s2, E));
	vy_device_close(d2);
	for (int i = 0; i < N; i++)
		if (i != B)
			MUST(d->ops->free(d, p[i], E));
	CHECK_EQ(t.bad_drops, 0);
	for (int i = 0; i < SLOTS; i++) {
		if (fds_arr[i] >= 0)
			close(fds_arr[i]);
		if (t.fd[i] >= 0)
			close(t.fd[i]);
		if (t2.fd[i] >= 0)
			close(t2.fd[i]);
	}
	MUST(d->ops->stream_destroy(d, s, E));
	vy_device_close(d); /* its slabs' granules go with it */
	MUST(watch->ops->mem_info(watch, &free1, &total, E));
	CHECK_EQ(free1, free0);                             /* every byte back */
	vy_device_close(watch);
}

/* A kept store pools no slab's slot: idle, it would hold its slab's
 * granule where the pool counts a few bytes, and df's room would be short
 * by that granule. Freed, the device's memory is back at once. */
static void a_kept_store_pools_no_slot(void)
{
	vy_device *d = open_cuda();
	if (!d->keep) {
		vy_device_close(d);
		return;
	}
	vy_telemetry tel;
	vy_telemetry_init(&tel);
	vy_store_options o = {.pool_cap = 64 * MiB};
	vy_store *st;
	table t;
	t_init(&t, 6);
	uint64_t free0, free1, total;
	vy_test_warm_streams(d, 4);
	MUST(vy_store_open(d, &tel, &o, &st, E));
	MUST(vy_store_keep(st, &t.sink, E));
	MUST(d->ops->mem_info(d, &free0, &total, E));
	vy_handle h[3];
	for (int i = 0; i < 3; i++)
		MUST(vy_store_alloc(st, 4096, &h[i], E));
	MUST(d->ops->mem_info(d, &free1, &total, E));
	CHECK_EQ(free0 - free1, d->info.share_granularity); /* three slots, one slab */
	for (int i = 0; i < 3; i++)
		MUST(vy_store_free(st, h[i], E));
	vy_store_usage u;
	vy_store_usage_get(st, &u);
	CHECK_EQ(u.pooled, 0);
	MUST(d->ops->mem_info(d, &free1, &total, E));
	CHECK_EQ(free1, free0);
	MUST(vy_store_close(st, E));
	vy_device_close(d);
	for (int i = 0; i < SLOTS; i++)
		if (t.fd[i] >= 0)
			close(t.fd[i]);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(small_allocations_share_a_kept_slab),
		TEST_CASE(a_kept_store_pools_no_slot),
	};
	return vy_test_main("cuda_keep", cases, sizeof(cases) / sizeof(cases[0]));
}
