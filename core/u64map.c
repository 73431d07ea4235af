/* Open-addressing u64 -> pointer map. */
#include "core/u64map.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Each map hashes with a salt of its own. With one hash for all, walking
 * one map (its slot order is its hash order) and putting each key into
 * another fills the second's slots front to back in long runs: linear
 * probing then goes quadratic (a successor reading 100,000 inodes from its
 * predecessor's checkpoint spent 2.9 s in get and put). */
static _Atomic uint64_t salts;

/* A salt no other map of this process has, and unlike another process's:
 * a successor's maps are made in the order its predecessor's were, and
 * it fills them in the order it reads them from its predecessor's. */
static uint64_t new_salt(void)
{
	struct timespec t = {0};
	clock_gettime(CLOCK_MONOTONIC, &t); /* cannot fail for this clock; a zero would still differ by count */
	return (atomic_fetch_add(&salts, 1) + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec);
}

static size_t slot_of(uint64_t key, uint64_t salt, size_t cap)
{
	/* splitmix64's finalizer: every output bit depends on every bit of
	 * the key and the salt, so sequential ids and page- or MiB-multiple
	 * sizes spread out. cap is a power of two >= 16: its top bits. */
	uint64_t z = key ^ salt;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (size_t)(z >> (64 - __builtin_ctzll(cap)));
}

void vy_u64map_init(vy_u64map *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->count = 0;
	m->salt = 0;
}

void vy_u64map_destroy(vy_u64map *m)
{
	free(m->slots);
	vy_u64map_init(m);
}

void *vy_u64map_get(const vy_u64map *m, uint64_t key)
{
	if (!m->cap || key == 0)
		return NULL;
	for (size_t i = slot_of(key, m->salt, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key)
			return m->slots[i].value;
		if (m->slots[i].key == 0)
			return NULL;
	}
}

static void place(vy_u64map_slot *slots, size_t cap, uint64_t salt, uint64_t key, void *value)
{
	size_t i = slot_of(key, salt, cap);
	while (slots[i].key != 0 && slots[i].key != key)
		i = (i + 1) & (cap - 1);
	slots[i].key = key;
	slots[i].value = value;
}

/* Rehash into `cap` slots (a power of two, above the count's 4/3). */
static bool resize(vy_u64map *m, size_t cap)
{
	if (!m->cap) /* a map made by zeroing, not init, gets one here too */
		m->salt = new_salt();
	vy_u64map_slot *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return false;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			place(slots, cap, m->salt, m->slots[i].key, m->slots[i].value);
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return true;
}

static bool grow(vy_u64map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	return cap > m->cap && resize(m, cap);
}

void vy_u64map_prefetch(const vy_u64map *m, uint64_t key)
{
	if (m->cap)
		__builtin_prefetch(&m->slots[slot_of(key, m->salt, m->cap)], 1);
}

bool vy_u64map_reserve(vy_u64map *m, size_t n)
{
	if (n > SIZE_MAX / 4)
		return false;
	size_t cap = m->cap ? m->cap : 16;
	while (n * 4 > cap * 3) {
		if (cap > SIZE_MAX / 2 / sizeof(vy_u64map_slot))
			return false;
		cap *= 2;
	}
	return cap == m->cap || resize(m, cap);
}

bool vy_u64map_put(vy_u64map *m, uint64_t key, void *value)
{
	if (key == 0)
		return false;
	/* Keep the load under 3/4 so probes stay short. */
	if ((m->count + 1) * 4 > m->cap * 3 && !grow(m))
		return false;
	size_t i = slot_of(key, m->salt, m->cap);
	while (m->slots[i].key != 0 && m->slots[i].key != key)
		i = (i + 1) & (m->cap - 1);
	if (m->slots[i].key == 0)
		m->count++;
	m->slots[i].key = key;
	m->slots[i].value = value;
	return true;
}

void *vy_u64map_remove(vy_u64map *m, uint64_t key)
{
	if (!m->cap || key == 0)
		return NULL;
	size_t mask = m->cap - 1, i = slot_of(key, m->salt, m->cap);
	while (m->slots[i].key != key) {
		if (m->slots[i].key == 0)
			return NULL;
		i = (i + 1) & mask;
	}
	void *value = m->slots[i].value;
	/* Backward shift: pull later members of the probe run into the hole
	 * when their home slot does not lie strictly after it. */
	size_t hole = i;
	for (size_t j = (i + 1) & mask; m->slots[j].key != 0; j = (j + 1) & mask) {
		size_t home = slot_of(m->slots[j].key, m->salt, m->cap);
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			m->slots[hole] = m->slots[j];
			hole = j;
		}
	}
	m->slots[hole].key = 0;
	m->slots[hole].value = NULL;
	m->count--;
	return value;
}

bool vy_u64map_next(const vy_u64map *m, size_t *cursor, uint64_t *key, void **value)
{
	for (; *cursor < m->cap; (*cursor)++) {
		if (m->slots[*cursor].key) {
			*key = m->slots[*cursor].key;
			*value = m->slots[*cursor].value;
			(*cursor)++;
			return true;
		}
	}
	return false;
}
