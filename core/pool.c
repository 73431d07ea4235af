/* Resident pool: exact-size bins, largest-first eviction. */
#include "core/pool.h"

#include <stdlib.h>

#define NOT_IN_HEAP SIZE_MAX
/* Drop empty bins once they outnumber this: distinct sizes come and go. */
#define EMPTY_BINS_KEPT 256

struct vy_pool_bin {
	uint64_t size;
	vy_dptr *items; /* a stack: the most recently freed is reused first */
	size_t count, cap;
	size_t heap_pos;
};

static void publish(vy_pool *p)
{
	vy_telemetry_set(p->tel, pooled_bytes, p->bytes);
	vy_telemetry_set(p->tel, pooled_buffers, p->buffers);
}

static void heap_swap(vy_pool *p, size_t a, size_t b)
{
	vy_pool_bin *t = p->heap[a];
	p->heap[a] = p->heap[b];
	p->heap[b] = t;
	p->heap[a]->heap_pos = a;
	p->heap[b]->heap_pos = b;
}

static void heap_up(vy_pool *p, size_t i)
{
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (p->heap[parent]->size >= p->heap[i]->size)
			break;
		heap_swap(p, parent, i);
		i = parent;
	}
}

static void heap_down(vy_pool *p, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, top = i;
		if (l < p->heap_len && p->heap[l]->size > p->heap[top]->size)
			top = l;
		if (r < p->heap_len && p->heap[r]->size > p->heap[top]->size)
			top = r;
		if (top == i)
			return;
		heap_swap(p, i, top);
		i = top;
	}
}

static bool heap_push(vy_pool *p, vy_pool_bin *b)
{
	if (p->heap_len == p->heap_cap) {
		size_t cap = p->heap_cap ? p->heap_cap * 2 : 16;
		vy_pool_bin **h = realloc(p->heap, cap * sizeof(*h));
		if (!h)
			return false;
		p->heap = h;
		p->heap_cap = cap;
	}
	b->heap_pos = p->heap_len;
	p->heap[p->heap_len++] = b;
	heap_up(p, b->heap_pos);
	return true;
}

static void heap_remove(vy_pool *p, vy_pool_bin *b)
{
	size_t i = b->heap_pos;
	p->heap_len--;
	if (i != p->heap_len) {
		heap_swap(p, i, p->heap_len);
		heap_down(p, i);
		heap_up(p, i);
	}
	b->heap_pos = NOT_IN_HEAP;
}

static void bin_free(vy_pool_bin *b)
{
	free(b->items);
	free(b);
}

/* Forget empty bins when too many pile up (sizes that were used once). */
static void prune_empty_bins(vy_pool *p)
{
	if (p->empty_bins <= EMPTY_BINS_KEPT)
		return;
	uint64_t key;
	void *value;
	size_t cursor = 0;
	vy_u64map keep;
	vy_u64map_init(&keep);
	bool ok = true;
	while (vy_u64map_next(&p->bins, &cursor, &key, &value)) {
		vy_pool_bin *b = value;
		if (b->count == 0)
			continue;
		ok = ok && vy_u64map_put(&keep, key, b);
	}
	if (!ok) { /* no memory to rebuild: keep the bins we have */
		vy_u64map_destroy(&keep);
		return;
	}
	cursor = 0;
	while (vy_u64map_next(&p->bins, &cursor, &key, &value))
		if (((vy_pool_bin *)value)->count == 0)
			bin_free(value);
	vy_u64map_destroy(&p->bins);
	p->bins = keep;
	p->empty_bins = 0;
}

/* Pop the top buffer of a non-empty bin, keeping heap and counts right. */
static vy_dptr bin_pop(vy_pool *p, vy_pool_bin *b)
{
	vy_dptr ptr = b->items[--b->count];
	p->bytes -= b->size;
	p->buffers--;
	if (b->count == 0) {
		heap_remove(p, b);
		p->empty_bins++;
	}
	publish(p);
	return ptr;
}

void vy_pool_init(vy_pool *p, vy_device *dev, vy_telemetry *tel, uint64_t cap)
{
	*p = (vy_pool){.dev = dev, .tel = tel, .cap = cap};
	vy_u64map_init(&p->bins);
	publish(p);
}

bool vy_pool_take(vy_pool *p, uint64_t size, vy_dptr *out)
{
	vy_pool_bin *b = vy_u64map_get(&p->bins, size);
	if (!b || b->count == 0) {
		vy_telemetry_add(p->tel, pool_misses, 1);
		return false;
	}
	*out = bin_pop(p, b);
	vy_telemetry_add(p->tel, pool_hits, 1);
	prune_empty_bins(p);
	return true;
}

static vy_err free_to_driver(vy_pool *p, vy_dptr ptr, vy_error *e)
{
	vy_err rc = p->dev->ops->free(p->dev, ptr, e);
	if (rc == VY_OK)
		vy_telemetry_add(p->tel, driver_frees, 1);
	return rc;
}

vy_err vy_pool_evict_largest(vy_pool *p, vy_error *e)
{
	if (p->heap_len == 0)
		return vy_fail(e, VY_ENOENT, "nothing to do", "the pool is empty");
	vy_dptr ptr = bin_pop(p, p->heap[0]);
	vy_telemetry_add(p->tel, pool_evictions, 1);
	return free_to_driver(p, ptr, e);
}

/* A bin for `size`, made if new; NULL when host memory runs out. */
static vy_pool_bin *bin_for(vy_pool *p, uint64_t size)
{
	vy_pool_bin *b = vy_u64map_get(&p->bins, size);
	if (b)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->size = size;
	b->heap_pos = NOT_IN_HEAP;
	if (!vy_u64map_put(&p->bins, size, b)) {
		free(b);
		return NULL;
	}
	p->empty_bins++;
	return b;
}

static bool bin_push(vy_pool *p, vy_pool_bin *b, vy_dptr ptr)
{
	if (b->count == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4;
		vy_dptr *items = realloc(b->items, cap * sizeof(*items));
		if (!items)
			return false;
		b->items = items;
		b->cap = cap;
	}
	if (b->count == 0) {
		if (!heap_push(p, b))
			return false;
		p->empty_bins--;
	}
	b->items[b->count++] = ptr;
	p->bytes += b->size;
	p->buffers++;
	publish(p);
	return true;
}

vy_err vy_pool_put(vy_pool *p, uint64_t size, vy_dptr ptr, vy_error *e)
{
	/* A slab's slot (cuda while kept) is freed at once: idle, it would
	 * hold its slab's whole granule, which the pool's bytes do not count;
	 * the device makes one again from a slab with room, and keeps one
	 * empty slab a class, so a loop of one small file makes no memory. */
	if (size > p->cap || size <= p->dev->slab_max) {
		vy_telemetry_add(p->tel, pool_bypasses, 1);
		return free_to_driver(p, ptr, e);
	}
	/* Make room first, so the incoming buffer is never the one evicted. */
	while (p->bytes > p->cap - size) {
		vy_err rc = vy_pool_evict_largest(p, e);
		if (rc != VY_OK) {
			free_to_driver(p, ptr, NULL);
			return rc;
		}
	}
	vy_pool_bin *b = bin_for(p, size);
	if (!b || !bin_push(p, b, ptr)) {
		/* No host memory for the bookkeeping: not pooling is always safe. */
		vy_telemetry_add(p->tel, pool_bypasses, 1);
		return free_to_driver(p, ptr, e);
	}
	return VY_OK;
}

vy_err vy_pool_drain(vy_pool *p, vy_error *e)
{
	vy_err first = VY_OK;
	while (p->heap_len > 0) {
		vy_pool_bin *b = p->heap[0];
		vy_dptr ptr = bin_pop(p, b);
		vy_error err;
		vy_err rc = free_to_driver(p, ptr, &err);
		if (rc != VY_OK && first == VY_OK) {
			first = rc;
			if (e)
				*e = err;
		}
	}
	return first;
}

vy_err vy_pool_destroy(vy_pool *p, vy_error *e)
{
	vy_err rc = vy_pool_drain(p, e);
	uint64_t key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&p->bins, &cursor, &key, &value))
		bin_free(value);
	vy_u64map_destroy(&p->bins);
	free(p->heap);
	p->heap = NULL;
	p->heap_len = p->heap_cap = 0;
	p->empty_bins = 0;
	return rc;
}
