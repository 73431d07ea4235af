/* The u64 -> pointer map: put/get/remove, replace, key 0, growth, iteration,
 * and backward-shift deletion under collisions and wrap-around, checked
 * against a reference array after every operation. */
#include "core/u64map.h"
#include "tests/unit/support.h"

#include <stdlib.h>

static void *val(uint64_t x)
{
	return (void *)(uintptr_t)x;
}

/* The slot a key sits in, or cap if it is in none (the struct is public). */
static size_t slot_index(const vy_u64map *m, uint64_t key)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key == key)
			return i;
	return m->cap;
}

/* Grow `m` to a capacity of at least `cap` slots and leave it empty: the
 * capacity never shrinks, so later puts probe a table of known size. */
static bool pregrow_empty(vy_u64map *m, size_t cap)
{
	uint64_t n = cap * 3 / 4 - 1; /* stays under the load limit of `cap` */
	for (uint64_t k = 1; k <= n; k++)
		if (!vy_u64map_put(m, k, val(k)))
			return false;
	for (uint64_t k = 1; k <= n; k++)
		if (vy_u64map_remove(m, k) != val(k))
			return false;
	return m->count == 0 && m->cap >= cap;
}

/* In an empty map, a key lands on its home slot: find `want` keys (from
 * candidates `seed`, `seed`+step, ...) whose home is `home`. */
static size_t keys_homed_at(vy_u64map *m, size_t home, uint64_t seed, uint64_t step, uint64_t *out, size_t want)
{
	size_t got = 0;
	for (uint64_t k = seed, tries = 0; got < want && tries < 10000000; k += step, tries++) {
		if (k == 0 || !vy_u64map_put(m, k, val(1)))
			continue;
		if (slot_index(m, k) == home)
			out[got++] = k;
		vy_u64map_remove(m, k);
	}
	return got;
}

static void put_get_remove(void)
{
	vy_u64map m;
	vy_u64map_init(&m);
	CHECK(vy_u64map_get(&m, 1) == NULL); /* before the first insert */
	CHECK(vy_u64map_remove(&m, 1) == NULL);
	CHECK_EQ(m.count, 0);
	CHECK(vy_u64map_put(&m, 7, val(70)));
	CHECK(vy_u64map_put(&m, 8, val(80)));
	CHECK(vy_u64map_put(&m, UINT64_MAX, val(90)));
	CHECK_EQ(m.count, 3);
	CHECK(vy_u64map_get(&m, 7) == val(70));
	CHECK(vy_u64map_get(&m, 8) == val(80));
	CHECK(vy_u64map_get(&m, UINT64_MAX) == val(90));
	CHECK(vy_u64map_get(&m, 9) == NULL);
	CHECK(vy_u64map_remove(&m, 8) == val(80));
	CHECK_EQ(m.count, 2);
	CHECK(vy_u64map_get(&m, 8) == NULL);
	CHECK(vy_u64map_remove(&m, 8) == NULL); /* already gone */
	CHECK(vy_u64map_remove(&m, 12345) == NULL);
	CHECK_EQ(m.count, 2);
	CHECK(vy_u64map_get(&m, 7) == val(70));
	CHECK(vy_u64map_get(&m, UINT64_MAX) == val(90));
	/* A NULL value is stored like any other. */
	CHECK(vy_u64map_put(&m, 5, NULL));
	CHECK_EQ(m.count, 3);
	CHECK(vy_u64map_remove(&m, 5) == NULL);
	CHECK_EQ(m.count, 2);
	vy_u64map_destroy(&m);
	CHECK_EQ(m.count, 0);
	CHECK_EQ(m.cap, 0);
	CHECK(m.slots == NULL);
	CHECK(vy_u64map_get(&m, 7) == NULL); /* destroyed is empty and usable */
	CHECK(vy_u64map_put(&m, 7, val(1)));
	CHECK(vy_u64map_get(&m, 7) == val(1));
	vy_u64map_destroy(&m);
}

static void replace_keeps_one_entry(void)
{
	vy_u64map m;
	vy_u64map_init(&m);
	CHECK(vy_u64map_put(&m, 42, val(1)));
	CHECK(vy_u64map_put(&m, 42, val(2)));
	CHECK_EQ(m.count, 1);
	CHECK(vy_u64map_get(&m, 42) == val(2));
	size_t seen = 0, i = 0;
	uint64_t k;
	void *v;
	while (vy_u64map_next(&m, &i, &k, &v)) {
		CHECK_EQ(k, 42);
		CHECK(v == val(2));
		seen++;
	}
	CHECK_EQ(seen, 1);
	CHECK(vy_u64map_remove(&m, 42) == val(2));
	CHECK_EQ(m.count, 0);
	CHECK(vy_u64map_get(&m, 42) == NULL);
	vy_u64map_destroy(&m);
}

static void key_zero_refused(void)
{
	vy_u64map m;
	vy_u64map_init(&m);
	CHECK(!vy_u64map_put(&m, 0, val(1))); /* on an empty map */
	CHECK_EQ(m.count, 0);
	CHECK(vy_u64map_get(&m, 0) == NULL);
	CHECK(vy_u64map_remove(&m, 0) == NULL);
	CHECK(vy_u64map_put(&m, 3, val(3)));
	CHECK(!vy_u64map_put(&m, 0, val(1))); /* and on a non-empty one */
	CHECK_EQ(m.count, 1);
	CHECK(vy_u64map_get(&m, 0) == NULL);
	CHECK(vy_u64map_remove(&m, 0) == NULL);
	CHECK_EQ(m.count, 1);
	CHECK(vy_u64map_get(&m, 3) == val(3));
	vy_u64map_destroy(&m);
}

static void growth_through_many_resizes(void)
{
	enum { N = 100000 };
	vy_u64map m;
	vy_u64map_init(&m);
	size_t resizes = 0, cap = 0;
	for (uint64_t k = 1; k <= N; k++) {
		CHECK(vy_u64map_put(&m, k * 3, val(k)));
		if (m.cap != cap) {
			resizes++;
			cap = m.cap;
		}
	}
	CHECK(resizes >= 12); /* 16 .. 131072 */
	CHECK_EQ(m.count, N);
	CHECK((m.cap & (m.cap - 1)) == 0);
	CHECK(m.count * 4 <= m.cap * 3); /* load stays under 3/4 */
	size_t bad = 0;
	for (uint64_t k = 1; k <= N; k++)
		bad += vy_u64map_get(&m, k * 3) != val(k);
	CHECK_EQ(bad, 0);
	bad = 0;
	for (uint64_t k = 1; k <= N; k++)
		bad += vy_u64map_get(&m, k * 3 + 1) != NULL;
	CHECK_EQ(bad, 0);
	/* Remove every other key; the rest stay reachable. */
	for (uint64_t k = 1; k <= N; k += 2)
		bad += vy_u64map_remove(&m, k * 3) != val(k);
	CHECK_EQ(bad, 0);
	CHECK_EQ(m.count, N / 2);
	for (uint64_t k = 1; k <= N; k++)
		bad += vy_u64map_get(&m, k * 3) != (k % 2 ? NULL : val(k));
	CHECK_EQ(bad, 0);
	vy_u64map_destroy(&m);
}

/* Keys sharing one home slot, and a probe run that wraps past the last slot:
 * removing any member keeps the others reachable, and no tombstones stay. */
static void removal_in_collision_runs_and_wraparound(void)
{
	vy_u64map m;
	vy_u64map_init(&m);
	CHECK(pregrow_empty(&m, 64));
	size_t cap = m.cap;
	uint64_t same[6], last[4], first[3];
	CHECK_EQ(keys_homed_at(&m, 9, 1, 1, same, 6), 6);
	CHECK_EQ(keys_homed_at(&m, cap - 1, 1, 7, last, 4), 4);
	CHECK_EQ(keys_homed_at(&m, 0, 3, 5, first, 3), 3);
	/* A run of 6 from slot 9. */
	for (int i = 0; i < 6; i++)
		CHECK(vy_u64map_put(&m, same[i], val(100 + i)));
	for (int i = 0; i < 6; i++)
		CHECK_EQ(slot_index(&m, same[i]), 9 + i);
	CHECK(vy_u64map_remove(&m, same[0]) == val(100)); /* the head */
	for (int i = 1; i < 6; i++) {
		CHECK(vy_u64map_get(&m, same[i]) == val(100 + i));
		CHECK_EQ(slot_index(&m, same[i]), 9 + i - 1); /* shifted back */
	}
	CHECK_EQ(m.slots[14].key, 0);
	CHECK(vy_u64map_remove(&m, same[3]) == val(103)); /* the middle */
	CHECK(vy_u64map_remove(&m, same[5]) == val(105)); /* the tail */
	CHECK(vy_u64map_get(&m, same[1]) == val(101));
	CHECK(vy_u64map_get(&m, same[2]) == val(102));
	CHECK(vy_u64map_get(&m, same[4]) == val(104));
	CHECK_EQ(slot_index(&m, same[4]), 11);
	/* Wrap: four keys homed at the last slot take slots cap-1, 0, 1, 2, and
	 * keys homed at 0 go after them. */
	for (int i = 0; i < 4; i++)
		CHECK(vy_u64map_put(&m, last[i], val(200 + i)));
	for (int i = 0; i < 3; i++)
		CHECK(vy_u64map_put(&m, first[i], val(300 + i)));
	CHECK_EQ(slot_index(&m, last[0]), cap - 1);
	CHECK_EQ(slot_index(&m, last[1]), 0);
	CHECK_EQ(slot_index(&m, first[2]), 5);
	CHECK(vy_u64map_remove(&m, last[0]) == val(200)); /* hole at cap-1 */
	/* Members homed at cap-1 move back across the end, and so, one slot
	 * each, do the keys homed at 0 behind them. */
	CHECK_EQ(slot_index(&m, last[1]), cap - 1);
	CHECK_EQ(slot_index(&m, last[2]), 0);
	CHECK_EQ(slot_index(&m, last[3]), 1);
	CHECK_EQ(slot_index(&m, first[0]), 2);
	CHECK_EQ(slot_index(&m, first[2]), 4);
	for (int i = 1; i < 4; i++)
		CHECK(vy_u64map_get(&m, last[i]) == val(200 + i));
	for (int i = 0; i < 3; i++)
		CHECK(vy_u64map_get(&m, first[i]) == val(300 + i));
	/* With the wrapped keys gone, keys homed at 0 return to 0, 1, 2 and
	 * never cross back into the last slot, before their home. */
	CHECK(vy_u64map_remove(&m, last[2]) == val(202));
	CHECK(vy_u64map_remove(&m, last[1]) == val(201));
	CHECK(vy_u64map_remove(&m, last[3]) == val(203));
	CHECK_EQ(m.slots[cap - 1].key, 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(slot_index(&m, first[i]), i);
		CHECK(vy_u64map_get(&m, first[i]) == val(300 + i));
	}
	CHECK_EQ(m.slots[3].key, 0);
	CHECK(vy_u64map_remove(&m, first[0]) == val(300));
	CHECK_EQ(slot_index(&m, first[1]), 0);
	CHECK_EQ(slot_index(&m, first[2]), 1);
	CHECK(vy_u64map_get(&m, first[1]) == val(301));
	CHECK(vy_u64map_get(&m, first[2]) == val(302));
	/* The run at 9 is untouched by all this. */
	CHECK_EQ(slot_index(&m, same[1]), 9);
	CHECK_EQ(slot_index(&m, same[2]), 10);
	CHECK_EQ(slot_index(&m, same[4]), 11);
	CHECK_EQ(m.count, 5);
	/* Empty it: every slot is empty again. */
	uint64_t rest[] = {same[1], same[2], same[4], first[1], first[2]};
	for (size_t i = 0; i < sizeof(rest) / sizeof(rest[0]); i++)
		CHECK(vy_u64map_remove(&m, rest[i]) != NULL);
	CHECK_EQ(m.count, 0);
	size_t used = 0;
	for (size_t i = 0; i < m.cap; i++)
		used += m.slots[i].key != 0 || m.slots[i].value != NULL;
	CHECK_EQ(used, 0);
	vy_u64map_destroy(&m);
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

#define RKEYS 500

/* Every key's lookup and the count against the reference, and iteration
 * against it too; returns the number of mismatches. */
static size_t compare_with_reference(const vy_u64map *m, const uint64_t *keys, const uintptr_t *ref)
{
	size_t bad = 0, live = 0;
	for (size_t i = 0; i < RKEYS; i++) {
		bad += vy_u64map_get(m, keys[i]) != (void *)ref[i];
		live += ref[i] != 0;
	}
	bad += m->count != live;
	return bad;
}

static void randomized_against_reference(void)
{
	vy_u64map m;
	vy_u64map_init(&m);
	/* A table of 1024 slots from the start (500 keys stay under 3/4 of it),
	 * so keys found to share a home keep sharing it. */
	CHECK(pregrow_empty(&m, 1024));
	CHECK_EQ(m.cap, 1024);
	uint64_t keys[RKEYS];
	size_t n = 0;
	/* Multiples of 2^40. */
	for (uint64_t i = 1; i <= 100; i++)
		keys[n++] = i << 40;
	/* Keys homed on the last two slots (runs wrap) and on slot 512. */
	n += keys_homed_at(&m, m.cap - 1, 1000001, 1, keys + n, 40);
	n += keys_homed_at(&m, m.cap - 2, 2000001, 1, keys + n, 40);
	n += keys_homed_at(&m, 512, 3000001, 1, keys + n, 40);
	CHECK_EQ(n, 220);
	/* Small sequential ids and large random values. */
	for (uint64_t i = 1; n < 380; i++)
		keys[n++] = i;
	uint64_t seed = 20240601;
	while (n < RKEYS) {
		uint64_t k = rng_next(&seed) | 1ull << 63;
		keys[n++] = k;
	}
	uintptr_t ref[RKEYS] = {0};
	size_t bad = 0, first_bad = 0;
	uint64_t puts = 0, removes = 0, hits = 0;
	for (uint64_t op = 1; op <= 20000; op++) {
		uint64_t r = rng_next(&seed);
		size_t i = (size_t)(r % RKEYS);
		unsigned what = (unsigned)(r >> 32) % 10;
		if (what < 5) { /* put: insert or replace */
			uintptr_t v = (uintptr_t)(op << 4 | 8);
			bad += !vy_u64map_put(&m, keys[i], (void *)v);
			ref[i] = v;
			puts++;
		} else if (what < 9) { /* remove, present or not */
			bad += vy_u64map_remove(&m, keys[i]) != (void *)ref[i];
			hits += ref[i] != 0;
			ref[i] = 0;
			removes++;
		} else {
			bad += vy_u64map_get(&m, keys[i]) != (void *)ref[i];
		}
		bad += compare_with_reference(&m, keys, ref);
		if (bad && !first_bad)
			first_bad = (size_t)op;
	}
	if (first_bad)
		fprintf(stderr, "  first mismatch at op %zu\n", first_bad);
	CHECK_EQ(bad, 0);
	CHECK(puts > 9000 && removes > 7000 && hits > 3000);
	CHECK_EQ(m.cap, 1024); /* never grew: the load stayed in bounds */
	/* Remove what is left: nothing stays behind, no tombstones. */
	for (size_t i = 0; i < RKEYS; i++)
		if (ref[i])
			bad += vy_u64map_remove(&m, keys[i]) != (void *)ref[i];
	CHECK_EQ(bad, 0);
	CHECK_EQ(m.count, 0);
	size_t used = 0;
	for (size_t i = 0; i < m.cap; i++)
		used += m.slots[i].key != 0;
	CHECK_EQ(used, 0);
	vy_u64map_destroy(&m);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void iteration_visits_each_live_key_once(void)
{
	enum { N = 3000 };
	vy_u64map m;
	vy_u64map_init(&m);
	size_t i = 0, visits = 0;
	uint64_t k;
	void *v;
	CHECK(!vy_u64map_next(&m, &i, &k, &v)); /* empty, never allocated */
	for (uint64_t j = 1; j <= N; j++)
		CHECK(vy_u64map_put(&m, j << 32 | j, val(j)));
	for (uint64_t j = 1; j <= N; j += 3)
		CHECK(vy_u64map_remove(&m, j << 32 | j) == val(j));
	uint64_t *seen = calloc(N, sizeof(*seen));
	CHECK(seen != NULL);
	if (!seen) {
		vy_u64map_destroy(&m);
		return;
	}
	size_t bad = 0;
	for (i = 0; vy_u64map_next(&m, &i, &k, &v);) {
		uint64_t j = k & 0xffffffffu;
		bad += (k >> 32) != j || v != val(j) || j % 3 == 1;
		if (visits < N)
			seen[visits] = k;
		visits++;
	}
	CHECK_EQ(bad, 0);
	CHECK_EQ(visits, N - (N + 2) / 3);
	CHECK_EQ(visits, m.count);
	qsort(seen, visits < N ? visits : N, sizeof(*seen), cmp_u64);
	size_t dups = 0;
	for (size_t a = 1; a < visits && a < N; a++)
		dups += seen[a] == seen[a - 1];
	CHECK_EQ(dups, 0);
	/* Exhausted: further calls keep saying no. */
	CHECK(!vy_u64map_next(&m, &i, &k, &v));
	CHECK(!vy_u64map_next(&m, &i, &k, &v));
	free(seen);
	vy_u64map_destroy(&m);
}

/* The longest run of occupied slots. */
static size_t longest_run(const vy_u64map *m)
{
	size_t best = 0, run = 0;
	for (size_t i = 0; i < 2 * m->cap; i++) { /* twice round: a run may wrap */
		run = m->slots[i & (m->cap - 1)].key ? run + 1 : 0;
		best = run > best ? run : best;
	}
	return best < m->cap ? best : m->cap;
}

/* One map's keys put into another in the first's slot order (a successor
 * makes its inodes from its shadow so): the second's probe runs stay as
 * short as random keys make them. With one hash for every map, the keys
 * came in hash order and filled the second's slots in runs of thousands
 * (2.9 s to make 100,000 inodes). */
/* A reserve makes room once: the puts after it rehash nothing (the slot
 * array stays where it is), every member is there, and a count past what
 * memory can index is refused with the map unchanged. */
static void reserve_makes_room_once(void)
{
	vy_u64map m;
	vy_u64map_init(&m);
	CHECK(vy_u64map_put(&m, 7, val(7)));
	CHECK(vy_u64map_reserve(&m, 100000));
	vy_u64map_slot *slots = m.slots;
	size_t cap = m.cap;
	CHECK(cap * 3 >= 100000 * 4);
	for (uint64_t k = 1; k <= 99999; k++)
		if (k != 7)
			CHECK(vy_u64map_put(&m, k, val(k)));
	CHECK(m.slots == slots && m.cap == cap);
	CHECK_EQ(m.count, 99999);
	for (uint64_t k = 1; k <= 99999; k++)
		CHECK(vy_u64map_get(&m, k) == val(k));
	CHECK(vy_u64map_reserve(&m, 10)); /* already room: nothing moves */
	CHECK(m.slots == slots && m.cap == cap);
	CHECK(!vy_u64map_reserve(&m, SIZE_MAX / 2));
	CHECK(m.slots == slots && m.cap == cap && m.count == 99999);
	vy_u64map_destroy(&m);
}

static void copy_in_slot_order_stays_short(void)
{
	vy_u64map a, b;
	vy_u64map_init(&a);
	vy_u64map_init(&b);
	for (uint64_t k = 1; k <= 200000; k++)
		CHECK(vy_u64map_put(&a, k, val(k)));
	uint64_t k;
	void *v;
	/* The first 60,000 in a's order: b is then a quarter of a's size,
	 * and the run would be all of them. */
	for (size_t i = 0; b.count < 60000 && vy_u64map_next(&a, &i, &k, &v);)
		CHECK(vy_u64map_put(&b, k, v));
	CHECK_EQ(b.count, 60000);
	size_t run = longest_run(&b);
	if (run >= 1000) {
		fprintf(stderr, "  a probe run of %zu slots\n", run);
		vy_test_failures++;
	}
	vy_u64map_destroy(&a);
	vy_u64map_destroy(&b);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(put_get_remove),
		TEST_CASE(replace_keeps_one_entry),
		TEST_CASE(key_zero_refused),
		TEST_CASE(growth_through_many_resizes),
		TEST_CASE(removal_in_collision_runs_and_wraparound),
		TEST_CASE(randomized_against_reference),
		TEST_CASE(iteration_visits_each_live_key_once),
		TEST_CASE(copy_in_slot_order_stays_short),
		TEST_CASE(reserve_makes_room_once),
	};
	return vy_test_main("u64map", cases, sizeof(cases) / sizeof(cases[0]));
}
