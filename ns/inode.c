/* The inode table: creation, lifetime (names, lookups, opens), attributes. */
#include "ns/ns.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void vy_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
}

vy_inode *vy_inode_new(vy_ns *ns, vy_kind kind, mode_t mode, uid_t uid, gid_t gid)
{
	return vy_inode_new_at(ns, ns->next_ino, kind, mode, uid, gid);
}

bool vy_ns_reserve(vy_ns *ns, size_t more)
{
	return more <= SIZE_MAX - ns->inodes.count && vy_u64map_reserve(&ns->inodes, ns->inodes.count + more);
}

void vy_ns_prefetch(vy_ns *ns, uint64_t ino)
{
	vy_u64map_prefetch(&ns->inodes, ino);
}

vy_inode *vy_inode_make(vy_ns *ns, uint64_t ino, vy_kind kind, mode_t mode, uid_t uid, gid_t gid)
{
	vy_inode *in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	if (pthread_rwlock_init(&in->lock, NULL) != 0) {
		free(in);
		return NULL;
	}
	if (pthread_mutex_init(&in->meta, NULL) != 0) {
		pthread_rwlock_destroy(&in->lock);
		free(in);
		return NULL;
	}
	in->ino = ino;
	in->kind = kind;
	in->xattrs.budget = &ns->xattr_budget;
	in->mode = mode;
	in->uid = uid;
	in->gid = gid;
	if (kind == VY_DIR)
		vy_dir_init(&in->dir);
	return in;
}

bool vy_ns_insert(vy_ns *ns, vy_inode *in)
{
	uint64_t ino = in->ino;
	if (ino == 0 || ino == UINT64_MAX || vy_u64map_get(&ns->inodes, ino) || !vy_u64map_put(&ns->inodes, ino, in))
		return false;
	if (ino >= ns->next_ino)
		ns->next_ino = ino + 1;
	return true;
}

vy_inode *vy_inode_new_at(vy_ns *ns, uint64_t ino, vy_kind kind, mode_t mode, uid_t uid, gid_t gid)
{
	vy_inode *in = vy_inode_make(ns, ino, kind, mode, uid, gid);
	if (!in)
		return NULL;
	vy_now(&in->mtime);
	in->atime = in->ctime = in->btime = in->mtime;
	if (!vy_ns_insert(ns, in)) {
		vy_inode_discard(in);
		return NULL;
	}
	return in;
}

/* Bytes of xattrs and modules freed since malloc last gave memory back. */
static _Atomic uint64_t freed_since_trim;

/* Deleting files gives the daemon's memory back to the system, not only to
 * malloc's free lists (now and then: a trim walks every arena). */
static void gave_back(uint64_t bytes)
{
	if (bytes && atomic_fetch_add(&freed_since_trim, bytes) + bytes >= (1u << 20)) {
		atomic_store(&freed_since_trim, 0);
		malloc_trim(0);
	}
}

static void inode_free(vy_inode *in)
{
	if (in->kind == VY_DIR)
		vy_dir_destroy(&in->dir);
	uint64_t big = in->xattrs.bytes + in->dlen;
	if (in->kind == VY_SYMLINK && in->target && in->xattrs.budget)
		vy_xattr_budget_give(in->xattrs.budget, strlen(in->target) + 1);
	free(in->target);
	free(in->data);
	vy_xattrs_destroy(&in->xattrs);
	gave_back(big);
	pthread_mutex_destroy(&in->meta);
	pthread_rwlock_destroy(&in->lock);
	free(in);
}

void vy_inode_discard(vy_inode *in)
{
	inode_free(in);
}

bool vy_inode_unreachable(const vy_inode *in)
{
	return in->nlink == 0 && in->opens == 0 && !in->fixed;
}

void vy_ns_reap(vy_ns *ns, vy_inode *in)
{
	if (!vy_inode_unreachable(in))
		return;
	if (in->xattrs.n) {
		/* Nor its xattrs: free them now, not when the kernel forgets the
		 * inode, which may be much later. */
		pthread_rwlock_wrlock(&in->lock);
		uint64_t bytes = in->xattrs.bytes;
		vy_xattr_budget *budget = in->xattrs.budget;
		vy_xattrs_destroy(&in->xattrs);
		in->xattrs.budget = budget;
		pthread_rwlock_unlock(&in->lock);
		gave_back(bytes);
	}
	if (in->nlookup > 0 || in->holds > 0)
		return;
	vy_u64map_remove(&ns->inodes, in->ino);
	inode_free(in);
}

/* Whether an inode's references count in ns->lookups: the namespace's own
 * inodes, not .vyre's (reading .vyre/stats would change what it says). */
static bool summed(const vy_inode *in)
{
	return !in->fixed && in->kind != VY_VIRTUAL && in->kind != VY_MODULE;
}

void vy_ns_looked_up(vy_ns *ns, vy_inode *in)
{
	in->nlookup++;
	ns->lookups += summed(in);
}

void vy_ns_not_looked_up(vy_ns *ns, vy_inode *in)
{
	in->nlookup--;
	ns->lookups -= summed(in);
}

void vy_ns_lookups_set(vy_ns *ns, vy_inode *in, uint64_t n)
{
	if (summed(in))
		ns->lookups = ns->lookups - in->nlookup + n;
	in->nlookup = n;
}

vy_inode *vy_ns_forget(vy_ns *ns, uint64_t ino, uint64_t n)
{
	vy_inode *in = vy_u64map_get(&ns->inodes, ino);
	uint64_t had = in ? in->nlookup : 0, gone = n > had ? had : n;
	if (in)
		in->nlookup -= gone;
	if (in && summed(in))
		ns->lookups -= gone;
	ns->forgets_unmatched += n - gone;
	return in;
}

vy_inode *vy_ns_inode(vy_ns *ns, uint64_t ino)
{
	pthread_mutex_lock(&ns->ns);
	vy_inode *in = vy_u64map_get(&ns->inodes, ino);
	pthread_mutex_unlock(&ns->ns);
	return in;
}

unsigned vy_inode_attr_flags(vy_inode *in)
{
	pthread_mutex_lock(&in->meta);
	unsigned f = in->attr_flags;
	pthread_mutex_unlock(&in->meta);
	return f;
}

void vy_inode_touch(vy_inode *in, bool modified)
{
	pthread_mutex_lock(&in->meta);
	vy_now(&in->ctime);
	if (modified)
		in->mtime = in->ctime;
	pthread_mutex_unlock(&in->meta);
}

mode_t vy_inode_type(const vy_inode *in)
{
	switch (in->kind) {
	case VY_DIR: return S_IFDIR;
	case VY_SYMLINK: return S_IFLNK;
	case VY_FILE:
	case VY_VIRTUAL:
	case VY_MODULE: break;
	case VY_SPECIAL: return in->mode & S_IFMT; /* never changes: no lock */
	}
	return S_IFREG;
}

bool vy_ns_init(vy_ns *ns, uint64_t xattr_max)
{
	memset(ns, 0, sizeof(*ns));
	ns->next_ino = VY_NS_ROOT;
	ns->xattr_budget.max = xattr_max;
	vy_u64map_init(&ns->inodes);
	vy_handles_init(&ns->handles, VY_NS_HANDLES_MAX);
	return pthread_mutex_init(&ns->ns, NULL) == 0;
}

void vy_ns_destroy(vy_ns *ns)
{
	uint64_t at = 0, fh;
	vy_open *o;
	while (vy_handles_next_file(&ns->handles, &at, &fh, &o)) /* releases the kernel did not send */
		vy_open_free(ns, o);
	vy_handles_destroy(&ns->handles); /* and the directories' */
	uint64_t key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&ns->inodes, &cursor, &key, &value))
		inode_free(value);
	vy_u64map_destroy(&ns->inodes);
	pthread_mutex_destroy(&ns->ns);
}
