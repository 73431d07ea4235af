/* The handle table (ns/handles.h): ids are (generation << 32) | index;
 * alloc, free and reuse with a new generation; stale, garbage and
 * wrong-kind ids refused; growth by doubling segments; the cap (ENFILE);
 * a slot retired when its generation runs out; the walk over live files;
 * lock-free lookups while another thread adds and frees. */
#include "ns/handles.h"
#include "tests/unit/support.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

/* Fake open files: the table never looks behind the pointer. */
static struct vy_open *fake(uint64_t n)
{
	return (struct vy_open *)(uintptr_t)(n * 16 + 16);
}

static uint32_t gen_of(uint64_t id)
{
	return (uint32_t)(id >> 32);
}

static uint32_t index_of(uint64_t id)
{
	return (uint32_t)id;
}

static void alloc_free_reuse(void)
{
	vy_handles t;
	vy_handles_init(&t, 1000);
	CHECK_EQ(t.made, 0); /* nothing allocated before the first add */
	uint64_t a = 0, b = 0;
	CHECK_EQ(vy_handles_add_file(&t, fake(1), &a), 0);
	CHECK_EQ(index_of(a), 0);
	CHECK_EQ(gen_of(a), 1); /* generations start at 1: id 0 is never live */
	CHECK_EQ(vy_handles_add_file(&t, fake(2), &b), 0);
	CHECK_EQ(index_of(b), 1);
	CHECK_EQ(gen_of(b), 1);
	CHECK_EQ(t.live, 2);
	CHECK_EQ(t.made, VY_HANDLES_FIRST);
	CHECK(vy_handles_file(&t, a) == fake(1));
	CHECK(vy_handles_file(&t, b) == fake(2));

	CHECK(vy_handles_free(&t, a, VY_HANDLE_FILE));
	CHECK_EQ(t.live, 1);
	CHECK(vy_handles_file(&t, a) == NULL); /* stale */
	CHECK(!vy_handles_free(&t, a, VY_HANDLE_FILE)); /* twice: refused */
	CHECK_EQ(t.live, 1);

	uint64_t c = 0;
	CHECK_EQ(vy_handles_add_file(&t, fake(3), &c), 0);
	CHECK_EQ(index_of(c), 0); /* the freed index again */
	CHECK_EQ(gen_of(c), 2);   /* with the next generation */
	CHECK(vy_handles_file(&t, a) == NULL); /* the old id stays refused */
	CHECK(vy_handles_file(&t, c) == fake(3));
	CHECK(vy_handles_file(&t, b) == fake(2));
	CHECK_EQ(t.used, 2);
	CHECK_EQ(t.live, 2);
	vy_handles_destroy(&t);
}

static void garbage_ids_refused(void)
{
	vy_handles t;
	vy_handles_init(&t, 1000);
	/* An empty table: nothing is live, nothing is touched. */
	const uint64_t junk0[] = {0, 1, UINT64_MAX, (uint64_t)1 << 32, UINT32_MAX};
	for (size_t i = 0; i < sizeof(junk0) / sizeof(junk0[0]); i++) {
		CHECK(vy_handles_file(&t, junk0[i]) == NULL);
		CHECK(vy_handles_dir(&t, junk0[i]) == NULL);
		CHECK(!vy_handles_free(&t, junk0[i], VY_HANDLE_FILE));
	}
	uint64_t f = 0, d = 0;
	CHECK_EQ(vy_handles_add_file(&t, fake(7), &f), 0);
	CHECK_EQ(vy_handles_add_dir(&t, 42, 9, &d), 0);
	uint32_t g = gen_of(f), i = index_of(f);
	const uint64_t junk[] = {
		0,                                    /* id 0 */
		UINT64_MAX,                           /* every bit */
		i,                                    /* right index, generation 0 */
		(uint64_t)(g + 1) << 32 | i,          /* right index, a later generation */
		(uint64_t)UINT32_MAX << 32 | i,       /* right index, the last generation */
		(uint64_t)g << 32 | 2,                /* an index made but never given */
		(uint64_t)g << 32 | VY_HANDLES_FIRST, /* past the segments made */
		(uint64_t)g << 32 | 0x80000000u,      /* far past them */
		(uint64_t)g << 32 | UINT32_MAX,       /* the free list's end mark */
		d,                                    /* a directory's id, as a file */
	};
	for (size_t k = 0; k < sizeof(junk) / sizeof(junk[0]); k++) {
		CHECK(vy_handles_file(&t, junk[k]) == NULL);
		CHECK(!vy_handles_free(&t, junk[k], VY_HANDLE_FILE));
	}
	CHECK(vy_handles_dir(&t, f) == NULL); /* a file's id, as a directory */
	CHECK(!vy_handles_free(&t, f, VY_HANDLE_DIR));
	CHECK(!vy_handles_free(&t, f, VY_HANDLE_FREE)); /* only files and directories end */
	CHECK_EQ(t.live, 2); /* nothing refused changed anything */
	CHECK(vy_handles_file(&t, f) == fake(7));
	vy_handle_dir *od = vy_handles_dir(&t, d);
	CHECK(od != NULL);
	if (od) {
		CHECK_EQ(od->ino, 42);
		CHECK_EQ(od->limit, 9);
	}
	vy_handles_destroy(&t);
}

static void directories_keep_their_limit(void)
{
	vy_handles t;
	vy_handles_init(&t, 10);
	uint64_t d = 0;
	CHECK_EQ(vy_handles_add_dir(&t, 5, 100, &d), 0);
	vy_handle_dir *od = vy_handles_dir(&t, d);
	CHECK(od != NULL);
	if (!od)
		return;
	od->limit = 250; /* a rewind (ns held) */
	/* Other handles come and go; the state stays where it is. */
	uint64_t ids[40];
	for (unsigned k = 0; k < 40; k++)
		CHECK_EQ(vy_handles_add_file(&t, fake(k), &ids[k]), ENFILE * (k >= 9));
	for (unsigned k = 0; k < 9; k++)
		CHECK(vy_handles_free(&t, ids[k], VY_HANDLE_FILE));
	CHECK(vy_handles_dir(&t, d) == od);
	CHECK_EQ(od->ino, 5);
	CHECK_EQ(od->limit, 250);
	CHECK(vy_handles_file(&t, d) == NULL);
	CHECK(vy_handles_free(&t, d, VY_HANDLE_DIR));
	CHECK(vy_handles_dir(&t, d) == NULL);
	CHECK_EQ(t.live, 0);
	uint64_t d2 = 0;
	CHECK_EQ(vy_handles_add_dir(&t, 6, 1, &d2), 0);
	CHECK(d2 != d);
	CHECK(vy_handles_dir(&t, d) == NULL);
	CHECK_EQ(vy_handles_dir(&t, d2)->limit, 1);
	vy_handles_destroy(&t);
}

/* Slots made for n ids: segments double, 64, 128, 256 ... */
static uint64_t made_for(uint64_t n)
{
	uint64_t m = VY_HANDLES_FIRST;
	while (m < n)
		m *= 2;
	return m;
}

static void growth_by_doubling(void)
{
	enum { N = 100000 };
	vy_handles t;
	vy_handles_init(&t, N);
	uint64_t *ids = malloc(N * sizeof(*ids));
	CHECK(ids != NULL);
	if (!ids)
		return;
	for (uint64_t k = 0; k < N; k++) {
		CHECK_EQ(vy_handles_add_file(&t, fake(k), &ids[k]), 0);
		CHECK_EQ(index_of(ids[k]), k); /* a fresh table gives indexes in order */
		CHECK_EQ(t.made, made_for(k + 1));
	}
	CHECK_EQ(t.made, 131072);
	CHECK_EQ(t.live, N);
	unsigned wrong = 0;
	for (uint64_t k = 0; k < N; k++)
		wrong += vy_handles_file(&t, ids[k]) != fake(k);
	CHECK_EQ(wrong, 0);
	/* Free every other one, then add as many: the freed indexes come back
	 * (no growth), each with generation 2. */
	for (uint64_t k = 0; k < N; k += 2)
		CHECK(vy_handles_free(&t, ids[k], VY_HANDLE_FILE));
	CHECK_EQ(t.live, N / 2);
	unsigned regen = 0, odd = 0;
	for (uint64_t k = 0; k < N; k += 2) {
		uint64_t id = 0;
		CHECK_EQ(vy_handles_add_file(&t, fake(N + k), &id), 0);
		regen += gen_of(id) == 2;
		odd += index_of(id) % 2;
	}
	CHECK_EQ(regen, N / 2);
	CHECK_EQ(odd, 0);
	CHECK_EQ(t.made, 131072);
	CHECK_EQ(t.used, N);
	wrong = 0;
	for (uint64_t k = 0; k < N; k += 2)
		wrong += vy_handles_file(&t, ids[k]) != NULL; /* the first ids: stale */
	for (uint64_t k = 1; k < N; k += 2)
		wrong += vy_handles_file(&t, ids[k]) != fake(k);
	CHECK_EQ(wrong, 0);
	free(ids);
	vy_handles_destroy(&t);
}

static void the_cap(void)
{
	vy_handles t;
	vy_handles_init(&t, 3);
	uint64_t a, b, c, d = 77;
	CHECK_EQ(vy_handles_add_file(&t, fake(1), &a), 0);
	CHECK_EQ(vy_handles_add_dir(&t, 1, 1, &b), 0);
	CHECK_EQ(vy_handles_add_file(&t, fake(3), &c), 0);
	CHECK_EQ(vy_handles_add_file(&t, fake(4), &d), ENFILE); /* files and directories count alike */
	CHECK_EQ(vy_handles_add_dir(&t, 1, 1, &d), ENFILE);
	CHECK_EQ(d, 77); /* untouched on error */
	CHECK_EQ(t.live, 3);
	CHECK_EQ(t.used, 3);
	CHECK(vy_handles_free(&t, b, VY_HANDLE_DIR));
	CHECK_EQ(vy_handles_add_file(&t, fake(5), &d), 0);
	CHECK_EQ(index_of(d), index_of(b));
	CHECK_EQ(vy_handles_add_file(&t, fake(6), &d), ENFILE);
	/* A cap of 0 refuses the first. */
	vy_handles z;
	vy_handles_init(&z, 0);
	CHECK_EQ(vy_handles_add_file(&z, fake(1), &d), ENFILE);
	CHECK_EQ(z.made, 0);
	vy_handles_destroy(&z);
	vy_handles_destroy(&t);
}

static void generation_runs_out(void)
{
	vy_handles t;
	vy_handles_init(&t, 10);
	uint64_t a, b;
	CHECK_EQ(vy_handles_add_file(&t, fake(1), &a), 0);
	CHECK(vy_handles_free(&t, a, VY_HANDLE_FILE));
	/* Skip to the last generation (4 billion frees would take a while). */
	atomic_store(&t.seg[0][0].gen, UINT32_MAX);
	CHECK_EQ(vy_handles_add_file(&t, fake(2), &b), 0);
	CHECK_EQ(index_of(b), 0);
	CHECK_EQ(gen_of(b), UINT32_MAX);
	CHECK(vy_handles_file(&t, b) == fake(2));
	CHECK(vy_handles_free(&t, b, VY_HANDLE_FILE));
	/* Retired: a next generation would wrap to an old id. */
	CHECK_EQ(atomic_load(&t.seg[0][0].kind), VY_HANDLE_RETIRED);
	uint64_t c;
	CHECK_EQ(vy_handles_add_file(&t, fake(3), &c), 0);
	CHECK_EQ(index_of(c), 1);
	CHECK(vy_handles_file(&t, a) == NULL);
	CHECK(vy_handles_file(&t, b) == NULL);
	CHECK(vy_handles_file(&t, index_of(a)) == NULL); /* generation 0 */
	CHECK(!vy_handles_free(&t, index_of(a), VY_HANDLE_FILE));
	CHECK_EQ(t.live, 1);
	vy_handles_destroy(&t);
}

static void walk_live_files(void)
{
	vy_handles t;
	vy_handles_init(&t, 100);
	uint64_t ids[10];
	for (unsigned k = 0; k < 10; k++) {
		if (k % 3 == 0)
			CHECK_EQ(vy_handles_add_dir(&t, k, 0, &ids[k]), 0);
		else
			CHECK_EQ(vy_handles_add_file(&t, fake(k), &ids[k]), 0);
	}
	CHECK(vy_handles_free(&t, ids[4], VY_HANDLE_FILE));
	/* Files 1 2 5 7 8 are live; the walk frees each as it goes. */
	uint64_t at = 0, id;
	struct vy_open *o;
	unsigned seen = 0, n = 0;
	while (vy_handles_next_file(&t, &at, &id, &o)) {
		unsigned k = index_of(id);
		CHECK(k < 10 && id == ids[k] && o == fake(k));
		seen |= 1u << k;
		n++;
		CHECK(vy_handles_free(&t, id, VY_HANDLE_FILE));
	}
	CHECK_EQ(seen, (1u << 1) | (1u << 2) | (1u << 5) | (1u << 7) | (1u << 8));
	CHECK_EQ(n, 5);
	CHECK_EQ(t.live, 4); /* the directories */
	CHECK(!vy_handles_next_file(&t, &at, &id, &o));
	vy_handles_destroy(&t);
}

/* Lookups without the lock while another thread adds and frees under it:
 * a live id always finds its file, a stale or never-given one never
 * finds one, however the two interleave. */
typedef struct race {
	vy_handles t;
	pthread_mutex_t ns;
	uint64_t keep, stale;
	_Atomic int stop;
	unsigned bad;
} race;

static void *reader(void *arg)
{
	race *r = arg;
	for (unsigned k = 0; !atomic_load(&r->stop) || k < 1000; k++) {
		r->bad += vy_handles_file(&r->t, r->keep) != fake(0);
		r->bad += vy_handles_file(&r->t, r->stale) != NULL;
		r->bad += vy_handles_file(&r->t, ((uint64_t)1000000 << 32) | (k % 5000)) != NULL;
	}
	return NULL;
}

static void lookups_while_changing(void)
{
	race r = {.bad = 0};
	vy_handles_init(&r.t, 1u << 20);
	pthread_mutex_init(&r.ns, NULL);
	atomic_init(&r.stop, 0);
	CHECK_EQ(vy_handles_add_file(&r.t, fake(0), &r.keep), 0);
	CHECK_EQ(vy_handles_add_file(&r.t, fake(1), &r.stale), 0);
	CHECK(vy_handles_free(&r.t, r.stale, VY_HANDLE_FILE));
	pthread_t th;
	if (pthread_create(&th, NULL, reader, &r) != 0) {
		fprintf(stderr, "  pthread_create failed\n");
		vy_test_failures++;
		return;
	}
	static uint64_t ids[4096];
	for (unsigned round = 0; round < 20; round++) {
		unsigned n = 64u << (round % 7); /* grows the table, then reuses it */
		pthread_mutex_lock(&r.ns);
		for (unsigned k = 0; k < n; k++)
			CHECK_EQ(vy_handles_add_file(&r.t, fake(k + 2), &ids[k]), 0);
		pthread_mutex_unlock(&r.ns);
		pthread_mutex_lock(&r.ns);
		for (unsigned k = 0; k < n; k++)
			CHECK(vy_handles_free(&r.t, ids[k], VY_HANDLE_FILE));
		pthread_mutex_unlock(&r.ns);
	}
	atomic_store(&r.stop, 1);
	pthread_join(th, NULL);
	CHECK_EQ(r.bad, 0);
	CHECK_EQ(r.t.live, 1);
	pthread_mutex_destroy(&r.ns);
	vy_handles_destroy(&r.t);
}

/* A successor takes ids back as they were (docs/survive.md): same index
 * and generation, live at once; the indexes between go on the free list;
 * out of order, garbage and kinds neither are refused; new ids come after. */
static void ids_taken_back(void)
{
	vy_handles t;
	vy_handles_init(&t, 1000);
	uint64_t a = (uint64_t)7 << 32 | 3, b = (uint64_t)2 << 32 | 200;
	CHECK_EQ(vy_handles_add_at(&t, a, VY_HANDLE_FILE, fake(1), 0, 0), 0);
	CHECK_EQ(vy_handles_add_at(&t, b, VY_HANDLE_DIR, NULL, 9, 44), 0);
	CHECK(vy_handles_file(&t, a) == fake(1));
	CHECK(vy_handles_dir(&t, b) && vy_handles_dir(&t, b)->ino == 9 && vy_handles_dir(&t, b)->limit == 44);
	CHECK(vy_handles_file(&t, (uint64_t)6 << 32 | 3) == NULL); /* another generation */
	CHECK_EQ(t.live, 2);
	CHECK_EQ(vy_handles_add_at(&t, (uint64_t)1 << 32 | 100, VY_HANDLE_FILE, fake(2), 0, 0), EINVAL); /* out of order */
	CHECK_EQ(vy_handles_add_at(&t, 500, VY_HANDLE_FILE, fake(2), 0, 0), EINVAL); /* generation 0 */
	CHECK_EQ(vy_handles_add_at(&t, (uint64_t)1 << 32 | 300, VY_HANDLE_FREE, NULL, 0, 0), EINVAL);
	CHECK_EQ(t.live, 2);
	/* 199 indexes were skipped (0..2, 4..199): new ids take them, then 201. */
	bool seen[202] = {false};
	for (int i = 0; i < 199; i++) {
		uint64_t id;
		CHECK_EQ(vy_handles_add_file(&t, fake(10), &id), 0);
		CHECK(index_of(id) < 200 && index_of(id) != 3 && !seen[index_of(id)]);
		seen[index_of(id) < 200 ? index_of(id) : 0] = true;
	}
	uint64_t next;
	CHECK_EQ(vy_handles_add_file(&t, fake(11), &next), 0);
	CHECK_EQ(index_of(next), 201);
	CHECK(vy_handles_free(&t, a, VY_HANDLE_FILE));
	CHECK_EQ(t.live, 201); /* b, the 199 and the next */
	vy_handles_destroy(&t);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(alloc_free_reuse),
		TEST_CASE(ids_taken_back),
		TEST_CASE(garbage_ids_refused),
		TEST_CASE(directories_keep_their_limit),
		TEST_CASE(growth_by_doubling),
		TEST_CASE(the_cap),
		TEST_CASE(generation_runs_out),
		TEST_CASE(walk_live_files),
		TEST_CASE(lookups_while_changing),
	};
	return vy_test_main("handles", cases, sizeof(cases) / sizeof(cases[0]));
}
