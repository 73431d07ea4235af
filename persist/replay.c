/* Making the namespace again (replay.h). */
#include "persist/replay.h"
#include "core/clock.h"
#include "daemon/log.h"
#include "fs/fs.h"
#include "persist/format.h"
#include "persist/load.h"
#include "persist/preload.h"
#include "persist/replay_kernel.h"
#include "persist/replay_modules.h"
#include "state/state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* How many inodes ahead the inode map's slot is fetched: enough misses in
 * flight to cover one (100,000 inodes, host: the map's misses were a third
 * of making them). */
#define PREFETCH_AHEAD 16

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

static vy_err make_inode(vy_fs *fs, const vy_p_inode *r, vy_inode **made, vy_error *e)
{
	mode_t type = r->mode & S_IFMT;
	bool fits = (r->kind == VY_DIR && type == S_IFDIR) || (r->kind == VY_FILE && type == S_IFREG) ||
		    (r->kind == VY_SYMLINK && type == S_IFLNK) ||
		    (r->kind == VY_SPECIAL && (type == S_IFIFO || type == S_IFCHR || type == S_IFBLK || type == S_IFSOCK));
	if (!fits || r->dev >= fs->ndev || r->place > fs->ndev)
		return vy_fail(e, VY_EINVAL, "umount and mount again", "kept state: inode %" PRIu64 " has kind %u, mode %o, "
			       "device %u", r->ino, r->kind, r->mode, r->dev);
	vy_inode *in = vy_inode_new_at(vy_fs_ns(fs), r->ino, (vy_kind)r->kind, r->mode, r->uid, r->gid);
	if (!in)
		return vy_fail(e, vy_fs_inode(fs, r->ino) ? VY_EINVAL : VY_ENOMEM,
			       "install the vyrefs that wrote the state, or umount and mount again",
			       "kept state: cannot make inode %" PRIu64 " again (its number is taken, or no memory)", r->ino);
	set_attrs(in, r);
	in->rdev = (dev_t)r->rdev;
	in->nlink = r->nlink;
	in->size = r->kind == VY_FILE ? r->size : 0;
	in->dev = r->dev;
	in->parent = r->parent;
	if (r->target_len) {
		in->target = strndup((const char *)(r + 1), r->target_len);
		if (!in->target || !vy_xattr_budget_take(&fs->xattr_budget, r->target_len + 1u))
			return vy_fail(e, VY_ENOMEM, "raise xattr_budget", "kept state: no room for a symlink's target");
	}
	if (r->kind != VY_DIR && r->nlink > 1)
		fs->extra_links += r->nlink - 1;
	*made = in;
	return VY_OK;
}

static vy_err give_xattrs(vy_inode *in, const uint8_t *p, uint32_t len, vy_error *e)
{
	const vy_p_xattrs *x = (const void *)p;
	uint64_t at = sizeof(*x);
	char name[256];
	for (uint32_t i = 0; i < x->n && at + 8 <= len; i++) {
		uint32_t nl, vl;
		memcpy(&nl, p + at, 4);
		memcpy(&vl, p + at + 4, 4);
		memcpy(name, p + at + 8, nl); /* checked by the shadow: 1..255 bytes, no NUL */
		name[nl] = 0;
		int err = vy_xattrs_set(&in->xattrs, name, p + at + 8 + nl, vl, 0);
		if (err)
			return vy_fail(e, err == ENOSPC ? VY_ENOSPC : VY_ENOMEM, "raise xattr_budget",
				       "kept state: inode %" PRIu64 "'s xattr %s: %s", in->ino, name, strerror(err));
		at += 8 + (uint64_t)nl + vl;
	}
	return VY_OK;
}

/* One piece of memory a file claims, to find two files claiming the same. */
typedef struct claim {
	vy_keep_slot slot;
	uint64_t at, end, seq, ino;
} claim;

static int by_place(const void *a, const void *b)
{
	const claim *x = a, *y = b;
	if (x->slot != y->slot)
		return x->slot < y->slot ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* The shadow's nodes in number order, each beside the inode made of it
 * (NULL: none made here, or a module's, made by replay_modules.c). A node
 * dropped (drop_unheld) is NULL in both. While the names are made, `by`
 * finds an inode by its number when the numbers are dense (by[ino - base],
 * span entries; NULL: sparse): a directory's children were mostly made in
 * turn, so they are neighbours there, where the inode map scatters them. */
typedef struct walk {
	vy_shadow_node **node;
	vy_inode **in;
	size_t n;
	vy_inode **by;
	uint64_t base, span;
} walk;

static vy_inode *inode_at(vy_fs *fs, const walk *w, size_t i)
{
	return w->in[i] ? w->in[i] : w->node[i] ? vy_fs_inode(fs, w->node[i]->ino) : NULL;
}

/* w->by, when the numbers are dense enough that it is small (no more than
 * two entries a node); left NULL otherwise, or with no memory. */
static void index_by_ino(walk *w)
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

static vy_inode *inode_of(vy_fs *fs, const walk *w, uint64_t ino)
{
	vy_inode *in = w->by && ino >= w->base && ino - w->base < w->span ? w->by[ino - w->base] : NULL;
	return in ? in : vy_fs_inode(fs, ino);
}

/* The kernel's references to each inode (its lookup counts). */
static void set_lookups(vy_fs *fs, const walk *w, vy_replay_counts *counts)
{
	for (size_t i = 0; i < w->n; i++) {
		vy_shadow_node *node = w->node[i];
		if (!node || !node->nlookup)
			continue;
		vy_inode *in = inode_at(fs, w, i);
		if (in)
			vy_ns_lookups_set(vy_fs_ns(fs), in, node->nlookup);
		else
			counts->lookups_lost += node->nlookup; /* a module's: its FORGET finds nothing */
	}
}

/* Files whose layouts claim memory another file's newer layout claims:
 * the older was mid-change at the death (its memory freed and taken by the
 * other before its own record). Never hand one file another's bytes: the
 * older loses its memory. Their inode numbers go into `losers`. */
static vy_err find_conflicts(vy_fs *fs, const walk *w, vy_u64map *losers, vy_error *e)
{
	size_t n = 0, cap = 0;
	claim *c = NULL;
	for (size_t i = 0; i < w->n; i++) {
		vy_shadow_node *node = w->node[i];
		vy_inode *in = node && node->layout ? inode_at(fs, w, i) : NULL;
		if (!in || in->kind != VY_FILE)
			continue;
		const vy_p_layout *l = (const void *)node->layout;
		const vy_keep_piece *pc = (const void *)(l + 1);
		for (uint32_t j = 0; j < l->n; j++) {
			if (n == cap) {
				cap = cap ? cap * 2 : 1024;
				claim *g = realloc(c, cap * sizeof(*c));
				if (!g) {
					free(c);
					return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory to check layouts");
				}
				c = g;
			}
			c[n++] = (claim){pc[j].slot, pc[j].at, pc[j].at + pc[j].bytes, node->layout_seq, node->ino};
		}
	}
	qsort(c, n, sizeof(*c), by_place);
	for (size_t i = 1; i < n; i++)
		if (c[i].slot == c[i - 1].slot && c[i].at < c[i - 1].end && c[i].ino != c[i - 1].ino) {
			uint64_t loser = c[i].seq < c[i - 1].seq ? c[i].ino : c[i - 1].ino;
			if (!vy_u64map_put(losers, loser, (void *)1)) {
				free(c);
				return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory to check layouts");
			}
		}
	free(c);
	return VY_OK;
}

/* A file whose memory cannot be taken back is empty from now on, in the
 * shadow too (so the next checkpoint keeps it so), never a file whose
 * bytes look whole and are not. */
static void lose_bytes(vy_shadow_node *node, vy_inode *in, vy_replay_counts *counts, const char *why)
{
	vy_log(LOG_ERR, "takeover: file inode %" PRIu64 " lost its bytes (%s); it is empty now (Fix: write it again)",
	       in->ino, why);
	in->size = in->cap = in->holes = 0;
	in->buf = 0;
	((vy_p_inode *)(void *)node->inode)->size = 0;
	vy_p_layout *l = (void *)node->layout;
	*l = (vy_p_layout){.ino = in->ino, .dev = l->dev};
	node->layout_len = sizeof(*l);
	counts->lost++;
}

static vy_err adopt_memory(vy_fs *fs, const walk *w, vy_keep_fds *mem, vy_replay_counts *counts, vy_error *e)
{
	vy_u64map losers;
	vy_u64map_init(&losers);
	vy_err rc = find_conflicts(fs, w, &losers, e);
	vy_keep_layout *l = rc == VY_OK ? malloc(sizeof(*l)) : NULL;
	if (rc == VY_OK && !l)
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a layout");
	for (size_t i = 0; rc == VY_OK && i < w->n; i++) {
		vy_shadow_node *node = w->node[i];
		vy_inode *in = node && node->inode ? inode_at(fs, w, i) : NULL;
		if (!in || in->kind != VY_FILE || !node->layout)
			continue;
		const vy_p_layout *r = (const void *)node->layout;
		if (r->lost) {
			lose_bytes(node, in, counts, "its memory was not with the keeper");
			continue;
		}
		if (r->cap == 0)
			continue; /* no buffer */
		if (vy_u64map_get(&losers, in->ino)) {
			lose_bytes(node, in, counts, "its memory was another file's by the time of the death");
			continue;
		}
		memset(l, 0, sizeof(*l));
		l->len = r->cap;
		l->n = r->n;
		memcpy(l->piece, r + 1, r->n * sizeof(vy_keep_piece));
		vy_handle h;
		vy_error why;
		if (r->dev >= fs->ndev || vy_store_keep_adopt(fs->dev[r->dev].core->store, l, mem, &h, &why) != VY_OK) {
			lose_bytes(node, in, counts, r->dev >= fs->ndev ? "its device is not in this mount" : why.msg);
			continue;
		}
		in->buf = h;
		in->cap = r->cap;
		in->holes = r->holes;
		in->dev = (uint8_t)r->dev;
		counts->files++;
	}
	free(l);
	vy_u64map_destroy(&losers);
	return rc;
}

/* Inodes nothing holds (no name, no open handle, no reference of the
 * kernel's: their last release or FORGET came as the daemon died) go, from
 * the shadow too. An unlinked file a program holds open stays until its
 * last close, as it would have. */
static void drop_unheld(vy_fs *fs, vy_shadow *sh, walk *w, vy_replay_counts *counts)
{
	for (size_t i = 0; i < w->n; i++) {
		vy_inode *in = w->node[i] ? inode_at(fs, w, i) : NULL;
		if (!in || in->fixed || in->nlink != 0 || in->opens != 0 || in->nlookup != 0)
			continue;
		uint64_t ino = w->node[i]->ino;
		vy_ns_reap(vy_fs_ns(fs), in);
		vy_shadow_forget(sh, ino); /* frees the node: not walked again */
		w->node[i] = NULL;
		w->in[i] = NULL;
		counts->dropped++;
	}
}

vy_err vy_replay(struct vy_fs *fs, struct vy_state *st, vy_keep_fds *mem, struct vy_preload *pre, vy_shadow *sh,
		 vy_replay_counts *counts, vy_error *e)
{
	memset(counts, 0, sizeof(*counts));
	vy_load_ctx c = {.shadow = sh};
	vy_state_loaded loaded = {0};
	uint64_t t0 = vy_monotonic_ns(), seq;
	vy_err rc;
	if (vy_preload_take(pre, st, sh, &seq, &counts->followed)) {
		/* A standby's copy: only the records after its last step. */
		vy_state_root root = vy_state_root_get(st);
		c.records = counts->followed;
		rc = vy_state_log_scan(st, root.set ? root.seq : 0, seq, vy_load_record, &c, &loaded.log, e);
	} else {
		vy_shadow_init(sh);
		rc = vy_state_load(st, vy_load_section, vy_load_record, &c, &loaded, e);
	}
	counts->records = c.records;
	counts->load_us = (vy_monotonic_ns() - t0) / 1000;
	if (rc != VY_OK)
		return rc;
	if (!sh->has_ns)
		return vy_fail(e, VY_ENOENT, "nothing to do", "the state region keeps no namespace yet");
	if (loaded.log.stopped)
		vy_log(LOG_WARNING, "takeover: the kept log ends early: %s", loaded.log.why);
	fs->generation = sh->generation;
	/* Inodes first, then the names between them, then what they hold;
	 * each walk in number order, each inode kept beside its node. */
	walk w = {0};
	rc = vy_shadow_by_ino(sh, &w.node, &w.n, e);
	w.in = rc == VY_OK && w.n ? calloc(w.n, sizeof(*w.in)) : NULL;
	if (rc == VY_OK && w.n && (!w.in || !vy_ns_reserve(vy_fs_ns(fs), w.n)))
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory to make %zu inodes", w.n);
	for (size_t i = 0; rc == VY_OK && i < w.n; i++) {
		if (i + PREFETCH_AHEAD < w.n)
			vy_ns_prefetch(vy_fs_ns(fs), w.node[i + PREFETCH_AHEAD]->ino);
		const vy_p_inode *r = (const void *)w.node[i]->inode;
		if (!r)
			continue;
		if (r->ino == VY_NS_ROOT) {
			vy_inode *root = vy_fs_inode(fs, VY_NS_ROOT);
			set_attrs(root, r);
			root->nlink = r->nlink;
			w.in[i] = root;
			continue;
		}
		rc = make_inode(fs, r, &w.in[i], e);
		counts->inodes += rc == VY_OK;
	}
	if (rc == VY_OK)
		index_by_ino(&w);
	for (size_t i = 0; rc == VY_OK && i < w.n; i++) {
		vy_shadow_node *node = w.node[i];
		vy_inode *dir = node->has_names ? inode_at(fs, &w, i) : NULL;
		if (!dir || dir->kind != VY_DIR)
			continue;
		for (const vy_dirent *d = vy_dir_next(&node->names, 0); rc == VY_OK && d; d = vy_dir_next(&node->names, d->cookie)) {
			vy_inode *child = inode_of(fs, &w, d->ino);
			if (!child || child->fixed || vy_dir_find(&dir->dir, d->name)) {
				vy_log(LOG_WARNING, "takeover: kept name %s in directory inode %" PRIu64 " names %s; left out",
				       d->name, dir->ino, child ? "a name taken already" : "no kept inode");
				continue;
			}
			/* Its place (readdir cookie) as it was; another if this
			 * daemon's own entries took it. */
			if (!vy_dir_add_at(&dir->dir, d->name, d->ino, d->cookie) && !vy_dir_add(&dir->dir, d->name, d->ino))
				rc = vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a name");
			counts->names++;
		}
	}
	free(w.by); /* modules and drops change the inodes from here */
	w.by = NULL;
	if (rc == VY_OK)
		rc = vy_replay_modules(fs, sh, mem, counts, e);
	for (size_t i = 0; rc == VY_OK && i < w.n; i++) {
		vy_shadow_node *node = w.node[i];
		vy_inode *in = node->xattrs ? inode_at(fs, &w, i) : NULL;
		if (in)
			rc = give_xattrs(in, node->xattrs, node->xattrs_len, e);
	}
	if (rc == VY_OK)
		fs->next_ino = sh->next_ino > fs->next_ino ? sh->next_ino : fs->next_ino;
	if (rc == VY_OK) {
		set_lookups(fs, &w, counts);
		rc = vy_replay_kernel_refs(fs, sh, counts, e);
	}
	if (rc == VY_OK)
		drop_unheld(fs, sh, &w, counts);
	t0 = vy_monotonic_ns();
	if (rc == VY_OK)
		rc = adopt_memory(fs, &w, mem, counts, e);
	counts->memory_us = (vy_monotonic_ns() - t0) / 1000;
	free(w.in);
	free(w.node);
	return rc;
}
