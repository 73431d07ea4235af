/* Small allocations in slabs a backend makes (see slab.h). */
#include "core/slab.h"

#include <errno.h>
#include <stdlib.h>

struct vy_slab {
	uint64_t base;
	int64_t handle;       /* the backend's (host: the memfd) */
	unsigned cls;         /* slots of VY_SLAB_MIN << cls bytes */
	uint32_t slots, used;
	vy_slab *prev, *next; /* in partial[cls] while a slot is free */
	bool listed;
	uint32_t tag;         /* the owner's (a keeper slot), 0 at first */
	uint64_t taken[];     /* a bit a slot, and the bits past the last set */
};

bool vy_slabs_init(vy_slabs *s, uint64_t slab_bytes, const vy_slab_backing *backing)
{
	bool fits = slab_bytes >= 2 * VY_SLAB_MAX && (slab_bytes & (slab_bytes - 1)) == 0;
	*s = (vy_slabs){.slab_bytes = fits ? slab_bytes : 0, .backing = *backing}; /* 0: takes nothing */
	vy_u64map_init(&s->by_base);
	return fits;
}

void vy_slabs_destroy(vy_slabs *s)
{
	uint64_t key;
	void *value;
	for (size_t i = 0; vy_u64map_next(&s->by_base, &i, &key, &value);) {
		vy_slab *b = value;
		s->backing.unmake(s->backing.ctx, b->base, b->handle);
		free(b);
	}
	vy_u64map_destroy(&s->by_base);
	*s = (vy_slabs){0};
}

bool vy_slabs_take(const vy_slabs *s, uint64_t bytes)
{
	return bytes > 0 && bytes <= s->slab_bytes / 2 && bytes <= VY_SLAB_MAX;
}

static void list_add(vy_slabs *s, vy_slab *b)
{
	b->prev = NULL;
	b->next = s->partial[b->cls];
	if (b->next)
		b->next->prev = b;
	s->partial[b->cls] = b;
	b->listed = true;
}

static void list_remove(vy_slabs *s, vy_slab *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		s->partial[b->cls] = b->next;
	if (b->next)
		b->next->prev = b->prev;
	b->prev = b->next = NULL;
	b->listed = false;
}

/* The record of a slab of class `cls` over the memory at `base`, listed
 * as having room; NULL (errno ENOMEM) when it cannot be recorded. */
static vy_slab *slab_record(vy_slabs *s, unsigned cls, uint64_t base, int64_t handle)
{
	uint32_t slots = (uint32_t)(s->slab_bytes / ((uint64_t)VY_SLAB_MIN << cls));
	size_t words = (slots + 63) / 64;
	vy_slab *b = calloc(1, sizeof(*b) + words * sizeof(uint64_t));
	if (b && !vy_u64map_put(&s->by_base, base, b)) {
		free(b);
		b = NULL;
	}
	if (!b) {
		errno = ENOMEM;
		return NULL;
	}
	b->base = base;
	b->handle = handle;
	b->cls = cls;
	b->slots = slots;
	for (uint32_t i = slots; i < words * 64; i++)
		b->taken[i / 64] |= 1ull << (i % 64);
	list_add(s, b);
	s->slabs++;
	s->empty++; /* until its first slot is taken, just after */
	return b;
}

/* The class of `bytes` (vy_slabs_take said yes). */
static unsigned class_of(uint64_t bytes)
{
	unsigned cls = 0;
	while (((uint64_t)VY_SLAB_MIN << cls) < bytes)
		cls++;
	return cls;
}

uint64_t vy_slab_size(uint64_t bytes)
{
	return (uint64_t)VY_SLAB_MIN << class_of(bytes);
}

static void take_slot(vy_slabs *s, vy_slab *b, uint64_t slot)
{
	s->empty -= b->used == 0;
	b->taken[slot / 64] |= 1ull << (slot % 64);
	if (++b->used == b->slots)
		list_remove(s, b);
}

uint64_t vy_slabs_alloc(vy_slabs *s, uint64_t bytes)
{
	if (!vy_slabs_take(s, bytes)) {
		errno = EINVAL;
		return 0;
	}
	unsigned cls = class_of(bytes);
	vy_slab *b = s->partial[cls];
	if (!b) {
		uint64_t base = 0;
		int64_t handle = -1;
		int err = s->backing.make(s->backing.ctx, s->slab_bytes, &base, &handle);
		if (!err && !(b = slab_record(s, cls, base, handle))) {
			s->backing.unmake(s->backing.ctx, base, handle);
			err = ENOMEM;
		}
		if (err) {
			errno = err;
			return 0;
		}
	}
	for (size_t w = 0;; w++) { /* a listed slab has a free slot */
		if (~b->taken[w] == 0)
			continue;
		uint64_t slot = w * 64 + (unsigned)__builtin_ctzll(~b->taken[w]);
		take_slot(s, b, slot);
		return b->base + slot * ((uint64_t)VY_SLAB_MIN << cls);
	}
}

/* The slab holding `p`, and p's slot in it when p is a live slot. */
static vy_slab *slab_of(const vy_slabs *s, uint64_t at, uint64_t *slot)
{
	uint64_t base = at & ~(s->slab_bytes - 1);
	vy_slab *b = s->slab_bytes ? vy_u64map_get(&s->by_base, base) : NULL;
	if (!b)
		return NULL;
	uint64_t size = (uint64_t)VY_SLAB_MIN << b->cls, off = at - base;
	*slot = off / size;
	if (off % size || *slot >= b->slots || !(b->taken[*slot / 64] & (1ull << (*slot % 64))))
		return NULL;
	return b;
}

/* Give back live slot `slot` of b. An empty slab goes when `always`, or
 * when it is not its class's only one with room: its record is freed and
 * true returned with its base, handle and tag. */
static bool slot_free(vy_slabs *s, vy_slab *b, uint64_t slot, bool always, uint64_t *base, int64_t *handle,
		      uint32_t *tag)
{
	b->taken[slot / 64] &= ~(1ull << (slot % 64));
	b->used--;
	if (!b->listed)
		list_add(s, b);
	/* A loop that makes and removes one small file keeps its slab. */
	if (b->used > 0)
		return false;
	if (!always && !b->prev && !b->next) {
		s->empty++;
		return false;
	}
	list_remove(s, b);
	vy_u64map_remove(&s->by_base, b->base);
	*base = b->base;
	*handle = b->handle;
	*tag = b->tag;
	s->slabs--;
	free(b);
	return true;
}

bool vy_slabs_free(vy_slabs *s, uint64_t p, uint32_t *gone)
{
	uint64_t slot, base;
	int64_t handle;
	uint32_t tag = 0;
	vy_slab *b = slab_of(s, p, &slot);
	if (gone)
		*gone = 0;
	if (!b)
		return false;
	if (slot_free(s, b, slot, false, &base, &handle, &tag)) {
		s->backing.unmake(s->backing.ctx, base, handle);
		if (gone)
			*gone = tag;
	}
	return true;
}

bool vy_slabs_holds(const vy_slabs *s, uint64_t p)
{
	uint64_t slot;
	return slab_of(s, p, &slot) != NULL;
}

uint32_t *vy_slabs_tag(vy_slabs *s, uint64_t p, int64_t *handle, uint64_t *base)
{
	vy_slab *b = s->slab_bytes ? vy_u64map_get(&s->by_base, p & ~(s->slab_bytes - 1)) : NULL;
	if (!b)
		return NULL;
	*handle = b->handle;
	*base = b->base;
	return &b->tag;
}

uint64_t vy_slabs_adopt(vy_slabs *s, uint64_t base, int64_t handle, uint32_t tag, uint64_t at, uint64_t bytes)
{
	if (!vy_slabs_take(s, bytes) || !base || base & (s->slab_bytes - 1)) {
		errno = EINVAL;
		return 0;
	}
	unsigned cls = class_of(bytes);
	uint64_t size = (uint64_t)VY_SLAB_MIN << cls;
	vy_slab *b = vy_u64map_get(&s->by_base, base);
	/* A slab's slots are of one class, aligned to it, each taken once. */
	if ((b && b->cls != cls) || at % size || at / size >= s->slab_bytes / size ||
	    (b && (b->taken[at / size / 64] & (1ull << (at / size % 64))))) {
		errno = EINVAL;
		return 0;
	}
	if (!b) {
		b = slab_record(s, cls, base, handle);
		if (!b)
			return 0;
		b->tag = tag;
	}
	take_slot(s, b, at / size);
	return base + at;
}

bool vy_slabs_unadopt(vy_slabs *s, uint64_t p, uint64_t *base, int64_t *handle)
{
	uint64_t slot;
	uint32_t tag;
	vy_slab *b = slab_of(s, p, &slot);
	return b && slot_free(s, b, slot, true, base, handle, &tag);
}

bool vy_slabs_next(const vy_slabs *s, size_t *cursor, int64_t *handle, uint64_t *base)
{
	uint64_t key;
	void *value;
	if (!vy_u64map_next(&s->by_base, cursor, &key, &value))
		return false;
	*handle = ((vy_slab *)value)->handle;
	*base = key;
	return true;
}
