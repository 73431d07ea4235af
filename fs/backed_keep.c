/* A backing mount's files kept for a successor (survive=on, backed.h):
 * each file's record (persist/format.h vy_p_tier) written as its units,
 * its agreement with DIR or its pin change, before the change is
 * answered; a successor makes every item again from the records and the
 * namespace, and writes back what the dead daemon had not. */
#include "fs/backed.h"
#include "core/clock.h"
#include "daemon/log.h"
#include "persist/format.h"
#include "persist/writer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The units set in any of a, b, c (c may be NULL) into out: false without
 * memory. */
static bool union_of(vy_tier_units *out, const vy_tier_units *a, const vy_tier_units *b, const vy_tier_units *c)
{
	const vy_tier_units *v[3] = {a, b, c};
	memset(out, 0, sizeof(*out));
	for (int k = 0; k < 3; k++) {
		if (!v[k])
			continue;
		uint64_t top = v[k]->words * 64;
		for (uint64_t i = vy_tier_units_next(v[k], 0, top, true); i < top;) {
			uint64_t j = vy_tier_units_next(v[k], i, top, false);
			if (!vy_tier_units_set(out, i, j)) {
				vy_tier_units_free(out);
				return false;
			}
			i = j < top ? vy_tier_units_next(v[k], j, top, true) : top;
		}
	}
	return true;
}

/* The runs of u into out (NULL: only counted): how many. */
static uint32_t runs_of(const vy_tier_units *u, vy_p_run *out)
{
	uint32_t n = 0;
	uint64_t top = u->words * 64;
	for (uint64_t a = vy_tier_units_next(u, 0, top, true); a < top && n <= VY_P_TIER_RUNS_MAX;) {
		uint64_t b = vy_tier_units_next(u, a, top, false);
		if (out)
			out[n] = (vy_p_run){.first = a, .count = b - a};
		n++;
		a = b < top ? vy_tier_units_next(u, b, top, true) : top;
	}
	return n;
}

void vy_backed_keep(vy_fs *fs, vy_inode *in)
{
	vy_tier_item *it = in->tier;
	if (!fs->persist || !fs->tier || !it || (in->kind != VY_FILE && in->ino != FUSE_ROOT_ID))
		return;
	/* Present: what the device holds, the dirty and suspect units with
	 * it (a flush writes those from the device). Dirty: both kinds, as a
	 * successor has no sums to tell a suspect unit unchanged. */
	vy_tier_units present, dirty;
	if (!union_of(&present, &it->present, &it->dirty, &it->suspect)) {
		vy_persist_tier(fs, NULL, 0);
		return;
	}
	if (!union_of(&dirty, &it->dirty, &it->suspect, NULL)) {
		vy_tier_units_free(&present);
		vy_persist_tier(fs, NULL, 0);
		return;
	}
	uint32_t np = runs_of(&present, NULL), nd = runs_of(&dirty, NULL);
	if (np > VY_P_TIER_RUNS_MAX && nd <= VY_P_TIER_RUNS_MAX) {
		/* Too scattered to keep: the clean units load again. */
		vy_tier_units_free(&present);
		union_of(&present, &dirty, NULL, NULL);
		np = runs_of(&present, NULL);
	}
	vy_p_tier *r = NULL;
	size_t len = sizeof(*r) + ((size_t)np + nd) * sizeof(vy_p_run);
	if (np <= VY_P_TIER_RUNS_MAX && nd <= VY_P_TIER_RUNS_MAX && (r = calloc(1, len))) {
		*r = (vy_p_tier){.ino = in->ino, .dev = (uint64_t)it->dev, .dir_ino = (uint64_t)it->ino, .size = it->size,
				 .mtime = vy_p_time_of(it->mtime), .ctime = vy_p_time_of(it->ctime), .src = it->src, .present = np,
				 .dirty = nd, .flags = it->pinned ? VY_P_TIER_PINNED : 0};
		vy_p_run *runs = (vy_p_run *)(r + 1);
		runs_of(&present, runs);
		runs_of(&dirty, runs + np);
	}
	vy_persist_tier(fs, r, r ? (uint32_t)len : 0); /* NULL: cannot be kept, the mount no longer survives */
	free(r);
	vy_tier_units_free(&present);
	vy_tier_units_free(&dirty);
}

/* Units of runs r[0..n) set in u: false without memory. */
static bool take_runs(vy_tier_units *u, const vy_p_run *r, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (!vy_tier_units_set(u, r[i].first, r[i].first + r[i].count))
			return false;
	return true;
}

vy_err vy_backed_kept(vy_fs *fs, vy_inode *in, const void *rec, uint32_t len, vy_error *e)
{
	const vy_p_tier *r = rec && len >= sizeof(vy_p_tier) ? rec : NULL; /* the shadow checked the rest */
	if (!fs->tier)
		return VY_OK;
	if (in->ino == FUSE_ROOT_ID) {
		/* DIR now must be the directory the dead daemon served. */
		if (r && in->tier && (r->dev != (uint64_t)in->tier->dev || r->dir_ino != (uint64_t)in->tier->ino))
			return vy_fail(e, VY_EACCES, "mount the directory it was mounted over, or umount and mount again",
				       "backing=%s is another directory than the one this mount's kept files came from",
				       fs->tier->dir.path);
		return VY_OK;
	}
	if (in->tier || in->fixed ||
	    (in->kind != VY_DIR && in->kind != VY_FILE && in->kind != VY_SYMLINK && in->kind != VY_SPECIAL))
		return VY_OK;
	vy_tier_item *it = vy_tier_item_new(in->ino, 0, NULL); /* its name: the namespace's (vy_backed_kept_all) */
	if (!it)
		return vy_fail(e, VY_ENOMEM, "free host memory", "no memory for a backing directory's file");
	in->tier = it; /* a directory lists DIR again at its first use: names the namespace has stay */
	if (in->kind != VY_FILE)
		return VY_OK;
	it->src = in->size; /* none kept: DIR's, and its next open sees any change */
	if (!r)
		return VY_OK;
	it->dev = (dev_t)r->dev;
	it->ino = (ino_t)r->dir_ino;
	it->size = r->size;
	it->mtime = (struct timespec){.tv_sec = r->mtime.sec, .tv_nsec = r->mtime.nsec};
	it->ctime = (struct timespec){.tv_sec = r->ctime.sec, .tv_nsec = r->ctime.nsec};
	it->pinned = r->flags & VY_P_TIER_PINNED;
	const vy_p_run *runs = (const void *)(r + 1);
	if (!in->buf) {
		/* Its memory was not taken back (persist/replay.c emptied it):
		 * DIR's bytes are what is left, read again at its next open. */
		if (r->dirty)
			vy_log(LOG_ERR, "takeover: inode %" PRIu64 " lost bytes not yet written back to the backing "
					"directory; DIR's are shown (Fix: write them again)",
			       in->ino);
		in->size = r->size; /* not empty: DIR's size when last agreed, its bytes read from DIR */
		in->cap = 0;
		/* Still that file of DIR's (a second name of it is this inode
		 * when a listing finds one); its next open takes DIR's file as
		 * it is now where it changed (vy_backed_revalidate). */
		it->src = in->size;
		return VY_OK;
	}
	it->src = r->src;
	if (!take_runs(&it->present, runs, r->present) || !take_runs(&it->dirty, runs + r->present, r->dirty))
		return vy_fail(e, VY_ENOMEM, "free host memory", "no memory for a backing directory's file");
	/* No unit past its memory: a record never names one, and a unit
	 * there would read as zeros or write zeros back. */
	uint64_t top = vy_tier_units_to(in->cap);
	vy_tier_units_clear(&it->present, top, UINT64_MAX);
	vy_tier_units_clear(&it->dirty, top, UINT64_MAX);
	return VY_OK;
}

void vy_backed_kept_all(vy_fs *fs)
{
	if (!fs->tier)
		return;
	uint64_t key;
	void *value;
	/* Each item its name in DIR: one of the namespace's (a hard link's
	 * names are all the same file of DIR's). */
	for (size_t c = 0; vy_u64map_next(&fs->inodes, &c, &key, &value);) {
		vy_inode *d = value;
		if (d->kind != VY_DIR || !d->tier)
			continue;
		for (const vy_dirent *e = vy_dir_next(&d->dir, 0); e; e = vy_dir_next(&d->dir, e->cookie)) {
			vy_inode *in = vy_u64map_get(&fs->inodes, e->ino);
			if (in && in->tier && !in->tier->name && in != d && !vy_tier_item_rename(in->tier, d->ino, e->name))
				vy_log(LOG_ERR, "takeover: out of memory naming inode %" PRIu64, in->ino);
		}
	}
	for (size_t c = 0; vy_u64map_next(&fs->inodes, &c, &key, &value);) {
		vy_inode *in = value;
		vy_tier_item *it = in->tier;
		if (in->kind != VY_FILE || !it)
			continue;
		if (it->ino && in->nlink)
			vy_u64map_put(&fs->tier->ids, vy_tier_id_of((uint64_t)it->dev, (uint64_t)it->ino), (void *)(uintptr_t)in->ino);
		if (in->buf)
			vy_tier_cache_touch(&fs->tier->cache, it);
	}
}

size_t vy_backed_kept_due(vy_fs *fs)
{
	if (!fs->tier)
		return 0;
	uint64_t key, now = vy_monotonic_ns();
	void *value;
	size_t n = 0;
	for (size_t c = 0; vy_u64map_next(&fs->inodes, &c, &key, &value);) {
		vy_inode *in = value;
		vy_tier_item *it = in->tier;
		if (in->kind != VY_FILE || !it || !it->dirty.count)
			continue;
		atomic_fetch_add(&fs->tier->stats.dirty_bytes, it->dirty.count * VY_TIER_UNIT);
		vy_tier_cache_dirty(&fs->tier->cache, it, now);
		n++;
	}
	return n;
}
