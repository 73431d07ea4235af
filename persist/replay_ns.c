/* The kept inodes and names made again, on several threads (replay_ns.h). */
#include "persist/replay_ns.h"
#include "core/parallel.h"
#include "daemon/log.h"
#include "fs/fs.h"
#include "persist/format.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* How many inodes ahead the inode map's slot is fetched: enough misses in
 * flight to cover one (100,000 inodes, host: the map's misses were a third
 * of making them). */
#define PREFETCH_AHEAD 16
/* No thread for fewer nodes than this each (starting one costs tens of
 * microseconds; a node, half of one). */
#define NODES_PER_WORKER 2048
/* Nodes a worker takes at a time: inodes cost alike; directories do not,
 * and are one node in hundreds, so they are taken a few at a time. */
#define INODE_CHUNK 512
#define NAME_CHUNK 64

/* One worker's outcome. */
typedef struct part {
	vy_err rc;
	vy_error e;
	uint64_t made, extra_links;
} part;

typedef struct job {
	vy_fs *fs;
	vy_replay_walk *w;
	atomic_bool failed; /* one worker failed: the others stop */
	part part[VY_PARALLEL_MAX];
} job;

static struct timespec ts(vy_p_time t)
{
	return (struct timespec){.tv_sec = t.sec, .tv_nsec = t.nsec};
}

/* An inode's attributes from its record. */
static void set_attrs(vy_inode *in, const vy_p_inode *r)
{
	in->mode = (in->mode & S_IFMT) | (r->mode & 07777);
	in->uid = r->uid;
	in->gid = r->gid;
	in->atime = ts(r->atime);
	in->mtime = ts(r->mtime);
	in->ctime = ts(r->ctime);
	in->btime = ts(r->btime);
	in->attr_flags = r->attr_flags;
	in->place = r->place;
}

/* Inode `r` made, in no table yet (any thread: it touches nothing shared
 * but the xattr budget, which is atomic). */
static vy_err make_inode(vy_fs *fs, const vy_p_inode *r, vy_inode **made, part *p)
{
	mode_t type = r->mode & S_IFMT;
	bool fits = (r->kind == VY_DIR && type == S_IFDIR) || (r->kind == VY_FILE && type == S_IFREG) ||
		    (r->kind == VY_SYMLINK && type == S_IFLNK) ||
		    (r->kind == VY_SPECIAL && (type == S_IFIFO || type == S_IFCHR || type == S_IFBLK || type == S_IFSOCK));
	if (!fits || r->dev >= fs->ndev || r->place > fs->ndev)
		return vy_fail(&p->e, VY_EINVAL, "umount and mount again", "kept state: inode %" PRIu64 " has kind %u, mode "
			       "%o, device %u", r->ino, r->kind, r->mode, r->dev);
	vy_inode *in = vy_inode_make(vy_fs_ns(fs), r->ino, (vy_kind)r->kind, r->mode, r->uid, r->gid);
	if (!in)
		return vy_fail(&p->e, VY_ENOMEM, "free host memory", "kept state: no memory to make inode %" PRIu64, r->ino);
	set_attrs(in, r);
	in->rdev = (dev_t)r->rdev;
	in->nlink = r->nlink;
	in->size = r->kind == VY_FILE ? r->size : 0;
	in->dev = r->dev;
	/* An O_TMPFILE file linkat may still name (issue "survive 2", 8c). */
	in->linkable = r->kind == VY_FILE && r->linkable;
	in->parent = r->parent;
	if (r->target_len) {
		in->target = strndup((const char *)(r + 1), r->target_len);
		if (!in->target || !vy_xattr_budget_take(&fs->xattr_budget, r->target_len + 1u)) {
			free(in->target); /* not the budget's: vy_inode_discard gives nothing back */
			in->target = NULL;
			vy_inode_discard(in);
			return vy_fail(&p->e, VY_ENOMEM, "raise xattr_budget", "kept state: no room for a symlink's target");
		}
	}
	if (r->kind != VY_DIR && r->nlink > 1)
		p->extra_links += r->nlink - 1;
	p->made++;
	*made = in;
	return VY_OK;
}

static void fail(job *j, part *p, vy_err rc)
{
	p->rc = rc;
	atomic_store(&j->failed, true);
}

static void make_some(void *ctx, unsigned worker, size_t lo, size_t hi)
{
	job *j = ctx;
	part *p = &j->part[worker];
	for (size_t i = lo; i < hi && !atomic_load_explicit(&j->failed, memory_order_relaxed); i++) {
		const vy_p_inode *r = (const void *)j->w->node[i]->inode;
		if (!r || r->ino == VY_NS_ROOT)
			continue; /* the root is fs's own: put in place on one thread */
		vy_err rc = make_inode(j->fs, r, &j->w->in[i], p);
		if (rc != VY_OK)
			fail(j, p, rc);
	}
}

/* The first failure of a run's workers into *e. */
static vy_err outcome(job *j, unsigned workers, vy_error *e)
{
	for (unsigned k = 0; k < workers; k++)
		if (j->part[k].rc != VY_OK) {
			*e = j->part[k].e;
			return j->part[k].rc;
		}
	return VY_OK;
}

/* w->by, when the numbers are dense enough that it is small (no more than
 * two entries a node); left NULL otherwise, or with no memory. */
static void index_by_ino(vy_replay_walk *w)
{
	if (!w->n)
		return;
	w->base = w->node[0]->ino;
	w->span = w->node[w->n - 1]->ino - w->base + 1;
	if (w->span > 2 * (uint64_t)w->n + 1024 || !(w->by = calloc(w->span, sizeof(*w->by))))
		return;
	for (size_t i = 0; i < w->n; i++)
		w->by[w->node[i]->ino - w->base] = w->in[i];
}

vy_inode *vy_replay_inode_at(vy_fs *fs, const vy_replay_walk *w, size_t i)
{
	return w->in[i] ? w->in[i] : w->node[i] ? vy_fs_inode(fs, w->node[i]->ino) : NULL;
}

static vy_inode *inode_of(vy_fs *fs, const vy_replay_walk *w, uint64_t ino)
{
	vy_inode *in = w->by && ino >= w->base && ino - w->base < w->span ? w->by[ino - w->base] : NULL;
	return in ? in : vy_fs_inode(fs, ino);
}

/* The inodes made into the table, on this thread (the map is not shared
 * between writers), in number order with the slots fetched ahead. */
static vy_err insert_all(vy_fs *fs, vy_replay_walk *w, vy_error *e)
{
	vy_ns *ns = vy_fs_ns(fs);
	/* The root is fs's own, the first node when it is kept. */
	const vy_p_inode *r = w->n ? (const void *)w->node[0]->inode : NULL;
	if (r && r->ino == VY_NS_ROOT) {
		vy_inode *root = vy_fs_inode(fs, VY_NS_ROOT);
		set_attrs(root, r);
		root->nlink = r->nlink;
		w->in[0] = root;
	}
	size_t i = 0;
	vy_err rc = VY_OK;
	for (; i < w->n; i++) {
		vy_inode *in = w->in[i];
		if (i + PREFETCH_AHEAD < w->n && w->in[i + PREFETCH_AHEAD])
			vy_ns_prefetch(ns, w->in[i + PREFETCH_AHEAD]->ino);
		if (!in || in->ino == VY_NS_ROOT || vy_ns_insert(ns, in))
			continue;
		rc = vy_fail(e, vy_fs_inode(fs, in->ino) ? VY_EINVAL : VY_ENOMEM,
			     "install the vyrefs that wrote the state, or umount and mount again",
			     "kept state: cannot make inode %" PRIu64 " again (its number is taken, or no memory)", in->ino);
		break;
	}
	for (; i < w->n; i++) /* what is in no table yet goes */
		if (w->in[i] && w->in[i]->ino != VY_NS_ROOT) {
			vy_inode_discard(w->in[i]);
			w->in[i] = NULL;
		}
	return rc;
}

vy_err vy_replay_inodes(vy_fs *fs, vy_replay_walk *w, vy_replay_counts *counts, vy_error *e)
{
	if (w->n && !vy_ns_reserve(vy_fs_ns(fs), w->n))
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory to make %zu inodes", w->n);
	job *j = calloc(1, sizeof(*j));
	if (!j)
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory to make %zu inodes", w->n);
	j->fs = fs;
	j->w = w;
	unsigned workers = vy_parallel_workers(w->n, NODES_PER_WORKER);
	vy_parallel_run(w->n, INODE_CHUNK, workers, make_some, j);
	vy_err rc = outcome(j, workers, e);
	if (rc != VY_OK) {
		for (size_t i = 0; i < w->n; i++)
			if (w->in[i]) {
				vy_inode_discard(w->in[i]);
				w->in[i] = NULL;
			}
	} else {
		rc = insert_all(fs, w, e);
	}
	for (unsigned k = 0; rc == VY_OK && k < workers; k++) {
		counts->inodes += j->part[k].made;
		fs->extra_links += j->part[k].extra_links;
	}
	free(j);
	if (rc == VY_OK)
		index_by_ino(w);
	return rc;
}

static void name_some(void *ctx, unsigned worker, size_t lo, size_t hi)
{
	job *j = ctx;
	part *p = &j->part[worker];
	vy_fs *fs = j->fs;
	const vy_replay_walk *w = j->w;
	for (size_t i = lo; i < hi && !atomic_load_explicit(&j->failed, memory_order_relaxed); i++) {
		vy_shadow_node *node = w->node[i];
		vy_inode *dir = node->has_names ? vy_replay_inode_at(fs, w, i) : NULL;
		if (!dir || dir->kind != VY_DIR)
			continue;
		/* Only this worker writes dir; the others only read inodes. */
		for (const vy_dirent *d = vy_dir_next(&node->names, 0); d; d = vy_dir_next(&node->names, d->cookie)) {
			vy_inode *child = inode_of(fs, w, d->ino);
			if (!child || child->fixed || vy_dir_find(&dir->dir, d->name)) {
				vy_log(LOG_WARNING, "takeover: kept name %s in directory inode %" PRIu64 " names %s; left out",
				       d->name, dir->ino, child ? "a name taken already" : "no kept inode");
				continue;
			}
			/* Its place (readdir cookie) as it was; another if this
			 * daemon's own entries took it. */
			if (!vy_dir_add_at(&dir->dir, d->name, d->ino, d->cookie) && !vy_dir_add(&dir->dir, d->name, d->ino)) {
				vy_fail(&p->e, VY_ENOMEM, "free host memory", "kept state: no memory for a name");
				fail(j, p, VY_ENOMEM);
				return;
			}
			p->made++;
		}
	}
}

vy_err vy_replay_names(vy_fs *fs, vy_replay_walk *w, vy_replay_counts *counts, vy_error *e)
{
	job *j = calloc(1, sizeof(*j));
	if (!j)
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for the names");
	j->fs = fs;
	j->w = w;
	unsigned workers = vy_parallel_workers(w->n, NODES_PER_WORKER);
	vy_parallel_run(w->n, NAME_CHUNK, workers, name_some, j);
	vy_err rc = outcome(j, workers, e);
	for (unsigned k = 0; k < workers; k++)
		counts->names += j->part[k].made;
	free(j);
	return rc;
}
