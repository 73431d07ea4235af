/* The least recently used order of the files whose bytes are on the
 * device, and the dirty list write-back walks. Its own mutex; it knows
 * items, never inodes or devices: fs/ picks victims from it and frees
 * their memory. */
#ifndef VY_TIER_CACHE_H
#define VY_TIER_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tier/item.h"

typedef struct vy_tier_cache {
	pthread_mutex_t lock;
	vy_tier_item *oldest, *newest;
	size_t count;
	vy_tier_item *dirty; /* files with bytes DIR does not hold yet, oldest first */
	vy_tier_item *dirty_last;
	size_t ndirty;
} vy_tier_cache;

bool vy_tier_cache_init(vy_tier_cache *c);
void vy_tier_cache_destroy(vy_tier_cache *c);
/* `it` was used now: newest (added if it was not there). */
void vy_tier_cache_touch(vy_tier_cache *c, vy_tier_item *it);
/* `it` leaves the order (its memory is gone); no-op if not there. */
void vy_tier_cache_remove(vy_tier_cache *c, vy_tier_item *it);
/* Up to `max` owners (inode numbers) from the oldest on, past the first
 * `skip`, into out: how many. The caller tries each (it may be busy, open
 * or dirty). */
size_t vy_tier_cache_oldest(vy_tier_cache *c, size_t skip, uint64_t *out, size_t max);

/* The dirty list: `it` has bytes DIR does not hold (since `now`, when it
 * was clean: it->dirty_ns), or has none any more. Idempotent. */
void vy_tier_cache_dirty(vy_tier_cache *c, vy_tier_item *it, uint64_t now);
void vy_tier_cache_clean(vy_tier_cache *c, vy_tier_item *it);
/* Up to `max` owners of dirty files whose first dirty byte came at or
 * before `due` (CLOCK_MONOTONIC ns; UINT64_MAX: all), oldest first. */
size_t vy_tier_cache_due(vy_tier_cache *c, uint64_t due, uint64_t *out, size_t max);

#endif
