/* A mount over a directory (backing=DIR, docs/tier.md): DIR, the files'
 * order of use and dirty list, which inode each of DIR's files is, and the
 * counters .vyre/stats shows. Below fs/, beside core/: it knows DIR and
 * nothing of FUSE or devices; fs/backed*.c load and write back through it. */
#ifndef VY_TIER_H
#define VY_TIER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/u64map.h"
#include "tier/cache.h"
#include "tier/dir.h"
#include "tier/item.h"

typedef struct vy_tier_stats {
	_Atomic uint64_t hits;          /* reads whose bytes were all on the device */
	_Atomic uint64_t misses;        /* reads that waited for a load */
	_Atomic uint64_t loads;         /* loads from DIR (a run of units each) */
	_Atomic uint64_t loaded_bytes;  /* bytes read from DIR onto the device */
	_Atomic uint64_t load_us;       /* time spent loading */
	_Atomic uint64_t direct_reads;  /* reads served from DIR: no room on the device */
	_Atomic uint64_t evictions;     /* files whose device memory went back */
	_Atomic uint64_t evicted_bytes;
	_Atomic uint64_t writebacks;    /* files written back to DIR */
	_Atomic uint64_t written_bytes; /* bytes written back to DIR */
	_Atomic uint64_t dirty_bytes;   /* a gauge: bytes DIR does not hold yet (units) */
	_Atomic uint64_t errors;        /* DIR's errors: failed loads and write-backs */
	_Atomic uint64_t reloads;       /* files DIR changed behind the mount, reloaded */
} vy_tier_stats;

typedef struct vy_tier {
	vy_tier_dir dir;
	vy_tier_cache cache;
	/* DIR's inode numbers -> the mount's, so two names of one file are
	 * one inode (the namespace lock). */
	vy_u64map ids;
	uint64_t delay_ms; /* writeback_delay */
	/* Names the mount forgot as DIR lost them, for the kernel to forget
	 * too once the namespace lock is let go (its own lock). */
	pthread_mutex_t gone_lock;
	struct vy_tier_gone_name {
		uint64_t parent;
		char *name;
	} *gone;
	size_t ngone, capgone;
	vy_tier_stats stats;
} vy_tier;

/* Open DIR for a mount. */
vy_err vy_tier_open_mount(vy_tier **out, const char *dir, uint64_t delay_ms, vy_error *e);
void vy_tier_close(vy_tier *t);

/* Name `name` of directory `parent` went from the mount (behind it, in
 * DIR): kept for vy_tier_gone_take. False without memory. */
bool vy_tier_gone_add(vy_tier *t, uint64_t parent, const char *name);
/* Up to `max` of them into out (the caller frees each name): how many. */
size_t vy_tier_gone_take(vy_tier *t, struct vy_tier_gone_name *out, size_t max);

/* The counters, one `tier_KEY VALUE` a line (.vyre/stats) or in the
 * Prometheus text format (.vyre/metrics): the length, as snprintf. */
size_t vy_tier_stats_format(const vy_tier_stats *s, bool prometheus, char *buf, size_t cap);

/* The key of DIR's file (dev, ino) in ids. */
static inline uint64_t vy_tier_id_of(uint64_t dev, uint64_t ino)
{
	return ino ^ (dev << 40);
}
static inline uint64_t vy_tier_id(const struct stat *st)
{
	return vy_tier_id_of((uint64_t)st->st_dev, (uint64_t)st->st_ino);
}

/* Its inode has no name and nothing open: its bytes are nobody's, in DIR
 * too. Off the lists, no dirty bytes. */
void vy_tier_gone(vy_tier *t, vy_tier_item *it);
/* An item that goes with its inode: off every list, freed. */
void vy_tier_forget(vy_tier *t, vy_tier_item *it);

#endif
