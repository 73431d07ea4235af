/* The fs layer's pure parts: directory entries (lookups, creation order,
 * stable readdir cookies across removals and compaction) and per-inode
 * extended attributes (flags, limits, listing). */
#include "fs/dir.h"
#include "fs/xattr.h"
#include "tests/unit/support.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/xattr.h>

static void dir_finds_adds_and_removes(void)
{
	vy_dir d;
	vy_dir_init(&d);
	CHECK(vy_dir_find(&d, "a") == NULL);
	CHECK(!vy_dir_remove(&d, "a"));
	CHECK(vy_dir_next(&d, 0) == NULL);
	char name[32];
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "file-%d", i);
		CHECK(vy_dir_add(&d, name, 100 + (uint64_t)i));
	}
	CHECK_EQ(d.count, 2000);
	vy_dirent *e = vy_dir_find(&d, "file-1234");
	CHECK(e && e->ino == 1334);
	CHECK(vy_dir_remove(&d, "file-1234"));
	CHECK(vy_dir_find(&d, "file-1234") == NULL);
	CHECK(!vy_dir_remove(&d, "file-1234"));
	CHECK_EQ(d.count, 1999);
	/* A name added again goes to the end with a new cookie. */
	CHECK(vy_dir_add(&d, "file-1234", 7));
	const vy_dirent *last = NULL;
	for (const vy_dirent *x = vy_dir_next(&d, 0); x; x = vy_dir_next(&d, x->cookie))
		last = x;
	CHECK(last && !strcmp(last->name, "file-1234") && last->ino == 7);
	vy_dir_destroy(&d);
}

/* Walk from `after`, checking creation order and that every live entry is
 * seen exactly once. */
static void expect_walk(vy_dir *d, const bool *live, int n, uint64_t after, int from)
{
	int want = from;
	for (const vy_dirent *x = vy_dir_next(d, after); x; x = vy_dir_next(d, x->cookie)) {
		while (want < n && !live[want])
			want++;
		int got = atoi(x->name + 1);
		if (got != want) {
			fprintf(stderr, "  walk from %llu: got %d, want %d\n", (unsigned long long)after, got, want);
			vy_test_failures++;
			return;
		}
		want++;
	}
	while (want < n && !live[want])
		want++;
	CHECK_EQ(want, n);
}

static void dir_cookies_survive_removals_and_compaction(void)
{
	enum { N = 1000 };
	vy_dir d;
	vy_dir_init(&d);
	bool live[N];
	uint64_t cookie[N];
	char name[16];
	for (int i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		CHECK(vy_dir_add(&d, name, (uint64_t)i + 1));
		cookie[i] = vy_dir_find(&d, name)->cookie;
		live[i] = true;
	}
	unsigned seed = 12345;
	for (int round = 0; round < 3; round++) {
		/* Remove most, forcing compaction; the walk stays right. */
		for (int i = 0; i < N; i++) {
			seed = seed * 1103515245u + 12345u;
			if (live[i] && (seed >> 16) % 4 != 0) {
				snprintf(name, sizeof(name), "n%d", i);
				CHECK(vy_dir_remove(&d, name));
				live[i] = false;
			}
		}
		expect_walk(&d, live, N, 0, 0);
		/* Resuming after any cookie, live or removed, continues there. */
		for (int i = 0; i < N; i += 37)
			expect_walk(&d, live, N, cookie[i], i + 1);
	}
	vy_dir_destroy(&d);
}

static void xattrs_set_get_flags_and_limits(void)
{
	vy_xattrs x = {0};
	CHECK_EQ(vy_xattrs_set(&x, "user.a", "1", 1, 0), 0);
	CHECK_EQ(vy_xattrs_set(&x, "user.a", "22", 2, XATTR_CREATE), EEXIST);
	CHECK_EQ(vy_xattrs_set(&x, "user.b", "3", 1, XATTR_REPLACE), ENODATA);
	CHECK_EQ(vy_xattrs_set(&x, "user.a", "22", 2, XATTR_REPLACE), 0);
	const vy_xattr *a = vy_xattrs_get(&x, "user.a");
	CHECK(a && a->size == 2 && !memcmp(a->value, "22", 2));
	CHECK_EQ(vy_xattrs_set(&x, "user.empty", "", 0, 0), 0);
	CHECK(vy_xattrs_get(&x, "user.empty")->size == 0);
	char list[64];
	size_t need = vy_xattrs_list(&x, NULL, 0);
	CHECK_EQ(need, strlen("user.a") + 1 + strlen("user.empty") + 1);
	CHECK_EQ(vy_xattrs_list(&x, list, sizeof(list)), need);
	CHECK(!memcmp(list, "user.a\0user.empty\0", need));
	static char big[VY_XATTR_VALUE_MAX + 1];
	CHECK_EQ(vy_xattrs_set(&x, "user.big", big, sizeof(big), 0), E2BIG);
	/* The per-inode total: sixteen 64 KiB values fill 1 MiB with names. */
	char name[32];
	int stored = 0, last = 0;
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "user.v%d", i);
		last = vy_xattrs_set(&x, name, big, VY_XATTR_VALUE_MAX, 0);
		stored += last == 0;
	}
	CHECK_EQ(last, ENOSPC);
	CHECK_EQ(stored, 15);
	CHECK(x.bytes <= VY_XATTR_TOTAL_MAX);
	CHECK_EQ(vy_xattrs_remove(&x, "user.v0"), 0);
	CHECK_EQ(vy_xattrs_remove(&x, "user.v0"), ENODATA);
	CHECK_EQ(vy_xattrs_set(&x, "user.v0", big, VY_XATTR_VALUE_MAX, 0), 0); /* room again */
	vy_xattrs_destroy(&x);
	CHECK_EQ(x.n, 0);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(dir_finds_adds_and_removes),
		TEST_CASE(dir_cookies_survive_removals_and_compaction),
		TEST_CASE(xattrs_set_get_flags_and_limits),
	};
	return vy_test_main("fsparts", cases, sizeof(cases) / sizeof(cases[0]));
}
