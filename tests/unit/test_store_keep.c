/* Keeping a store's memory for a successor (core/store_keep.h) on the host
 * backend, in one process: a first device and store keep every allocation
 * through a sink that dups each fd into a table (as the keeper would hold
 * it); a second device and store (the successor) adopt every layout from
 * that table's fds and must find the same bytes, the same accounting, and
 * memory that frees and reuses as its own. */
#include "core/store_keep.h"
#include "tests/unit/support.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#define MiB (1ull << 20)
#define CAP (256 * MiB)
#define SLOTS 512
#define FIRST 6 /* keeper/wire.h VY_KEEPER_SLOT_MEMORY */

/* A keeper in a table: fd[slot] is its copy, live[slot] whether it holds it. */
typedef struct sink_table {
	int fd[SLOTS];
	bool live[SLOTS];
	uint32_t next; /* slots are never reused here: each add is told apart */
	uint64_t adds, drops, bad_drops;
	vy_keep_sink sink;
} sink_table;

static vy_keep_slot t_add(void *ctx, int fd)
{
	sink_table *t = ctx;
	if (t->next >= SLOTS)
		return 0;
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (copy < 0)
		return 0;
	t->fd[t->next] = copy;
	t->live[t->next] = true;
	t->adds++;
	return t->next++;
}

static void t_drop(void *ctx, vy_keep_slot slot)
{
	sink_table *t = ctx;
	if (slot >= SLOTS || !t->live[slot]) {
		t->bad_drops++;
		return;
	}
	t->live[slot] = false;
	if (t->fd[slot] >= 0)
		close(t->fd[slot]);
	t->fd[slot] = -1;
	t->drops++;
}

static void t_init(sink_table *t, uint32_t first)
{
	memset(t, 0, sizeof(*t));
	for (int i = 0; i < SLOTS; i++)
		t->fd[i] = -1;
	t->next = first;
	t->sink = (vy_keep_sink){.ctx = t, .add = t_add, .drop = t_drop};
}

static void t_close(sink_table *t)
{
	for (int i = 0; i < SLOTS; i++)
		if (t->fd[i] >= 0)
			close(t->fd[i]);
}

typedef struct side {
	vy_device *d;
	vy_telemetry tel;
	vy_store *s;
	sink_table t;
} side;

static bool side_open(side *x, uint32_t first_slot, bool keep)
{
	vy_error e;
	vy_store_options o = {.pool_cap = 0}; /* frees reach the device (and the sink) at once */
	vy_telemetry_init(&x->tel);
	t_init(&x->t, first_slot);
	if (vy_device_host_open(CAP, &x->d, &e) != VY_OK || vy_store_open(x->d, &x->tel, &o, &x->s, &e) != VY_OK ||
	    (keep && vy_store_keep(x->s, &x->t.sink, &e) != VY_OK)) {
		fprintf(stderr, "  side_open: %s\n", e.msg);
		return false;
	}
	return true;
}

static void side_close(side *x)
{
	CHECK(vy_store_close(x->s, NULL) == VY_OK);
	vy_device_close(x->d);
	t_close(&x->t);
}

static uint64_t used(side *x)
{
	uint64_t f, t;
	CHECK(x->d->ops->mem_info(x->d, &f, &t, NULL) == VY_OK);
	return t - f;
}

static vy_err zero(void *ctx, vy_dptr p, uint64_t bytes, vy_error *e)
{
	(void)ctx;
	(void)e;
	memset((void *)(uintptr_t)p, 0, (size_t)bytes);
	return VY_OK;
}

static vy_buffer_view view(side *x, vy_handle h)
{
	vy_buffer_view v = {0};
	CHECK(vy_store_view(x->s, h, &v, NULL) == VY_OK);
	return v;
}

static vy_err host_copy(void *ctx, vy_dptr dst, vy_dptr src, uint64_t len, vy_error *e)
{
	(void)ctx;
	(void)e;
	memcpy((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, (size_t)len);
	return VY_OK;
}

static void fill(side *x, vy_handle h, uint64_t off, uint64_t n, unsigned seed)
{
	vy_test_fill_pattern((char *)(uintptr_t)view(x, h).ptr + off, (size_t)n, seed);
}

enum { TINY_A, TINY_B, TINY_C, SMALL, ONE_MIB, MEMFD, TWO_MIB, GROWN, HOLED, PUNCHED, SHARED, BEFORE, NBUF };

/* Buffers of every shape; their bytes written. */
static bool make_all(side *x, vy_handle *h)
{
	vy_buffer_view v;
	uint64_t sizes[] = {[TINY_A] = 700, [TINY_B] = 800, [TINY_C] = 1000, [SMALL] = 300, [ONE_MIB] = MiB,
			    [MEMFD] = MiB + MiB / 2, [TWO_MIB] = 2 * MiB};
	for (int i = TINY_A; i <= TWO_MIB; i++) {
		if (vy_store_alloc(x->s, sizes[i], &h[i], NULL) != VY_OK)
			return false;
		fill(x, h[i], 0, sizes[i], (unsigned)i + 1);
	}
	if (vy_store_alloc(x->s, 2 * MiB, &h[GROWN], NULL) != VY_OK ||
	    vy_store_grow(x->s, h[GROWN], 5 * MiB, &v, NULL) != VY_OK)
		return false;
	fill(x, h[GROWN], 0, v.len, 20);
	if (vy_store_alloc_holes(x->s, 8 * MiB, &h[HOLED], NULL) != VY_OK ||
	    vy_store_back(x->s, h[HOLED], 2 * MiB + 5, 100, zero, NULL, &v, NULL) != VY_OK)
		return false;
	fill(x, h[HOLED], 2 * MiB + 5, 100, 21);
	if (vy_store_alloc(x->s, 2 * MiB, &h[PUNCHED], NULL) != VY_OK ||
	    vy_store_grow(x->s, h[PUNCHED], 4 * MiB, &v, NULL) != VY_OK ||
	    vy_store_grow(x->s, h[PUNCHED], 6 * MiB, &v, NULL) != VY_OK)
		return false;
	fill(x, h[PUNCHED], 0, v.len, 22);
	if (vy_store_punch(x->s, h[PUNCHED], 2 * MiB, 2 * MiB, &v, NULL) != VY_OK)
		return false;
	/* Moved to memory of its own (a mapping, a sequence): one granule
	 * for 900 bytes, which a successor must take as it is. (Its first
	 * slot was in the tiny ones' slab, which lives on.) */
	if (vy_store_alloc(x->s, 900, &h[SHARED], NULL) != VY_OK)
		return false;
	fill(x, h[SHARED], 0, 900, 23);
	return vy_store_share(x->s, h[SHARED], host_copy, NULL, NULL) == VY_OK;
}

static void *copy_of(side *x, vy_handle h)
{
	vy_buffer_view v = view(x, h);
	void *c = malloc((size_t)v.len);
	if (c)
		memcpy(c, (void *)(uintptr_t)v.ptr, (size_t)v.len);
	return c;
}

static bool all_zero(const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		if (c[i])
			return false;
	return true;
}

static void successor_gets_the_same_memory(void)
{
	side a, b;
	vy_handle h[NBUF], g[NBUF];
	static vy_keep_layout l[NBUF];
	void *bytes[NBUF] = {0};
	CHECK(side_open(&a, FIRST, false));
	/* Made before the keeper took the store: handed at vy_store_keep. */
	MUST(vy_store_alloc(a.s, 3 * MiB, &h[BEFORE], E));
	fill(&a, h[BEFORE], 0, 3 * MiB, 30);
	MUST(vy_store_keep(a.s, &a.t.sink, E));
	CHECK_EQ(a.t.adds, 1);
	CHECK(make_all(&a, h));
	for (int i = 0; i < NBUF; i++) {
		MUST(vy_store_keep_layout(a.s, h[i], &l[i], E));
		bytes[i] = copy_of(&a, h[i]);
		CHECK(bytes[i] != NULL);
	}
	/* Shapes as built: three tiny slots in one slab, apart. */
	CHECK_EQ(l[TINY_A].n, 1);
	CHECK_EQ(l[TINY_A].piece[0].slot, l[TINY_B].piece[0].slot);
	CHECK_EQ(l[TINY_B].piece[0].slot, l[TINY_C].piece[0].slot);
	CHECK_EQ(l[TINY_B].piece[0].at - l[TINY_A].piece[0].at, 1024);
	CHECK(l[SMALL].piece[0].slot != l[TINY_A].piece[0].slot);
	CHECK_EQ(l[MEMFD].piece[0].at, 0);
	CHECK_EQ(l[GROWN].n, 2);
	CHECK_EQ(l[GROWN].len, 6 * MiB);
	CHECK_EQ(l[HOLED].n, 1);
	CHECK_EQ(l[HOLED].piece[0].off, 2 * MiB);
	CHECK_EQ(l[PUNCHED].n, 2);
	CHECK_EQ(l[PUNCHED].piece[1].off, 4 * MiB);
	CHECK_EQ(l[SHARED].n, 1);
	CHECK_EQ(l[SHARED].len, 900);
	CHECK_EQ(l[SHARED].piece[0].bytes, 2 * MiB);
	/* The keeper holds exactly the live files' memory: every slot a
	 * layout names, nothing else (the zero granule and the punched piece
	 * were dropped). */
	bool named[SLOTS] = {0};
	unsigned nnamed = 0;
	for (int i = 0; i < NBUF; i++)
		for (uint32_t k = 0; k < l[i].n; k++)
			if (!named[l[i].piece[k].slot]) {
				named[l[i].piece[k].slot] = true;
				nnamed++;
			}
	unsigned nlive = 0;
	for (int s = 0; s < SLOTS; s++) {
		nlive += a.t.live[s];
		CHECK(a.t.live[s] == named[s]);
	}
	CHECK_EQ(nlive, nnamed);
	CHECK_EQ(a.t.drops, 2); /* the zero granule at its birth, the punched piece */
	CHECK_EQ(a.t.bad_drops, 0);
	vy_store_usage ua, ub;
	vy_store_usage_get(a.s, &ua);

	/* The successor: its own slots start past the first's. */
	CHECK(side_open(&b, SLOTS / 2, true));
	int fds_arr[SLOTS];
	vy_keep_fds fds = {.fd = fds_arr, .n = SLOTS};
	for (int s = 0; s < SLOTS; s++) {
		fds_arr[s] = a.t.fd[s] >= 0 ? fcntl(a.t.fd[s], F_DUPFD_CLOEXEC, 0) : -1;
		b.t.live[s] = fds_arr[s] >= 0; /* the keeper holds them (daemon/keeper_memory.c seeds so) */
	}
	for (int i = 0; i < NBUF; i++)
		MUST(vy_store_keep_adopt(b.s, &l[i], &fds, &g[i], E));
	for (int s = 0; s < SLOTS; s++)
		CHECK_EQ(fds_arr[s] >= 0, 0); /* every kept slot was some layout's */
	for (int i = 0; i < NBUF; i++) {
		vy_buffer_view v = view(&b, g[i]);
		CHECK_EQ(v.len, view(&a, h[i]).len);
		CHECK_EQ(v.alloc, view(&a, h[i]).alloc);
		CHECK_EQ(v.holes, view(&a, h[i]).holes);
		CHECK(memcmp((void *)(uintptr_t)v.ptr, bytes[i], (size_t)v.len) == 0);
		/* The same memory, not a copy: a write shows in the first. */
		((unsigned char *)(uintptr_t)v.ptr)[l[i].piece[0].off] ^= 0xff;
		CHECK(((unsigned char *)(uintptr_t)view(&a, h[i]).ptr)[l[i].piece[0].off] ==
		      (((unsigned char *)bytes[i])[l[i].piece[0].off] ^ 0xff));
	}
	vy_buffer_view hv = view(&b, g[HOLED]);
	CHECK(all_zero((void *)(uintptr_t)hv.ptr, 2 * MiB));
	CHECK(all_zero((void *)(uintptr_t)(hv.ptr + 4 * MiB), 4 * MiB));
	CHECK(all_zero((void *)(uintptr_t)(view(&b, g[PUNCHED]).ptr + 2 * MiB), 2 * MiB));
	CHECK(!vy_store_backed(b.s, g[HOLED], 0, 1));
	CHECK(vy_store_backed(b.s, g[HOLED], 2 * MiB, 2 * MiB));
	vy_store_usage_get(b.s, &ub);
	CHECK_EQ(ub.resident, ua.resident);
	CHECK_EQ(ub.buffers, ua.buffers);
	CHECK_EQ(used(&b), used(&a)); /* the device counts the same bytes (zeros included) */
	CHECK_EQ(b.t.adds, 1);  /* adopted memory is kept already; the zero granule, */
	CHECK_EQ(b.t.drops, 1); /* no file's, is dropped at once */

	/* A freed slab slot is reused; a new tiny one goes in an adopted slab. */
	vy_dptr was = view(&b, g[TINY_B]).ptr;
	MUST(vy_store_free(b.s, g[TINY_B], E));
	vy_handle n1;
	MUST(vy_store_alloc(b.s, 900, &n1, E));
	CHECK_EQ(view(&b, n1).ptr, was);
	CHECK_EQ(b.t.adds, 1);
	MUST(vy_store_free(b.s, n1, E));
	for (int i = 0; i < NBUF; i++)
		if (i != TINY_B)
			MUST(vy_store_free(b.s, g[i], E));
	vy_store_usage_get(b.s, &ub);
	CHECK_EQ(ub.resident, 0);
	CHECK_EQ(ub.buffers, 0);
	CHECK_EQ(used(&b), 0);
	/* Drops: exactly each dedicated allocation (the slabs stay: each is
	 * its class's only one with room). */
	unsigned dedicated = 0;
	for (int i = 0; i < NBUF; i++)
		for (uint32_t k = 0; k < l[i].n; k++)
			dedicated += l[i].piece[k].bytes > MiB;
	CHECK_EQ(b.t.drops, dedicated + 1);
	CHECK_EQ(b.t.bad_drops, 0);
	for (int i = 0; i < NBUF; i++)
		free(bytes[i]);
	side_close(&b);
	side_close(&a);
}

/* Refused layouts take no fd and change no count. */
static void bad_layouts_are_refused_whole(void)
{
	side a, b;
	vy_handle h[NBUF], g;
	static vy_keep_layout l[NBUF], bad;
	CHECK(side_open(&a, FIRST, true));
	MUST(vy_store_alloc(a.s, 2 * MiB, &h[BEFORE], E));
	CHECK(make_all(&a, h));
	for (int i = 0; i < NBUF; i++)
		MUST(vy_store_keep_layout(a.s, h[i], &l[i], E));
	CHECK(side_open(&b, SLOTS / 2, true));
	int fds_arr[SLOTS], before[SLOTS];
	vy_keep_fds fds = {.fd = fds_arr, .n = SLOTS};
	for (int s = 0; s < SLOTS; s++)
		before[s] = fds_arr[s] = a.t.fd[s] >= 0 ? fcntl(a.t.fd[s], F_DUPFD_CLOEXEC, 0) : -1;
	uint64_t used0 = used(&b);
	for (int kind = 0; kind < 7; kind++) {
		bad = kind < 3 ? l[GROWN] : kind < 5 ? l[TWO_MIB] : l[TINY_A];
		if (kind == 0)
			bad.piece[1].slot = SLOTS - 1; /* not handed; piece 0 adopted first, then given back */
		else if (kind == 1)
			bad.piece[1].off = 1 * MiB; /* overlaps piece 0 */
		else if (kind == 2)
			bad.n = VY_CHUNKS_MAX + 1;
		else if (kind == 3)
			bad.piece[0].bytes = bad.len = 4 * MiB; /* past the allocation's size */
		else if (kind == 4)
			bad.piece[0].slot = l[TINY_A].piece[0].slot; /* a slab, as a 2 MiB allocation */
		else if (kind == 5)
			bad.piece[0].at += 1; /* not a slot's start */
		else
			bad.piece[0].slot = 0;
		MUST_FAIL(VY_EINVAL, vy_store_keep_adopt(b.s, &bad, &fds, &g, E));
		for (int s = 0; s < SLOTS; s++)
			CHECK_EQ(fds_arr[s], before[s]);
		CHECK_EQ(used(&b), used0);
	}
	/* A slab slot adopted twice: the second is refused, the first stays. */
	MUST(vy_store_keep_adopt(b.s, &l[TINY_A], &fds, &g, E));
	MUST_FAIL(VY_EINVAL, vy_store_keep_adopt(b.s, &l[TINY_A], &fds, &g, E));
	vy_store_usage u;
	vy_store_usage_get(b.s, &u);
	CHECK_EQ(u.buffers, 1);
	CHECK_EQ(u.resident, 700);
	/* Without vy_store_keep a store adopts nothing. */
	side c;
	CHECK(side_open(&c, SLOTS / 2, false));
	MUST_FAIL(VY_EINVAL, vy_store_keep_adopt(c.s, &l[TWO_MIB], &fds, &g, E));
	side_close(&c);
	for (int s = 0; s < SLOTS; s++)
		if (fds_arr[s] >= 0)
			close(fds_arr[s]);
	side_close(&b);
	side_close(&a);
}

/* The granule every hole maps is no file's: handed, then dropped at once;
 * a buffer of holes only is a layout of no piece, and comes back so. */
static void zeros_are_never_kept(void)
{
	side a, b;
	vy_handle h, g;
	vy_keep_layout l;
	CHECK(side_open(&a, FIRST, true));
	MUST(vy_store_alloc_holes(a.s, 4 * MiB, &h, E));
	CHECK_EQ(a.t.adds, 1);
	CHECK_EQ(a.t.drops, 1);
	MUST(vy_store_keep_layout(a.s, h, &l, E));
	CHECK_EQ(l.n, 0);
	CHECK_EQ(l.len, 4 * MiB);
	CHECK(side_open(&b, SLOTS / 2, true));
	vy_keep_fds none = {.fd = NULL, .n = 0};
	MUST(vy_store_keep_adopt(b.s, &l, &none, &g, E));
	vy_buffer_view v = view(&b, g);
	CHECK_EQ(v.len, 4 * MiB);
	CHECK_EQ(v.holes, 4 * MiB);
	CHECK(all_zero((void *)(uintptr_t)v.ptr, (size_t)v.len));
	CHECK_EQ(b.t.live[SLOTS / 2], false);
	side_close(&b);
	side_close(&a);
}

/* Memory the keeper could not take: the layout says so. */
static void unkept_memory_has_no_layout(void)
{
	side a;
	vy_handle h;
	vy_keep_layout l;
	CHECK(side_open(&a, SLOTS, true)); /* a full table: every add fails */
	MUST(vy_store_alloc(a.s, 3 * MiB, &h, E));
	MUST_FAIL(VY_ENOTSUP, vy_store_keep_layout(a.s, h, &l, E));
	MUST_FAIL(VY_EINVAL, vy_store_keep(a.s, &a.t.sink, E)); /* once */
	side_close(&a);
}

/* Placement (core/store.h): a buffer whose byte 0 sits `lead` bytes into
 * its memory shows the buffer's bytes only (ptr, len, seek, holes and
 * shrinking count from byte 0), keeps the lead through growth and a
 * move to memory of its own, and a successor adopts it placed. */
static void placed_buffers_keep_their_lead(void)
{
	side a, b;
	CHECK(side_open(&a, FIRST, true));
	vy_handle big, small, sparse;
	vy_buffer_view v;
	MUST(vy_store_alloc_placed(a.s, 2 * MiB, 4088, &big, E)); /* 2 MiB + 4088: two granules */
	v = view(&a, big);
	CHECK_EQ(v.lead, 4088);
	CHECK_EQ(v.len, 2 * MiB);
	CHECK_EQ(v.alloc, 4 * MiB);
	CHECK_EQ((v.ptr - v.lead) % 4096, 0); /* the memory starts on a page */
	CHECK_EQ((v.ptr + 8) % 4096, 0); /* a safetensors data section at byte 8 lands on a page */
	fill(&a, big, 0, 2 * MiB, 40);
	MUST(vy_store_grow(a.s, big, 5 * MiB, &v, E));
	CHECK_EQ(v.lead, 4088);
	CHECK_EQ((v.ptr - v.lead) % 4096, 0); /* the memory starts on a page */
	CHECK(v.len >= 5 * MiB);
	CHECK_EQ((v.len + v.lead) % (2 * MiB), 0);
	CHECK_EQ(vy_store_seek(a.s, big, 7, false), v.len); /* no hole: the end, in the buffer's bytes */
	MUST(vy_store_shrink(a.s, big, 3 * MiB, &v, E));
	CHECK_EQ(v.len + v.lead, 4 * MiB); /* 3 MiB + the lead fit two granules */
	MUST_FAIL(VY_EINVAL, vy_store_alloc_placed(a.s, 100, VY_STORE_LEAD_MAX + 1, &small, E));
	MUST(vy_store_alloc_placed(a.s, 100, 3000, &small, E));
	fill(&a, small, 0, 100, 41);
	MUST(vy_store_share(a.s, small, host_copy, NULL, E)); /* moves with its lead and bytes */
	v = view(&a, small);
	CHECK_EQ(v.lead, 3000);
	CHECK_EQ(v.len, 100);
	/* Holes count from byte 0: backing the buffer's bytes 0..9 backs the
	 * granule that holds the lead too. */
	MUST(vy_store_alloc_holes_placed(a.s, 6 * MiB, 100, &sparse, E));
	CHECK(!vy_store_backed(a.s, sparse, 0, 1));
	CHECK_EQ(vy_store_seek(a.s, sparse, 0, true), UINT64_MAX);
	MUST(vy_store_back(a.s, sparse, 2 * MiB, 10, zero, NULL, &v, E));
	CHECK_EQ(vy_store_seek(a.s, sparse, 0, true), 2 * MiB - 100); /* the granule at 2 MiB of memory */
	CHECK_EQ(vy_store_seek(a.s, sparse, 2 * MiB, false), 4 * MiB - 100);
	CHECK(vy_store_backed(a.s, sparse, 2 * MiB - 100, 2 * MiB));
	static vy_keep_layout l[3];
	vy_handle h[3] = {big, small, sparse}, g[3];
	void *bytes[3];
	for (int i = 0; i < 3; i++) {
		MUST(vy_store_keep_layout(a.s, h[i], &l[i], E));
		CHECK_EQ(l[i].lead, view(&a, h[i]).lead);
		CHECK_EQ(l[i].len, view(&a, h[i]).len + l[i].lead);
		bytes[i] = copy_of(&a, h[i]);
	}
	CHECK(side_open(&b, SLOTS / 2, true));
	int fds_arr[SLOTS];
	vy_keep_fds fds = {.fd = fds_arr, .n = SLOTS};
	for (int s = 0; s < SLOTS; s++) {
		fds_arr[s] = a.t.fd[s] >= 0 ? fcntl(a.t.fd[s], F_DUPFD_CLOEXEC, 0) : -1;
		b.t.live[s] = fds_arr[s] >= 0;
	}
	for (int i = 0; i < 3; i++) {
		MUST(vy_store_keep_adopt(b.s, &l[i], &fds, &g[i], E));
		vy_buffer_view va = view(&a, h[i]), vb = view(&b, g[i]);
		CHECK_EQ(vb.lead, va.lead);
		CHECK_EQ(vb.len, va.len);
		CHECK_EQ(vb.holes, va.holes);
		CHECK_EQ((vb.ptr - vb.lead) % 4096, 0);
		CHECK(memcmp((void *)(uintptr_t)vb.ptr, bytes[i], (size_t)vb.len) == 0);
		free(bytes[i]);
	}
	/* A lead past what the store places, or no byte past it: refused. */
	vy_keep_layout bad = l[0];
	bad.lead = VY_STORE_LEAD_MAX + 1;
	MUST_FAIL(VY_EINVAL, vy_store_keep_adopt(b.s, &bad, &fds, &g[0], E));
	bad.lead = (uint32_t)bad.len;
	MUST_FAIL(VY_EINVAL, vy_store_keep_adopt(b.s, &bad, &fds, &g[0], E));
	for (int s = 0; s < SLOTS; s++)
		if (fds_arr[s] >= 0)
			close(fds_arr[s]);
	side_close(&b);
	side_close(&a);
}

int main(void)
{
	static const vy_test_case cases[] = {
		HOST_ONLY(successor_gets_the_same_memory),
		HOST_ONLY(bad_layouts_are_refused_whole),
		HOST_ONLY(zeros_are_never_kept),
		HOST_ONLY(unkept_memory_has_no_layout),
		HOST_ONLY(placed_buffers_keep_their_lead),
	};
	return vy_test_main("store_keep", cases, sizeof(cases) / sizeof(cases[0]));
}
