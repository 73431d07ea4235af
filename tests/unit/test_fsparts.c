/* The fs layer's pure parts: directory entries (lookups, creation order,
 * stable readdir cookies across removals and compaction) and per-inode
 * extended attributes (flags, limits, listing). */
#include "ns/acl.h"
#include "ns/dir.h"
#include "ns/xattr.h"
#include "tests/unit/support.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
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

/* A successor makes a directory again with each name at its kept cookie:
 * the order is the cookies', a removed entry's cookie may be taken, a live
 * one's may not, nor a name twice; new names come after the largest. */
static void dir_names_at_their_cookies(void)
{
	vy_dir d;
	vy_dir_init(&d);
	CHECK(vy_dir_add_at(&d, "c", 3, 30));
	CHECK(vy_dir_add_at(&d, "a", 1, 10));
	CHECK(vy_dir_add_at(&d, "b", 2, 20));
	CHECK(!vy_dir_add_at(&d, "x", 9, 20)); /* a live entry's cookie */
	CHECK(!vy_dir_add_at(&d, "a", 9, 40)); /* a name twice */
	CHECK(!vy_dir_add_at(&d, "y", 9, 0));
	CHECK(vy_dir_remove(&d, "b"));
	CHECK(vy_dir_add_at(&d, "b2", 4, 20)); /* a removed entry's place */
	CHECK(vy_dir_add(&d, "d", 5));
	const char *want[] = {"a", "b2", "c", "d"};
	uint64_t cookies[] = {10, 20, 30, 31};
	int i = 0;
	for (const vy_dirent *e = vy_dir_next(&d, 0); e; e = vy_dir_next(&d, e->cookie), i++) {
		CHECK(i < 4 && !strcmp(e->name, want[i]) && e->cookie == cookies[i]);
	}
	CHECK_EQ(i, 4);
	CHECK(vy_dir_next(&d, 15) && vy_dir_next(&d, 15)->cookie == 20); /* a readdir resumed after a */
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

/* An ACL in its xattr form: version 2, then {tag, perm, id} entries. */
typedef struct {
	unsigned tag, perm;
	uint32_t id;
} acl_ent;
enum { UO = 0x01, U = 0x02, GO = 0x04, G = 0x08, M = 0x10, O = 0x20 };

static size_t acl_make(unsigned char *buf, const acl_ent *e, size_t n)
{
	uint32_t v = 2;
	memcpy(buf, &v, 4);
	for (size_t i = 0; i < n; i++) {
		uint16_t t = (uint16_t)e[i].tag, p = (uint16_t)e[i].perm;
		memcpy(buf + 4 + 8 * i, &t, 2);
		memcpy(buf + 6 + 8 * i, &p, 2);
		memcpy(buf + 8 + 8 * i, &e[i].id, 4);
	}
	return 4 + 8 * n;
}

static unsigned acl_perm(const unsigned char *buf, size_t i)
{
	uint16_t p;
	memcpy(&p, buf + 6 + 8 * i, 2);
	return p;
}

static void acl_validation_as_the_kernel(void)
{
	unsigned char b[128];
	const acl_ent full[] = {{UO, 6, 0}, {U, 4, 7}, {U, 4, 5}, {GO, 4, 0}, {G, 2, 9}, {M, 6, 0}, {O, 4, 0}};
	size_t n = acl_make(b, full, 7);
	CHECK_EQ(vy_acl_valid(b, n), 0); /* ids need not be sorted: tmpfs takes it */
	CHECK_EQ(vy_acl_valid(b, n - 2), EINVAL); /* not a whole entry */
	CHECK_EQ(vy_acl_valid(b, 4), EINVAL);      /* no entries */
	CHECK_EQ(vy_acl_valid(b, 3), EINVAL);      /* no header */
	CHECK_EQ(vy_acl_valid(NULL, 0), EINVAL);
	b[0] = 1;
	CHECK_EQ(vy_acl_valid(b, n), EOPNOTSUPP); /* another version */
	const acl_ent base[] = {{UO, 6, 0}, {GO, 4, 0}, {O, 4, 0}};
	CHECK_EQ(vy_acl_valid(b, acl_make(b, base, 3)), 0);
	const acl_ent no_mask[] = {{UO, 6, 0}, {U, 4, 7}, {GO, 4, 0}, {O, 4, 0}};
	CHECK_EQ(vy_acl_valid(b, acl_make(b, no_mask, 4)), EINVAL);
	const acl_ent order[] = {{GO, 4, 0}, {UO, 6, 0}, {O, 4, 0}};
	CHECK_EQ(vy_acl_valid(b, acl_make(b, order, 3)), EINVAL);
	const acl_ent two_owners[] = {{UO, 6, 0}, {UO, 6, 0}, {GO, 4, 0}, {O, 4, 0}};
	CHECK_EQ(vy_acl_valid(b, acl_make(b, two_owners, 4)), EINVAL);
	const acl_ent perm[] = {{UO, 010, 0}, {GO, 4, 0}, {O, 4, 0}};
	CHECK_EQ(vy_acl_valid(b, acl_make(b, perm, 3)), EINVAL);
	const acl_ent tag[] = {{UO, 6, 0}, {0x40, 4, 0}, {GO, 4, 0}, {O, 4, 0}};
	CHECK_EQ(vy_acl_valid(b, acl_make(b, tag, 4)), EINVAL);
	const acl_ent no_other[] = {{UO, 6, 0}, {GO, 4, 0}};
	CHECK_EQ(vy_acl_valid(b, acl_make(b, no_other, 2)), EINVAL);
	CHECK(vy_acl_name("system.posix_acl_access") && vy_acl_name("system.posix_acl_default"));
	CHECK(!vy_acl_name("system.posix_acl") && !vy_acl_name("user.x"));
}

static void acl_mode_chmod_and_inheritance(void)
{
	unsigned char b[128];
	mode_t mode = S_IFREG | S_ISGID | 0777;
	const acl_ent base[] = {{UO, 6, 0}, {GO, 4, 0}, {O, 0, 0}};
	CHECK_EQ(vy_acl_equiv_mode(b, acl_make(b, base, 3), &mode), 0); /* the mode says it all */
	CHECK_EQ(mode, S_IFREG | S_ISGID | 0640);
	const acl_ent named[] = {{UO, 7, 0}, {U, 4, 7}, {GO, 1, 0}, {M, 5, 0}, {O, 1, 0}};
	size_t n = acl_make(b, named, 5);
	CHECK_EQ(vy_acl_equiv_mode(b, n, &mode), 1);
	CHECK_EQ(mode, S_IFREG | S_ISGID | 0751); /* group bits from the mask */
	vy_acl_chmod(b, n, 0604);
	CHECK_EQ(acl_perm(b, 0), 6);
	CHECK_EQ(acl_perm(b, 1), 4); /* named entries stay */
	CHECK_EQ(acl_perm(b, 2), 1); /* the group entry stays under a mask */
	CHECK_EQ(acl_perm(b, 3), 0); /* the mask takes the group bits */
	CHECK_EQ(acl_perm(b, 4), 4);
	n = acl_make(b, base, 3);
	vy_acl_chmod(b, n, 0750); /* no mask: the group entry */
	CHECK_EQ(acl_perm(b, 1), 5);

	/* A file in a directory with a default ACL: create mode 0666. */
	const acl_ent dflt[] = {{UO, 7, 0}, {U, 7, 65534}, {GO, 5, 0}, {M, 7, 0}, {O, 0, 0}};
	n = acl_make(b, dflt, 5);
	void *acc, *dfl;
	size_t accn, dfln;
	mode = S_IFREG | 0666;
	CHECK_EQ(vy_acl_inherit(b, n, &mode, &acc, &accn, &dfl, &dfln), 0);
	CHECK_EQ(mode, S_IFREG | 0660);
	CHECK(acc && accn == n && !dfl && dfln == 0);
	if (acc) {
		CHECK_EQ(acl_perm(acc, 0), 6); /* owner masked by the mode */
		CHECK_EQ(acl_perm(acc, 1), 7); /* named entries are not */
		CHECK_EQ(acl_perm(acc, 3), 6); /* the mask is */
		CHECK_EQ(acl_perm(acc, 4), 0);
	}
	free(acc);
	/* A directory also takes the default itself. */
	mode = S_IFDIR | 0777;
	CHECK_EQ(vy_acl_inherit(b, n, &mode, &acc, &accn, &dfl, &dfln), 0);
	CHECK_EQ(mode, S_IFDIR | 0770);
	CHECK(acc && dfl && dfln == n && !memcmp(dfl, b, n));
	free(acc);
	free(dfl);
	/* A default the mode can say gives no access ACL. */
	const acl_ent plain[] = {{UO, 6, 0}, {GO, 4, 0}, {O, 4, 0}};
	n = acl_make(b, plain, 3);
	mode = S_IFREG | 0666;
	CHECK_EQ(vy_acl_inherit(b, n, &mode, &acc, &accn, &dfl, &dfln), 0);
	CHECK_EQ(mode, S_IFREG | 0644);
	CHECK(!acc && accn == 0 && !dfl);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(dir_finds_adds_and_removes),
		TEST_CASE(dir_cookies_survive_removals_and_compaction),
		TEST_CASE(dir_names_at_their_cookies),
		TEST_CASE(xattrs_set_get_flags_and_limits),
		TEST_CASE(acl_validation_as_the_kernel),
		TEST_CASE(acl_mode_chmod_and_inheritance),
	};
	return vy_test_main("fsparts", cases, sizeof(cases) / sizeof(cases[0]));
}
