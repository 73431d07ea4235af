/* The host backend's small allocations in memfd slabs: each class's slots
 * are aligned to their size and never overlap; bytes written through a
 * slot are in its slab's memfd (what a keeper would hold); a pointer that
 * is not a live slot (inside one, past the last, freed, foreign) is
 * refused and changes nothing; an empty slab goes unless it is its class's
 * only one with room; every slab's fd is listed once. */
#include "core/host_slab.h"
#include "tests/unit/support.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define SLAB (2u << 20)

static void slots_are_aligned_and_apart(void)
{
	vy_host_slabs s;
	CHECK(vy_host_slabs_init(&s, SLAB));
	CHECK(!vy_host_slabs_take(&s, 0));
	CHECK(vy_host_slabs_take(&s, 1));
	CHECK(vy_host_slabs_take(&s, 1u << 20));
	CHECK(!vy_host_slabs_take(&s, (1u << 20) + 1));
	unsigned char *a = vy_host_slabs_alloc(&s, 1), *b = vy_host_slabs_alloc(&s, 256), *c = vy_host_slabs_alloc(&s, 257);
	CHECK(a && b && c);
	CHECK_EQ((uintptr_t)a % 256, 0);
	CHECK_EQ((uintptr_t)c % 512, 0);
	CHECK_EQ(b - a, 256);                      /* one class, one slab, next slot */
	CHECK_EQ(s.slabs, 2);                      /* 256 B and 512 B classes */
	unsigned char *big[2];
	for (int i = 0; i < 2; i++)
		CHECK((big[i] = vy_host_slabs_alloc(&s, 1u << 20)) != NULL);
	CHECK_EQ(s.slabs, 3);                      /* two 1 MiB slots fill one slab */
	CHECK(vy_host_slabs_alloc(&s, 1u << 20) != NULL);
	CHECK_EQ(s.slabs, 4);
	CHECK(vy_host_slabs_alloc(&s, (1u << 20) + 1) == NULL);
	vy_host_slabs_destroy(&s);
	CHECK_EQ(s.slabs, 0);
}

static void bytes_live_in_the_memfd(void)
{
	vy_host_slabs s;
	CHECK(vy_host_slabs_init(&s, SLAB));
	unsigned char *a = vy_host_slabs_alloc(&s, 4000);
	CHECK(a != NULL);
	memset(a, 0x5c, 4000);
	size_t cur = 0, n = 0;
	int fd = -1;
	uint64_t base = 0;
	for (int f; vy_host_slabs_next(&s, &cur, &f, &base); n++)
		fd = f;
	CHECK_EQ(n, 1);
	struct stat st;
	CHECK(fstat(fd, &st) == 0 && st.st_size == SLAB);
	unsigned char back[4000];
	CHECK_EQ(pread(fd, back, sizeof(back), (off_t)((uintptr_t)a - base)), (ssize_t)sizeof(back));
	CHECK(memcmp(back, a, sizeof(back)) == 0);
	vy_host_slabs_destroy(&s);
}

static void only_live_slots_are_freed(void)
{
	vy_host_slabs s;
	CHECK(vy_host_slabs_init(&s, SLAB));
	unsigned char *a = vy_host_slabs_alloc(&s, 300), *b = vy_host_slabs_alloc(&s, 300);
	CHECK(a && b);
	int local;
	CHECK(!vy_host_slabs_free(&s, a + 1));     /* inside a slot */
	CHECK(!vy_host_slabs_free(&s, a + 1024));  /* a slot not taken */
	CHECK(!vy_host_slabs_free(&s, &local));    /* not a slab's */
	CHECK(!vy_host_slabs_free(&s, NULL));
	CHECK(vy_host_slabs_free(&s, a));
	CHECK(!vy_host_slabs_free(&s, a));         /* twice */
	CHECK_EQ(s.slabs, 1);
	CHECK(vy_host_slabs_alloc(&s, 300) == a);  /* the freed slot again */
	vy_host_slabs_destroy(&s);
}

static void an_empty_slab_goes_unless_it_is_the_last_with_room(void)
{
	vy_host_slabs s;
	CHECK(vy_host_slabs_init(&s, SLAB));
	void *x = vy_host_slabs_alloc(&s, 1u << 20), *y = vy_host_slabs_alloc(&s, 1u << 20);
	void *z = vy_host_slabs_alloc(&s, 1u << 20);  /* a second slab */
	CHECK(x && y && z);
	CHECK_EQ(s.slabs, 2);
	CHECK(vy_host_slabs_free(&s, z));            /* empty, but the only one with room */
	CHECK_EQ(s.slabs, 2);
	CHECK(vy_host_slabs_free(&s, x));            /* now the first has room too */
	CHECK_EQ(s.slabs, 2);
	CHECK(vy_host_slabs_free(&s, y));            /* empty, and another has room: it goes */
	CHECK_EQ(s.slabs, 1);
	/* A loop of one small file made and removed keeps its slab. */
	for (int i = 0; i < 1000; i++) {
		void *p = vy_host_slabs_alloc(&s, 700);
		CHECK(p != NULL && vy_host_slabs_free(&s, p));
	}
	CHECK_EQ(s.slabs, 2);
	vy_host_slabs_destroy(&s);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(slots_are_aligned_and_apart),
		TEST_CASE(bytes_live_in_the_memfd),
		TEST_CASE(only_live_slots_are_freed),
		TEST_CASE(an_empty_slab_goes_unless_it_is_the_last_with_room),
	};
	return vy_test_main("host_slab", cases, sizeof(cases) / sizeof(cases[0]));
}
