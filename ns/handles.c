/* The handle table (handles.h): ids of open files and directories, a free
 * list of indexes, segments that double the table and never move. */
#include "ns/handles.h"

#include <errno.h>
#include <stdlib.h>

#include "core/checked.h"

#define NO_INDEX UINT32_MAX

/* Segment k's first index: 0, then VY_HANDLES_FIRST << (k - 1). */
static uint64_t seg_start(unsigned k)
{
	return k == 0 ? 0 : (uint64_t)VY_HANDLES_FIRST << (k - 1);
}

/* Segment k's slots: as many as all before it (the table doubles). */
static uint64_t seg_size(unsigned k)
{
	return k == 0 ? VY_HANDLES_FIRST : seg_start(k);
}

static unsigned seg_of(uint32_t index)
{
	if (index < VY_HANDLES_FIRST)
		return 0;
	/* floor(log2(index)) - log2(VY_HANDLES_FIRST) + 1 */
	return (unsigned)(63 - __builtin_clzll(index)) - (unsigned)__builtin_ctz(VY_HANDLES_FIRST) + 1;
}

/* The slot of `index`, or NULL past the segments made (no lock: a
 * segment's pointer, once set, never changes). */
static vy_handle_slot *slot_at(const vy_handles *t, uint32_t index)
{
	unsigned k = seg_of(index);
	if (k >= VY_HANDLES_SEGS)
		return NULL;
	vy_handle_slot *s = atomic_load_explicit(&t->seg[k], memory_order_acquire);
	return s ? &s[index - seg_start(k)] : NULL;
}

static uint64_t id_of(uint32_t gen, uint32_t index)
{
	return (uint64_t)gen << 32 | index;
}

void vy_handles_init(vy_handles *t, uint64_t max)
{
	for (unsigned k = 0; k < VY_HANDLES_SEGS; k++)
		atomic_init(&t->seg[k], NULL);
	t->made = t->used = t->live = 0;
	t->max = max < NO_INDEX ? max : NO_INDEX; /* an index below NO_INDEX each */
	t->free_head = NO_INDEX;
}

void vy_handles_destroy(vy_handles *t)
{
	for (unsigned k = 0; k < VY_HANDLES_SEGS; k++) {
		free(atomic_load_explicit(&t->seg[k], memory_order_relaxed));
		atomic_store_explicit(&t->seg[k], NULL, memory_order_relaxed);
	}
	t->made = t->used = t->live = 0;
	t->free_head = NO_INDEX;
}

/* Make the next segment; false without memory. */
static bool grow(vy_handles *t)
{
	unsigned k = t->made == 0 ? 0 : seg_of((uint32_t)t->made);
	uint64_t n = seg_size(k), bytes;
	if (k >= VY_HANDLES_SEGS || !vy_mul_u64(n, sizeof(vy_handle_slot), &bytes) || bytes > SIZE_MAX)
		return false;
	vy_handle_slot *s = calloc((size_t)n, sizeof(*s));
	if (!s)
		return false;
	for (uint64_t i = 0; i < n; i++) {
		atomic_init(&s[i].gen, 1); /* 0 is no generation: id 0 is never live */
		atomic_init(&s[i].kind, VY_HANDLE_FREE);
		atomic_init(&s[i].file, NULL);
		s[i].next_free = NO_INDEX;
	}
	atomic_store_explicit(&t->seg[k], s, memory_order_release);
	t->made += n;
	return true;
}

/* A free slot's index (from the free list, else the next never used);
 * ENFILE at the cap, ENOMEM without memory. */
static int take(vy_handles *t, uint32_t *index)
{
	if (t->live >= t->max)
		return ENFILE;
	if (t->free_head != NO_INDEX) {
		vy_handle_slot *s = slot_at(t, t->free_head);
		*index = t->free_head;
		t->free_head = s->next_free;
		s->next_free = NO_INDEX;
		return 0;
	}
	if (t->used >= NO_INDEX)
		return ENFILE; /* every index taken, some retired */
	if (t->used == t->made && !grow(t))
		return ENOMEM;
	*index = (uint32_t)t->used++;
	return 0;
}

/* Slot `index` (taken, its generation set) is live for what it holds. */
static void fill(vy_handles *t, uint32_t index, vy_handle_kind kind, struct vy_open *o, uint64_t ino, uint64_t limit)
{
	vy_handle_slot *s = slot_at(t, index);
	s->dir.ino = ino;
	s->dir.limit = limit;
	atomic_store_explicit(&s->file, o, memory_order_relaxed);
	atomic_store_explicit(&s->kind, kind, memory_order_release);
	t->live++;
}

static int add(vy_handles *t, vy_handle_kind kind, struct vy_open *o, uint64_t ino, uint64_t limit, uint64_t *id)
{
	uint32_t index;
	int err = take(t, &index);
	if (err)
		return err;
	*id = id_of(atomic_load_explicit(&slot_at(t, index)->gen, memory_order_relaxed), index);
	fill(t, index, kind, o, ino, limit);
	return 0;
}

int vy_handles_add_file(vy_handles *t, struct vy_open *o, uint64_t *id)
{
	return add(t, VY_HANDLE_FILE, o, 0, 0, id);
}

int vy_handles_add_dir(vy_handles *t, uint64_t ino, uint64_t limit, uint64_t *id)
{
	return add(t, VY_HANDLE_DIR, NULL, ino, limit, id);
}

int vy_handles_add_at(vy_handles *t, uint64_t id, vy_handle_kind kind, struct vy_open *o, uint64_t ino,
		      uint64_t limit)
{
	uint32_t gen = (uint32_t)(id >> 32), index = (uint32_t)id;
	if (gen == 0 || index == NO_INDEX || index < t->used || (kind != VY_HANDLE_FILE && kind != VY_HANDLE_DIR))
		return EINVAL;
	if (t->live >= t->max)
		return ENFILE;
	while (t->made <= index)
		if (!grow(t))
			return ENOMEM;
	for (; t->used < index; t->used++) { /* never given out here: free */
		vy_handle_slot *f = slot_at(t, (uint32_t)t->used);
		f->next_free = t->free_head;
		t->free_head = (uint32_t)t->used;
	}
	t->used = (uint64_t)index + 1;
	atomic_store_explicit(&slot_at(t, index)->gen, gen, memory_order_relaxed);
	fill(t, index, kind, o, ino, limit);
	return 0;
}

/* The slot of a live id of `kind`, or NULL. */
static vy_handle_slot *live_slot(const vy_handles *t, uint64_t id, vy_handle_kind kind)
{
	uint32_t gen = (uint32_t)(id >> 32), index = (uint32_t)id;
	if (gen == 0)
		return NULL;
	vy_handle_slot *s = slot_at(t, index); /* NULL past the segments made */
	if (!s || atomic_load_explicit(&s->gen, memory_order_acquire) != gen ||
	    atomic_load_explicit(&s->kind, memory_order_acquire) != kind)
		return NULL;
	return s;
}

struct vy_open *vy_handles_file(const vy_handles *t, uint64_t id)
{
	vy_handle_slot *s = live_slot(t, id, VY_HANDLE_FILE);
	if (!s)
		return NULL;
	struct vy_open *o = atomic_load_explicit(&s->file, memory_order_relaxed);
	/* Still the same id (a garbage id racing a free finds NULL). */
	if (atomic_load_explicit(&s->gen, memory_order_acquire) != (uint32_t)(id >> 32))
		return NULL;
	return o;
}

vy_handle_dir *vy_handles_dir(vy_handles *t, uint64_t id)
{
	vy_handle_slot *s = live_slot(t, id, VY_HANDLE_DIR);
	return s ? &s->dir : NULL;
}

bool vy_handles_free(vy_handles *t, uint64_t id, vy_handle_kind kind)
{
	vy_handle_slot *s = live_slot(t, id, kind);
	if (!s || (kind != VY_HANDLE_FILE && kind != VY_HANDLE_DIR))
		return false;
	uint32_t index = (uint32_t)id, gen = (uint32_t)(id >> 32);
	atomic_store_explicit(&s->file, NULL, memory_order_relaxed);
	s->dir.ino = s->dir.limit = 0;
	t->live--;
	if (gen == UINT32_MAX) {
		/* Out of generations: a new one would repeat an old id. */
		atomic_store_explicit(&s->kind, VY_HANDLE_RETIRED, memory_order_relaxed);
		atomic_store_explicit(&s->gen, 0, memory_order_release);
		return true;
	}
	atomic_store_explicit(&s->kind, VY_HANDLE_FREE, memory_order_relaxed);
	atomic_store_explicit(&s->gen, gen + 1, memory_order_release);
	s->next_free = t->free_head;
	t->free_head = index;
	return true;
}

bool vy_handles_next_file(const vy_handles *t, uint64_t *cursor, uint64_t *id, struct vy_open **o)
{
	for (; *cursor < t->used; (*cursor)++) {
		vy_handle_slot *s = slot_at(t, (uint32_t)*cursor);
		if (atomic_load_explicit(&s->kind, memory_order_relaxed) != VY_HANDLE_FILE)
			continue;
		*id = id_of(atomic_load_explicit(&s->gen, memory_order_relaxed), (uint32_t)*cursor);
		*o = atomic_load_explicit(&s->file, memory_order_relaxed);
		(*cursor)++;
		return true;
	}
	return false;
}
