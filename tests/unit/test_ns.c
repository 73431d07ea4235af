/* The namespace's counts that decide an inode's lifetime (ns/ns.h): the
 * kernel's lookups (FORGET and BATCH_FORGET through vy_ns_forget), names
 * and open files (ids in the handle table); an unlinked file goes at its
 * last close once the kernel forgot it, and not before. */
#include "ns/ns.h"
#include "tests/unit/support.h"

/* A namespace with one named regular file: the file, or NULL (failed). */
static vy_inode *ns_with_file(vy_ns *ns)
{
	if (!vy_ns_init(ns, 1 << 20)) {
		fprintf(stderr, "  vy_ns_init failed\n");
		vy_test_failures++;
		return NULL;
	}
	pthread_mutex_lock(&ns->ns);
	vy_inode *in = vy_inode_new(ns, VY_FILE, S_IFREG | 0644, 0, 0);
	if (in)
		in->nlink = 1;
	pthread_mutex_unlock(&ns->ns);
	CHECK(in != NULL);
	if (!in)
		vy_ns_destroy(ns);
	return in;
}

static void forget_counts_down_to_zero(void)
{
	vy_ns ns;
	vy_inode *in = ns_with_file(&ns);
	if (!in)
		return;
	uint64_t ino = in->ino;
	in->nlookup = 5; /* five entry replies the kernel took */
	pthread_mutex_lock(&ns.ns);
	CHECK(vy_ns_forget(&ns, ino, 2) == in);
	CHECK_EQ(in->nlookup, 3);
	CHECK(vy_ns_forget(&ns, ino, 0) == in);
	CHECK_EQ(in->nlookup, 3);
	CHECK(vy_ns_forget(&ns, ino, UINT64_MAX) == in); /* more than it holds: 0, never a wrap */
	CHECK_EQ(in->nlookup, 0);
	CHECK(vy_ns_forget(&ns, ino, 1) == in);
	CHECK_EQ(in->nlookup, 0);
	CHECK(vy_ns_forget(&ns, ino + 100, 1) == NULL); /* no such inode: nothing */
	CHECK(vy_ns_forget(&ns, 0, 1) == NULL);
	pthread_mutex_unlock(&ns.ns);
	CHECK(vy_ns_inode(&ns, ino) == in); /* named: a forget alone never frees it */
	vy_ns_destroy(&ns);
}

static void open_ids(void)
{
	vy_ns ns;
	vy_inode *in = ns_with_file(&ns);
	if (!in)
		return;
	vy_open *a = vy_open_new(in), *b = vy_open_new(in);
	CHECK(a && b);
	if (!a || !b)
		return;
	CHECK_EQ(a->fh, 0);
	pthread_mutex_lock(&ns.ns);
	CHECK_EQ(vy_open_add(&ns, a), 0);
	CHECK_EQ(vy_open_add(&ns, b), 0);
	pthread_mutex_unlock(&ns.ns);
	CHECK(a->fh != 0 && b->fh != 0 && a->fh != b->fh);
	CHECK(vy_open_of(&ns, a->fh) == a);
	CHECK(vy_open_of(&ns, b->fh) == b);
	CHECK(vy_open_of(&ns, 0) == NULL);
	CHECK(vy_open_of(&ns, UINT64_MAX) == NULL);
	CHECK(vy_open_of(&ns, (uintptr_t)a) == NULL); /* what fh was before: a pointer */
	uint64_t fa = a->fh;
	CHECK_EQ(ns.handles.live, 2);
	pthread_mutex_lock(&ns.ns);
	vy_open_free(&ns, a);
	pthread_mutex_unlock(&ns.ns);
	CHECK(vy_open_of(&ns, fa) == NULL);
	CHECK_EQ(ns.handles.live, 1);
	/* b is never released: destroy frees it (a leak shows under
	 * SANITIZE=1) and the table. */
	vy_ns_destroy(&ns);
}

/* An unlinked file's inode stays while a handle is open or the kernel
 * still holds a lookup, and goes when the last of them does. */
static void unlinked_file_lives_until_last_close_and_forget(void)
{
	vy_ns ns;
	vy_inode *in = ns_with_file(&ns);
	if (!in)
		return;
	uint64_t ino = in->ino;
	vy_open *o = vy_open_new(in);
	CHECK(o != NULL);
	if (!o)
		return;
	pthread_mutex_lock(&ns.ns);
	in->nlookup = 1;
	CHECK_EQ(vy_open_add(&ns, o), 0);
	in->opens++;
	in->nlink = 0; /* unlinked while open */
	vy_ns_reap(&ns, in);
	pthread_mutex_unlock(&ns.ns);
	CHECK(vy_ns_inode(&ns, ino) == in);
	CHECK(!vy_inode_unreachable(in));
	pthread_mutex_lock(&ns.ns); /* the last close */
	in->opens--;
	vy_open_free(&ns, o);
	CHECK(vy_inode_unreachable(in));
	vy_ns_reap(&ns, in);
	pthread_mutex_unlock(&ns.ns);
	CHECK(vy_ns_inode(&ns, ino) == in); /* the kernel still holds it */
	CHECK_EQ(ns.inodes.count, 1);
	pthread_mutex_lock(&ns.ns);
	vy_inode *f = vy_ns_forget(&ns, ino, 1);
	CHECK(f == in);
	if (f)
		vy_ns_reap(&ns, f);
	pthread_mutex_unlock(&ns.ns);
	CHECK(vy_ns_inode(&ns, ino) == NULL);
	CHECK_EQ(ns.inodes.count, 0);
	CHECK_EQ(ns.handles.live, 0);
	vy_ns_destroy(&ns);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(forget_counts_down_to_zero),
		TEST_CASE(open_ids),
		TEST_CASE(unlinked_file_lives_until_last_close_and_forget),
	};
	return vy_test_main("ns", cases, sizeof(cases) / sizeof(cases[0]));
}
