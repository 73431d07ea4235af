/* A hash map from nonzero uint64 keys to pointers: open addressing with
 * linear probing and backward-shift deletion (no tombstones), so lookups stay
 * O(1) however many inserts and removals a long mount makes. Not locked:
 * its owner holds the lock. */
#ifndef VY_U64MAP_H
#define VY_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vy_u64map_slot {
	uint64_t key; /* 0: empty */
	void *value;
} vy_u64map_slot;

typedef struct vy_u64map {
	vy_u64map_slot *slots;
	size_t cap;   /* power of two, or 0 before the first insert */
	size_t count;
	uint64_t salt; /* this map's hash (set at its first insert): see u64map.c */
} vy_u64map;

void vy_u64map_init(vy_u64map *m);
void vy_u64map_destroy(vy_u64map *m);
void *vy_u64map_get(const vy_u64map *m, uint64_t key);
/* Insert or replace. False only when host memory runs out (map unchanged). */
bool vy_u64map_put(vy_u64map *m, uint64_t key, void *value);
/* Room for n members in all without a rehash on the way (a bulk load).
 * False only when host memory runs out (map unchanged). */
bool vy_u64map_reserve(vy_u64map *m, size_t n);
/* Start fetching key's slot into the cache: a bulk load names the keys it
 * puts a few ahead, so the table's misses overlap (the hash scatters
 * neighbouring keys across it on purpose). */
void vy_u64map_prefetch(const vy_u64map *m, uint64_t key);
/* Remove and return the value, or NULL if absent. */
void *vy_u64map_remove(vy_u64map *m, uint64_t key);

/* Iterate: for (size_t i = 0; vy_u64map_next(m, &i, &k, &v);) -- no
 * insertions or removals while iterating. */
bool vy_u64map_next(const vy_u64map *m, size_t *cursor, uint64_t *key, void **value);

#endif
