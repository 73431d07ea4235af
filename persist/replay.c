/* Making the namespace again (replay.h). */
#include "persist/replay.h"
#include "core/clock.h"
#include "daemon/log.h"
#include "fs/backed.h"
#include "fs/fs.h"
#include "persist/format.h"
#include "persist/load.h"
#include "persist/preload.h"
#include "persist/replay_kernel.h"
#include "persist/replay_modules.h"
#include "persist/replay_ns.h"
#include "state/state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

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

/* The kernel's references to each inode (its lookup counts). */
static void set_lookups(vy_fs *fs, const vy_replay_walk *w, vy_replay_counts *counts)
{
	for (size_t i = 0; i < w->n; i++) {
		vy_shadow_node *node = w->node[i];
		if (!node || !node->nlookup)
			continue;
		vy_inode *in = vy_replay_inode_at(fs, w, i);
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
static vy_err find_conflicts(vy_fs *fs, const vy_replay_walk *w, vy_u64map *losers, vy_error *e)
{
	size_t n = 0, cap = 0;
	claim *c = NULL;
	for (size_t i = 0; i < w->n; i++) {
		vy_shadow_node *node = w->node[i];
		vy_inode *in = node && node->layout ? vy_replay_inode_at(fs, w, i) : NULL;
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
	if (n) /* no piece: c is NULL, which qsort may not be given */
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

static vy_err adopt_memory(vy_fs *fs, const vy_replay_walk *w, vy_keep_fds *mem, vy_replay_counts *counts, vy_error *e)
{
	vy_u64map losers;
	vy_u64map_init(&losers);
	vy_err rc = find_conflicts(fs, w, &losers, e);
	vy_keep_layout *l = rc == VY_OK ? malloc(sizeof(*l)) : NULL;
	if (rc == VY_OK && !l)
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a layout");
	for (size_t i = 0; rc == VY_OK && i < w->n; i++) {
		vy_shadow_node *node = w->node[i];
		vy_inode *in = node && node->inode ? vy_replay_inode_at(fs, w, i) : NULL;
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
		l->len = r->cap + r->lead; /* the memory's: lead, then the buffer (the shadow checked both) */
		l->lead = r->lead;
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
		in->lead = (uint16_t)r->lead;
		in->head_due = true; /* not kept: its first close or mapping reads its head (fs/file_place.h) */
		in->dev = (uint8_t)r->dev;
		counts->files++;
	}
	free(l);
	vy_u64map_destroy(&losers);
	return rc;
}

/* backing=DIR: each inode's item again, from its record where one is
 * kept, after its memory (an item is present only where memory is). */
static vy_err replay_tier(vy_fs *fs, const vy_replay_walk *w, vy_error *e)
{
	if (!fs->tier) {
		/* Kept over a directory, taken over without one (fstab's
		 * source that is no directory now): its files would read as
		 * zeros and their dirty bytes never go back. Fail closed. */
		for (size_t i = 0; i < w->n; i++)
			if (w->node[i] && w->node[i]->tier)
				return vy_fail(e, VY_EACCES, "mount it over its directory again (it is missing or moved)",
					       "the kept files came from a backing directory, and this successor has none");
		return VY_OK;
	}
	for (size_t i = 0; i < w->n; i++) {
		vy_shadow_node *node = w->node[i];
		vy_inode *in = node ? vy_replay_inode_at(fs, w, i) : NULL;
		vy_err rc = in ? vy_backed_kept(fs, in, node->tier, node->tier_len, e) : VY_OK;
		if (rc != VY_OK)
			return rc;
	}
	vy_backed_kept_all(fs);
	return VY_OK;
}

/* Inodes nothing holds (no name, no open handle, no reference of the
 * kernel's: their last release or FORGET came as the daemon died) go, from
 * the shadow too. An unlinked file a program holds open stays until its
 * last close, as it would have. */
static void drop_unheld(vy_fs *fs, vy_shadow *sh, vy_replay_walk *w, vy_replay_counts *counts)
{
	for (size_t i = 0; i < w->n; i++) {
		vy_inode *in = w->node[i] ? vy_replay_inode_at(fs, w, i) : NULL;
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
	t0 = vy_monotonic_ns();
	/* Inodes first, then the names between them, then what they hold;
	 * each walk in number order, each inode kept beside its node. */
	vy_replay_walk w = {0};
	rc = vy_shadow_by_ino(sh, &w.node, &w.n, e);
	w.in = rc == VY_OK && w.n ? calloc(w.n, sizeof(*w.in)) : NULL;
	if (rc == VY_OK && w.n && !w.in)
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory to make %zu inodes", w.n);
	if (rc == VY_OK)
		rc = vy_replay_inodes(fs, &w, counts, e);
	counts->inodes_us = (vy_monotonic_ns() - t0) / 1000;
	t0 = vy_monotonic_ns();
	if (rc == VY_OK)
		rc = vy_replay_names(fs, &w, counts, e);
	counts->names_us = (vy_monotonic_ns() - t0) / 1000;
	free(w.by); /* modules and drops change the inodes from here */
	w.by = NULL;
	if (rc == VY_OK)
		rc = vy_replay_modules(fs, sh, mem, counts, e);
	for (size_t i = 0; rc == VY_OK && i < w.n; i++) {
		vy_shadow_node *node = w.node[i];
		vy_inode *in = node->xattrs ? vy_replay_inode_at(fs, &w, i) : NULL;
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
	if (rc == VY_OK)
		rc = replay_tier(fs, &w, e);
	free(w.in);
	free(w.node);
	return rc;
}
