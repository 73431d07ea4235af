/* A takeover's first steps (persist/replay_ns.h): kept inodes and names
 * made again on several workers into a fresh fs: every inode with its
 * number and attributes, every name at its readdir place, the links
 * counted once; a bad record or a number taken fails with a Fix, leaving
 * no inode made outside the table. */
#include "fs/fs.h"
#include "persist/format.h"
#include "persist/replay_ns.h"
#include "tests/unit/fs_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A kept namespace: the root, `dirs` directories under it of `files`
 * files each (every third file with 2 links), and a symlink. */
typedef struct kept {
	vy_replay_walk w;
	uint64_t first; /* the first number after fs's own inodes */
	size_t dirs, files;
} kept;

static vy_shadow_node *node(uint64_t ino, vy_kind kind, uint32_t mode, uint32_t nlink, const char *target)
{
	vy_shadow_node *n = calloc(1, sizeof(*n));
	size_t tl = target ? strlen(target) : 0;
	vy_p_inode *r = calloc(1, sizeof(*r) + tl);
	if (!n || !r)
		exit(2);
	*r = (vy_p_inode){.ino = ino, .kind = kind, .mode = mode, .uid = 1000 + (uint32_t)(ino % 7),
			  .gid = 2000, .nlink = nlink, .size = kind == VY_FILE ? ino : 0, .target_len = (uint32_t)tl};
	r->mtime = (vy_p_time){.sec = (int64_t)ino, .nsec = 5};
	memcpy(r + 1, target ? target : "", tl);
	n->ino = ino;
	n->inode = (uint8_t *)r;
	n->inode_len = (uint32_t)(sizeof(*r) + tl);
	if (kind == VY_DIR) {
		n->has_names = true;
		vy_dir_init(&n->names);
	}
	return n;
}

static uint64_t dir_ino(const kept *k, size_t d)
{
	return k->first + d * (k->files + 1);
}

static void build(kept *k, vy_fs *fs, size_t dirs, size_t files)
{
	k->dirs = dirs;
	k->files = files;
	k->first = vy_fs_ns(fs)->next_ino;
	k->w.n = 1 + dirs * (files + 1) + 1;
	k->w.node = calloc(k->w.n, sizeof(*k->w.node));
	k->w.in = calloc(k->w.n, sizeof(*k->w.in));
	if (!k->w.node || !k->w.in)
		exit(2);
	size_t i = 0;
	vy_shadow_node *root = k->w.node[i++] = node(VY_NS_ROOT, VY_DIR, S_IFDIR | 0751, 2 + (uint32_t)dirs, NULL);
	char name[32];
	for (size_t d = 0; d < dirs; d++) {
		uint64_t di = dir_ino(k, d);
		vy_shadow_node *dn = k->w.node[i++] = node(di, VY_DIR, S_IFDIR | 0755, 2, NULL);
		snprintf(name, sizeof(name), "d%zu", d);
		CHECK(vy_dir_add_at(&root->names, name, di, 1000 + 3 * d));
		for (size_t f = 0; f < files; f++) {
			uint64_t fi = di + 1 + f;
			k->w.node[i++] = node(fi, VY_FILE, S_IFREG | 0640, f % 3 == 0 ? 2 : 1, NULL);
			snprintf(name, sizeof(name), "f%zu", f);
			CHECK(vy_dir_add_at(&dn->names, name, fi, 7 + 2 * f));
		}
	}
	uint64_t li = dir_ino(k, dirs);
	k->w.node[i++] = node(li, VY_SYMLINK, S_IFLNK | 0777, 1, "d0/f1");
	CHECK(vy_dir_add_at(&root->names, "link", li, 999));
	CHECK_EQ(i, k->w.n);
}

static void unbuild(kept *k)
{
	for (size_t i = 0; i < k->w.n; i++) {
		if (k->w.node[i]->has_names)
			vy_dir_destroy(&k->w.node[i]->names);
		free(k->w.node[i]->inode);
		free(k->w.node[i]);
	}
	free(k->w.node);
	free(k->w.in);
	free(k->w.by);
}

static void many_made_and_named_on_workers(void)
{
	vy_test_fs f;
	vy_test_fs_open(&f);
	kept k = {0};
	build(&k, &f.fs, 40, 500); /* 20,042 nodes: several workers where there are CPUs */
	size_t before = vy_fs_ns(&f.fs)->inodes.count;
	uint64_t links0 = f.fs.extra_links;
	vy_replay_counts n = {0};
	MUST(vy_replay_inodes(&f.fs, &k.w, &n, E));
	MUST(vy_replay_names(&f.fs, &k.w, &n, E));
	CHECK_EQ(n.inodes, k.w.n - 1); /* the root is fs's own */
	CHECK_EQ(vy_fs_ns(&f.fs)->inodes.count, before + k.w.n - 1);
	CHECK_EQ(n.names, k.dirs * k.files + k.dirs + 1);
	uint64_t links = 0;
	size_t wrong = 0;
	for (size_t i = 0; i < k.w.n; i++) {
		const vy_p_inode *r = (const void *)k.w.node[i]->inode;
		vy_inode *in = vy_fs_inode(&f.fs, r->ino);
		wrong += !in || in != k.w.in[i] || in->ino != r->ino || in->kind != (vy_kind)r->kind ||
			 in->mode != r->mode || in->uid != r->uid || in->gid != r->gid || in->nlink != r->nlink ||
			 in->mtime.tv_sec != r->mtime.sec || in->mtime.tv_nsec != r->mtime.nsec ||
			 in->size != (r->kind == VY_FILE ? r->ino : 0);
		if (r->kind == VY_FILE && r->nlink > 1)
			links += r->nlink - 1;
	}
	CHECK_EQ(wrong, 0);
	CHECK_EQ(f.fs.extra_links - links0, links);
	/* Every name at its place, naming its inode. */
	for (size_t i = 0; i < k.w.n; i++) {
		vy_shadow_node *nd = k.w.node[i];
		if (!nd->has_names)
			continue;
		vy_inode *dir = vy_fs_inode(&f.fs, nd->ino);
		for (const vy_dirent *d = vy_dir_next(&nd->names, 0); d; d = vy_dir_next(&nd->names, d->cookie)) {
			const vy_dirent *got = vy_dir_find(&dir->dir, d->name);
			wrong += !got || got->ino != d->ino || got->cookie != d->cookie;
		}
	}
	CHECK_EQ(wrong, 0);
	vy_inode *link = vy_fs_inode(&f.fs, dir_ino(&k, k.dirs));
	CHECK(link && link->target && !strcmp(link->target, "d0/f1"));
	unbuild(&k);
	vy_test_fs_close(&f);
}

static void a_bad_record_leaves_nothing_made(void)
{
	vy_test_fs f;
	vy_test_fs_open(&f);
	kept k = {0};
	build(&k, &f.fs, 8, 600);
	vy_p_inode *bad = (void *)k.w.node[1 + 4 * (k.files + 1) + 5]->inode; /* d4/f4 */
	CHECK_EQ(bad->kind, VY_FILE);
	bad->mode = S_IFDIR | 0644; /* a file's record with a directory's mode */
	size_t before = vy_fs_ns(&f.fs)->inodes.count;
	vy_replay_counts n = {0};
	MUST_FAIL(VY_EINVAL, vy_replay_inodes(&f.fs, &k.w, &n, E));
	CHECK(strstr(vy_test_last_error.msg, "has kind") != NULL);
	CHECK_EQ(vy_fs_ns(&f.fs)->inodes.count, before);
	size_t left = 0;
	for (size_t i = 0; i < k.w.n; i++)
		left += k.w.in[i] != NULL;
	CHECK_EQ(left, 0);
	CHECK_EQ(n.inodes, 0);
	unbuild(&k);
	vy_test_fs_close(&f);
}

static void a_taken_number_frees_the_rest(void)
{
	vy_test_fs f;
	vy_test_fs_open(&f);
	kept k = {0};
	build(&k, &f.fs, 8, 600);
	size_t at = k.w.n / 2;
	uint64_t taken = k.w.node[at]->ino;
	pthread_mutex_lock(&f.fs.ns);
	vy_inode *squat = vy_inode_new_at(vy_fs_ns(&f.fs), taken, VY_FILE, S_IFREG | 0600, 0, 0);
	pthread_mutex_unlock(&f.fs.ns);
	CHECK(squat != NULL);
	vy_replay_counts n = {0};
	MUST_FAIL(VY_EINVAL, vy_replay_inodes(&f.fs, &k.w, &n, E));
	CHECK(strstr(vy_test_last_error.msg, "number is taken") != NULL);
	/* Those before it are in the table (fs serves no such namespace, and
	 * frees them with it); from it on, none is made. */
	size_t wrong = 0;
	for (size_t i = 1; i < k.w.n; i++)
		wrong += i < at ? k.w.in[i] != vy_fs_inode(&f.fs, k.w.node[i]->ino) : k.w.in[i] != NULL;
	CHECK_EQ(wrong, 0);
	CHECK(vy_fs_inode(&f.fs, taken) == squat);
	unbuild(&k);
	vy_test_fs_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(many_made_and_named_on_workers),
		TEST_CASE(a_bad_record_leaves_nothing_made),
		TEST_CASE(a_taken_number_frees_the_rest),
	};
	return vy_test_main("replay_ns", cases, sizeof(cases) / sizeof(cases[0]));
}
