/* Open-addressing u64 -> pointer map. */
#include "core/u64map.h"

#include <stdlib.h>

static size_t slot_of(uint64_t key, size_t cap)
{
	/* Fibonacci hashing: the product's high bits depend on every bit of
	 * the key, so sequential ids and page- or MiB-multiple sizes spread
	 * out (low bits would cluster them). cap is a power of two >= 16. */
	return (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - __builtin_ctzll(cap)));
}

void vy_u64map_init(vy_u64map *m)
{
	m->slots = NULL;
	m->cap = 0;
	m->count = 0;
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
	for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->slots[i].key == key)
			return m->slots[i].value;
		if (m->slots[i].key == 0)
			return NULL;
	}
}

static void place(vy_u64map_slot *slots, size_t cap, uint64_t key, void *value)
{
	size_t i = slot_of(key, cap);
	while (slots[i].key != 0 && slots[i].key != key)
		i = (i + 1) & (cap - 1);
	slots[i].key = key;
	slots[i].value = value;
}

static bool grow(vy_u64map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	if (cap < m->cap)
		return false;
	vy_u64map_slot *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return false;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			place(slots, cap, m->slots[i].key, m->slots[i].value);
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return true;
}

bool vy_u64map_put(vy_u64map *m, uint64_t key, void *value)
{
	if (key == 0)
		return false;
	/* Keep the load under 3/4 so probes stay short. */
	if ((m->count + 1) * 4 > m->cap * 3 && !grow(m))
		return false;
	size_t i = slot_of(key, m->cap);
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
	size_t mask = m->cap - 1, i = slot_of(key, m->cap);
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
		size_t home = slot_of(m->slots[j].key, m->cap);
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
