/* One entry of DIR as the mount knows it (rclone's vfscache item): one of
 * its names in DIR, which file of DIR's it is, what DIR held when the
 * mount last agreed with it, and for a regular file which units of its
 * bytes the device holds (present) and which the device holds and DIR
 * does not yet (dirty). fs/ keeps one per inode of a backing mount
 * (vy_inode.tier); the inode's lock guards the units, the namespace lock
 * the name; `flushing` orders write-backs of one file. */
#ifndef VY_TIER_ITEM_H
#define VY_TIER_ITEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "tier/units.h"

typedef struct vy_tier_item {
	/* A name of it in DIR: the inode of the directory and the entry.
	 * NULL name: none any more (unlinked, or the mount's own .vyre). */
	uint64_t parent;
	char *name;
	int fd; /* a directory: its O_PATH fd in DIR (-1 until needed); a file: open for write-back (-1: none) */
	int dfd; /* a file: open with O_DIRECT for loads, where DIR takes it (-1: none) */
	/* Which file of DIR's, and what DIR said of it when the mount last
	 * agreed with it: a change behind the mount shows as a difference. */
	dev_t dev;
	ino_t ino;
	struct timespec mtime, ctime;
	uint64_t size;
	uint64_t saw_gen; /* bumped (atomically) at each vy_tier_item_saw: a stat older than it is stale */
	bool listed; /* a directory: its entries are in the namespace */
	bool pinned; /* user.vyre.pin: its device memory is never given back */
	/* A regular file: bytes [0, src) come from DIR where not present;
	 * past src every byte is the mount's own (written, or zeros). */
	uint64_t src;
	vy_tier_units present, dirty;
	/* Units a mapping or a sequence may have changed: at write-back each
	 * is read back and written only if its sum differs from sums[] (what
	 * DIR holds: known for units loaded or written back). */
	vy_tier_units suspect;
	uint64_t *sums;
	uint64_t nsums; /* sums[0, nsums) */
	vy_tier_units summed; /* units whose sums[] are DIR's bytes */
	/* A write-back is between its first read-back and its end (the
	 * flushing lock held; the inode's lock only for each step): units
	 * written or made suspect meanwhile are set in `again` too, and stay
	 * due at its end; again_all: one could not be recorded (no memory),
	 * so none turns clean. */
	bool passing, again_all;
	vy_tier_units again;
	uint64_t dirty_ns; /* CLOCK_MONOTONIC of its first dirty byte since the last write-back (the cache's lock) */
	int wb_err;        /* the last write-back's errno, until one succeeds */
	bool on_dirty;     /* on the mount's dirty list (tier/cache.h) */
	pthread_mutex_t flushing;
	/* The least recently used order of files with device memory, and
	 * the list of dirty files (tier/cache.h). */
	struct vy_tier_item *older, *newer;
	bool in_lru;
	struct vy_tier_item *dirty_prev, *dirty_next;
	uint64_t owner; /* the inode it belongs to */
} vy_tier_item;

/* A new item for inode `owner`, named `name` in directory `parent`
 * (name may be NULL); NULL without memory. */
vy_tier_item *vy_tier_item_new(uint64_t owner, uint64_t parent, const char *name);
/* Its name is now `name` in `parent`: false without memory (unchanged). */
bool vy_tier_item_rename(vy_tier_item *it, uint64_t parent, const char *name);
/* What DIR says of it now. */
void vy_tier_item_saw(vy_tier_item *it, const struct stat *st);
/* Whether DIR's entry `st` is another file, or the same file changed, since
 * the mount last agreed with it. */
bool vy_tier_item_changed(const vy_tier_item *it, const struct stat *st);
/* Unit i's sum is `sum` (DIR holds those bytes): false without memory. */
bool vy_tier_item_sum(vy_tier_item *it, uint64_t i, uint64_t sum);
/* Whether unit i's bytes `sum` are what DIR holds. */
bool vy_tier_item_same(const vy_tier_item *it, uint64_t i, uint64_t sum);
/* Not on any list (the caller took it off); closes its fd. */
void vy_tier_item_free(vy_tier_item *it);

#endif
