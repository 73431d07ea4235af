/* Small allocations in slabs (core/slab.h), over the host backend's memfd
 * backing (core/host_slab.c) and over a counting one: each class's slots
 * are aligned to their size and never overlap; bytes written through a
 * slot are in its slab's memfd (what a keeper would hold); an address that
 * is not a live slot (inside one, past the last, freed, foreign) is
 * refused and changes nothing; an empty slab goes unless it is its class's
 * only one with room, and its memory goes with it exactly once; a backing
 * that cannot make memory fails the allocation with its errno; a
 * successor's adopted slots are taken once, and undoing the last gives the
 * slab's memory back to the caller, not to `unmake`. */
#include "core/host_impl.h"
#include "tests/unit/support.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLAB (2u << 20)

/* A backing of aligned heap memory that counts what it made and unmade,
 * and fails its next make when told. */
typedef struct counting {
	int made, unmade, fail;
	int64_t next_handle;
} counting;

static int c_make(void *ctx, uint64_t bytes, uint64_t *base, int64_t *handle)
{
	counting *c = ctx;
	if (c->fail)
		return c->fail;
	void *p = aligned_alloc((size_t)bytes, (size_t)bytes);
	if (!p)
		return ENOMEM;
	*base = (uint64_t)(uintptr_t)p;
	*handle = ++c->next_handle;
	c->made++;
	return 0;
}

static void c_unmake(void *ctx, uint64_t base, int64_t handle)
{
	counting *c = ctx;
	(void)handle;
	free((void *)(uintptr_t)base);
	c->unmade++;
}

static void init_counting(vy_slabs *s, counting *c)
{
	*c = (counting){0};
	CHECK(vy_slabs_init(s, SLAB, &(vy_slab_backing){.ctx = c, .make = c_make, .unmake = c_unmake}));
}

static void slots_are_aligned_and_apart(void)
{
	vy_slabs s;
	counting k;
	init_counting(&s, &k);
	CHECK(!vy_slabs_take(&s, 0));
	CHECK(vy_slabs_take(&s, 1));
	CHECK(vy_slabs_take(&s, 1u << 20));
	CHECK(!vy_slabs_take(&s, (1u << 20) + 1));
	uint64_t a = vy_slabs_alloc(&s, 1), b = vy_slabs_alloc(&s, 256), c = vy_slabs_alloc(&s, 257);
	CHECK(a && b && c);
	CHECK_EQ(a % 256, 0);
	CHECK_EQ(c % 512, 0);
	CHECK_EQ(b - a, 256);                      /* one class, one slab, next slot */
	CHECK_EQ(s.slabs, 2);                      /* 256 B and 512 B classes */
	CHECK_EQ(k.made, 2);
	for (int i = 0; i < 2; i++)
		CHECK(vy_slabs_alloc(&s, 1u << 20) != 0);
	CHECK_EQ(s.slabs, 3);                      /* two 1 MiB slots fill one slab */
	CHECK(vy_slabs_alloc(&s, 1u << 20) != 0);
	CHECK_EQ(s.slabs, 4);
	errno = 0;
	CHECK(vy_slabs_alloc(&s, (1u << 20) + 1) == 0);
	CHECK_EQ(errno, EINVAL);
	CHECK_EQ(k.made, 4);
	vy_slabs_destroy(&s);
	CHECK_EQ(s.slabs, 0);
	CHECK_EQ(k.unmade, 4);                     /* every slab's memory, once */
}

static void bytes_live_in_the_memfd(void)
{
	vy_slabs s;
	CHECK(vy_host_slabs_init(&s, SLAB));
	uint64_t a = vy_slabs_alloc(&s, 4000);
	CHECK(a != 0);
	memset((void *)(uintptr_t)a, 0x5c, 4000);
	size_t cur = 0, n = 0;
	int64_t fd = -1;
	uint64_t base = 0;
	for (int64_t f; vy_slabs_next(&s, &cur, &f, &base); n++)
		fd = f;
	CHECK_EQ(n, 1);
	struct stat st;
	CHECK(fstat((int)fd, &st) == 0 && st.st_size == SLAB);
	unsigned char back[4000];
	CHECK_EQ(pread((int)fd, back, sizeof(back), (off_t)(a - base)), (ssize_t)sizeof(back));
	CHECK(memcmp(back, (void *)(uintptr_t)a, sizeof(back)) == 0);
	vy_slabs_destroy(&s);
	CHECK(fcntl((int)fd, F_GETFD) < 0);       /* the memfd went with it */
}

static void only_live_slots_are_freed(void)
{
	vy_slabs s;
	counting k;
	init_counting(&s, &k);
	uint64_t a = vy_slabs_alloc(&s, 300), b = vy_slabs_alloc(&s, 300);
	CHECK(a && b);
	int local;
	uint32_t gone = 99;
	CHECK(!vy_slabs_free(&s, a + 1, NULL));    /* inside a slot */
	CHECK(!vy_slabs_free(&s, a + 1024, NULL)); /* a slot not taken */
	CHECK(!vy_slabs_free(&s, (uint64_t)(uintptr_t)&local, &gone)); /* not a slab's */
	CHECK_EQ(gone, 0);
	CHECK(!vy_slabs_free(&s, 0, NULL));
	CHECK(vy_slabs_free(&s, a, NULL));
	CHECK(!vy_slabs_free(&s, a, NULL));        /* twice */
	CHECK_EQ(s.slabs, 1);
	CHECK(vy_slabs_alloc(&s, 300) == a);       /* the freed slot again */
	vy_slabs_destroy(&s);
}

static void an_empty_slab_goes_unless_it_is_the_last_with_room(void)
{
	vy_slabs s;
	counting k;
	init_counting(&s, &k);
	uint64_t x = vy_slabs_alloc(&s, 1u << 20), y = vy_slabs_alloc(&s, 1u << 20);
	uint64_t z = vy_slabs_alloc(&s, 1u << 20); /* a second slab */
	CHECK(x && y && z);
	CHECK_EQ(s.slabs, 2);
	int64_t h;
	uint64_t base;
	*vy_slabs_tag(&s, x, &h, &base) = 7;       /* the owner's word for the first slab */
	CHECK_EQ(base, x);
	uint32_t gone = 99;
	CHECK(vy_slabs_free(&s, z, &gone));        /* empty, but the only one with room */
	CHECK_EQ(s.slabs, 2);
	CHECK_EQ(gone, 0);
	CHECK(vy_slabs_free(&s, x, &gone));        /* now the first has room too */
	CHECK_EQ(s.slabs, 2);
	CHECK(vy_slabs_free(&s, y, &gone));        /* empty, and another has room: it goes */
	CHECK_EQ(s.slabs, 1);
	CHECK_EQ(gone, 7);
	CHECK_EQ(k.unmade, 1);
	CHECK(vy_slabs_tag(&s, x, &h, &base) == NULL);
	/* A loop of one small file made and removed keeps its slab. */
	for (int i = 0; i < 1000; i++) {
		uint64_t p = vy_slabs_alloc(&s, 700);
		CHECK(p != 0 && vy_slabs_free(&s, p, NULL));
	}
	CHECK_EQ(s.slabs, 2);
	CHECK_EQ(k.made, 3);
	vy_slabs_destroy(&s);
	CHECK_EQ(k.unmade, 3);
}

static void empty_slabs_are_counted(void)
{
	vy_slabs s;
	counting k;
	init_counting(&s, &k);
	uint64_t a = vy_slabs_alloc(&s, 700), b = vy_slabs_alloc(&s, 700);
	CHECK_EQ(s.empty, 0);
	CHECK(vy_slabs_free(&s, a, NULL));
	CHECK_EQ(s.empty, 0);                      /* b still in it */
	CHECK(vy_slabs_free(&s, b, NULL));
	CHECK_EQ(s.slabs, 1);                      /* its class's only one: it stays */
	CHECK_EQ(s.empty, 1);
	uint64_t c = vy_slabs_alloc(&s, 1000);     /* used again: no memory made */
	CHECK_EQ(s.empty, 0);
	CHECK_EQ(k.made, 1);
	uint64_t x = vy_slabs_alloc(&s, 1u << 20), y = vy_slabs_alloc(&s, 1u << 20), z = vy_slabs_alloc(&s, 1u << 20);
	CHECK(vy_slabs_free(&s, z, NULL));         /* the 1 MiB class's only one with room */
	CHECK_EQ(s.empty, 1);
	CHECK(vy_slabs_free(&s, x, NULL));
	CHECK(vy_slabs_free(&s, y, NULL));         /* another has room: this one goes */
	CHECK_EQ(s.empty, 1);
	CHECK_EQ(s.slabs, 2);
	/* Adopted slots: an undone one never counts as empty. */
	uint64_t base = 0;
	int64_t h;
	CHECK(vy_slabs_free(&s, c, NULL));
	CHECK_EQ(s.empty, 2);
	void *mem = aligned_alloc(SLAB, SLAB);
	CHECK(mem != NULL);
	uint64_t p = vy_slabs_adopt(&s, (uint64_t)(uintptr_t)mem, 3, 0, 0, 4096);
	CHECK(p != 0);
	CHECK_EQ(s.empty, 2);
	CHECK(vy_slabs_unadopt(&s, p, &base, &h));
	CHECK_EQ(s.empty, 2);
	free(mem);
	vy_slabs_destroy(&s);
	CHECK_EQ(k.unmade, 3);
}

static void a_backing_that_fails_fails_the_allocation(void)
{
	vy_slabs s;
	counting k;
	init_counting(&s, &k);
	k.fail = EMFILE;
	errno = 0;
	CHECK(vy_slabs_alloc(&s, 100) == 0);
	CHECK_EQ(errno, EMFILE);
	CHECK_EQ(s.slabs, 0);
	k.fail = 0;
	CHECK(vy_slabs_alloc(&s, 100) != 0);
	CHECK_EQ(s.slabs, 1);
	vy_slabs_destroy(&s);
	CHECK_EQ(k.unmade, 1);
	/* A size that is not a power of two, or too small, takes nothing. */
	CHECK(!vy_slabs_init(&s, 3u << 20, &(vy_slab_backing){.ctx = &k, .make = c_make, .unmake = c_unmake}));
	CHECK(!vy_slabs_take(&s, 100));
	CHECK(vy_slabs_alloc(&s, 100) == 0);
	vy_slabs_destroy(&s);
}

static void adopted_slots_are_taken_once_and_undone(void)
{
	vy_slabs s;
	counting k;
	init_counting(&s, &k);
	void *mem = aligned_alloc(SLAB, SLAB); /* what a successor mapped */
	CHECK(mem != NULL);
	uint64_t base = (uint64_t)(uintptr_t)mem;
	errno = 0;
	CHECK(vy_slabs_adopt(&s, base + 4096, 5, 9, 0, 4096) == 0); /* not aligned */
	CHECK_EQ(errno, EINVAL);
	CHECK(vy_slabs_adopt(&s, base, 5, 9, 4096, 4096) == base + 4096);
	CHECK(vy_slabs_adopt(&s, base, -1, 0, 8192, 4000) == base + 8192); /* found by base */
	CHECK(vy_slabs_adopt(&s, base, -1, 0, 4096, 4096) == 0);  /* taken */
	CHECK(vy_slabs_adopt(&s, base, -1, 0, 0, 256) == 0);      /* another class */
	CHECK(vy_slabs_adopt(&s, base, -1, 0, 100, 4096) == 0);   /* inside a slot */
	CHECK(vy_slabs_adopt(&s, base, -1, 0, SLAB, 4096) == 0);  /* past the last */
	CHECK_EQ(s.slabs, 1);
	int64_t h;
	uint64_t b;
	CHECK_EQ(*vy_slabs_tag(&s, base + 8192, &h, &b), 9);
	CHECK_EQ(h, 5);
	/* A new slot of that class comes from the adopted slab. */
	uint64_t n = vy_slabs_alloc(&s, 4096);
	CHECK(n >= base && n < base + SLAB && n != base + 4096 && n != base + 8192);
	CHECK(vy_slabs_free(&s, n, NULL));
	CHECK(!vy_slabs_unadopt(&s, base + 4096, &b, &h));      /* one slot left */
	CHECK(vy_slabs_unadopt(&s, base + 8192, &b, &h));       /* the last: the caller's */
	CHECK_EQ(b, base);
	CHECK_EQ(h, 5);
	CHECK_EQ(s.slabs, 0);
	CHECK_EQ(k.made, 0);
	CHECK_EQ(k.unmade, 0);
	free(mem);
	vy_slabs_destroy(&s);
}

/* statfs's available (core/store.c vy_store_room): the largest size whose
 * allocation fits the room left, so a file of it fits and one of a block
 * more does not. cuda while kept: whole granules past slab_max, so under a
 * granule only a slot of a class fits (what posix2's df test found: 2 MiB
 * less 4 KiB said available, a granule needed). */
static void the_largest_fit_is_what_fits(void)
{
	static const vy_device_share_ops some = {0};
	vy_device kept = {.share = &some, .whole_granules = true, .slab_max = VY_SLAB_MAX};
	kept.info.share_granularity = SLAB;
	vy_device plain = kept;
	plain.whole_granules = false;
	plain.slab_max = 0;
	CHECK_EQ(vy_device_largest_fit(&kept, SLAB - 4096), VY_SLAB_MAX);
	CHECK_EQ(vy_device_largest_fit(&kept, 3ull * SLAB + 5), 3ull * SLAB);
	CHECK_EQ(vy_device_largest_fit(&kept, VY_SLAB_MIN - 1), 0);
	CHECK_EQ(vy_device_largest_fit(&kept, VY_SLAB_MIN), VY_SLAB_MIN);
	CHECK_EQ(vy_device_largest_fit(&kept, 5000), 4096);
	CHECK_EQ(vy_device_largest_fit(&plain, SLAB - 4096), SLAB - 4096);
	CHECK_EQ(vy_device_largest_fit(&plain, 3ull * SLAB + 5), 3ull * SLAB);
	const vy_device *devs[] = {&kept, &plain};
	for (int d = 0; d < 2; d++)
		for (uint64_t room = 0; room < 5ull * SLAB; room += 4093) {
			uint64_t fit = vy_device_largest_fit(devs[d], room);
			CHECK(vy_device_alloc_size(devs[d], fit) <= room);
			CHECK(vy_device_alloc_size(devs[d], fit + 1) > room);
		}
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(slots_are_aligned_and_apart),
		TEST_CASE(bytes_live_in_the_memfd),
		TEST_CASE(only_live_slots_are_freed),
		TEST_CASE(an_empty_slab_goes_unless_it_is_the_last_with_room),
		TEST_CASE(empty_slabs_are_counted),
		TEST_CASE(a_backing_that_fails_fails_the_allocation),
		TEST_CASE(adopted_slots_are_taken_once_and_undone),
		TEST_CASE(the_largest_fit_is_what_fits),
	};
	return vy_test_main("slab", cases, sizeof(cases) / sizeof(cases[0]));
}
