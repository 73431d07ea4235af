/* Small host allocations in memfd slabs (see host_slab.h). */
#include "core/host_slab.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct vy_slab {
	uint64_t base;
	int fd;
	unsigned cls;         /* slots of VY_SLAB_MIN << cls bytes */
	uint32_t slots, used;
	vy_slab *prev, *next; /* in partial[cls] while a slot is free */
	bool listed;
	uint32_t tag;         /* the owner's (a keeper slot), 0 at first */
	uint64_t taken[];     /* a bit a slot, and the bits past the last set */
};

bool vy_host_slabs_init(vy_host_slabs *s, uint64_t slab_bytes)
{
	*s = (vy_host_slabs){.slab_bytes = slab_bytes};
	vy_u64map_init(&s->by_base);
	uint64_t largest = (uint64_t)VY_SLAB_MIN << (VY_SLAB_CLASSES - 1);
	return slab_bytes >= 2 * largest && (slab_bytes & (slab_bytes - 1)) == 0;
}

static void drop(vy_host_slabs *s, vy_slab *b)
{
	munmap((void *)(uintptr_t)b->base, (size_t)s->slab_bytes);
	close(b->fd);
	s->slabs--;
	free(b);
}

void vy_host_slabs_destroy(vy_host_slabs *s)
{
	uint64_t key;
	void *value;
	for (size_t i = 0; vy_u64map_next(&s->by_base, &i, &key, &value);)
		drop(s, value);
	vy_u64map_destroy(&s->by_base);
	*s = (vy_host_slabs){0};
}

bool vy_host_slabs_take(const vy_host_slabs *s, uint64_t bytes)
{
	return bytes > 0 && bytes <= s->slab_bytes / 2 && bytes <= (uint64_t)VY_SLAB_MIN << (VY_SLAB_CLASSES - 1);
}

static void list_add(vy_host_slabs *s, vy_slab *b)
{
	b->prev = NULL;
	b->next = s->partial[b->cls];
	if (b->next)
		b->next->prev = b;
	s->partial[b->cls] = b;
	b->listed = true;
}

static void list_remove(vy_host_slabs *s, vy_slab *b)
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

/* A new slab of class `cls`: a memfd (a new one when `fd` is -1, else
 * `fd`, the slab's from now on) mapped at an address aligned to its
 * size, so a slot's slab is its address rounded down. */
static vy_slab *slab_new(vy_host_slabs *s, unsigned cls, int fd)
{
	uint32_t slots = (uint32_t)(s->slab_bytes / ((uint64_t)VY_SLAB_MIN << cls));
	size_t words = (slots + 63) / 64;
	vy_slab *b = calloc(1, sizeof(*b) + words * sizeof(uint64_t));
	if (!b)
		return NULL;
	b->cls = cls;
	b->slots = slots;
	for (uint32_t i = slots; i < words * 64; i++)
		b->taken[i / 64] |= 1ull << (i % 64);
	size_t n = (size_t)s->slab_bytes;
	int err = 0;
	b->fd = fd >= 0 ? fd : memfd_create("vyrefs-small", MFD_CLOEXEC);
	void *room = MAP_FAILED;
	if (b->fd < 0 || (fd < 0 && ftruncate(b->fd, (off_t)n) != 0) ||
	    (room = mmap(NULL, 2 * n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)) == MAP_FAILED) {
		err = errno;
	} else {
		uintptr_t at = ((uintptr_t)room + n - 1) & ~(uintptr_t)(n - 1);
		void *p = mmap((void *)at, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, b->fd, 0);
		err = p == MAP_FAILED ? errno : 0;
		/* The reservation's parts before and after the slab. */
		if (at > (uintptr_t)room)
			munmap(room, at - (uintptr_t)room);
		uintptr_t end = (uintptr_t)room + 2 * n;
		if (end > at + n)
			munmap((void *)(at + n), end - (at + n));
		if (!err)
			b->base = at;
		else
			munmap((void *)at, n);
	}
	if (!err && !vy_u64map_put(&s->by_base, b->base, b)) {
		munmap((void *)(uintptr_t)b->base, n);
		err = ENOMEM;
	}
	if (err) {
		if (b->fd >= 0 && fd < 0)
			close(b->fd);
		free(b);
		errno = err;
		return NULL;
	}
	s->slabs++;
	return b;
}

/* The class of `bytes` (vy_host_slabs_take said yes). */
static unsigned class_of(uint64_t bytes)
{
	unsigned cls = 0;
	while (((uint64_t)VY_SLAB_MIN << cls) < bytes)
		cls++;
	return cls;
}

void *vy_host_slabs_alloc(vy_host_slabs *s, uint64_t bytes)
{
	if (!vy_host_slabs_take(s, bytes)) {
		errno = EINVAL;
		return NULL;
	}
	unsigned cls = class_of(bytes);
	vy_slab *b = s->partial[cls];
	if (!b) {
		b = slab_new(s, cls, -1);
		if (!b)
			return NULL;
		list_add(s, b);
	}
	for (size_t w = 0;; w++) { /* a listed slab has a free slot */
		if (~b->taken[w] == 0)
			continue;
		unsigned bit = (unsigned)__builtin_ctzll(~b->taken[w]);
		b->taken[w] |= 1ull << bit;
		if (++b->used == b->slots)
			list_remove(s, b);
		uint64_t slot = w * 64 + bit;
		return (void *)(uintptr_t)(b->base + slot * ((uint64_t)VY_SLAB_MIN << cls));
	}
}

/* The slab holding `p`, and p's slot in it when p is a live slot. */
static vy_slab *slab_of(const vy_host_slabs *s, uint64_t at, uint64_t *slot)
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

/* Give back live slot `slot` of b; an empty slab goes when `always`, or
 * when it is not its class's only one with room. The slab that went:
 * its tag in *gone, and its fd, still open, returned; else -1. */
static int slot_free(vy_host_slabs *s, vy_slab *b, uint64_t slot, bool always, uint32_t *gone)
{
	b->taken[slot / 64] &= ~(1ull << (slot % 64));
	b->used--;
	if (!b->listed)
		list_add(s, b);
	/* A loop that makes and removes one small file keeps its slab. */
	if (b->used > 0 || (!always && !b->prev && !b->next))
		return -1;
	list_remove(s, b);
	vy_u64map_remove(&s->by_base, b->base);
	munmap((void *)(uintptr_t)b->base, (size_t)s->slab_bytes);
	int fd = b->fd;
	if (gone)
		*gone = b->tag;
	s->slabs--;
	free(b);
	return fd;
}

bool vy_host_slabs_free(vy_host_slabs *s, void *p)
{
	return vy_host_slabs_free_tagged(s, p, NULL);
}

bool vy_host_slabs_free_tagged(vy_host_slabs *s, void *p, uint32_t *gone)
{
	uint64_t slot;
	vy_slab *b = slab_of(s, (uint64_t)(uintptr_t)p, &slot);
	if (gone)
		*gone = 0;
	if (!b)
		return false;
	int fd = slot_free(s, b, slot, false, gone);
	if (fd >= 0)
		close(fd);
	return true;
}

uint32_t *vy_host_slabs_tag(vy_host_slabs *s, uint64_t p, int *fd, uint64_t *base)
{
	vy_slab *b = s->slab_bytes ? vy_u64map_get(&s->by_base, p & ~(s->slab_bytes - 1)) : NULL;
	if (!b)
		return NULL;
	*fd = b->fd;
	*base = b->base;
	return &b->tag;
}

void *vy_host_slabs_adopt(vy_host_slabs *s, int fd, uint64_t *base, uint32_t tag, uint64_t at, uint64_t bytes)
{
	if (!vy_host_slabs_take(s, bytes)) {
		errno = EINVAL;
		return NULL;
	}
	unsigned cls = class_of(bytes);
	uint64_t size = (uint64_t)VY_SLAB_MIN << cls;
	vy_slab *b = *base ? vy_u64map_get(&s->by_base, *base) : NULL;
	/* A slab's slots are of one class, aligned to it, each taken once. */
	if ((*base && (!b || b->cls != cls)) || at % size || at / size >= s->slab_bytes / size ||
	    (b && (b->taken[at / size / 64] & (1ull << (at / size % 64))))) {
		errno = EINVAL;
		return NULL;
	}
	bool made = !b;
	if (made) {
		b = slab_new(s, cls, fd);
		if (!b)
			return NULL;
		b->tag = tag;
		list_add(s, b);
	}
	uint64_t slot = at / size;
	b->taken[slot / 64] |= 1ull << (slot % 64);
	if (++b->used == b->slots)
		list_remove(s, b);
	*base = b->base;
	return (void *)(uintptr_t)(b->base + at);
}

int vy_host_slabs_unadopt(vy_host_slabs *s, void *p)
{
	uint64_t slot;
	vy_slab *b = slab_of(s, (uint64_t)(uintptr_t)p, &slot);
	return b ? slot_free(s, b, slot, true, NULL) : -1;
}

bool vy_host_slabs_next(const vy_host_slabs *s, size_t *cursor, int *fd, uint64_t *base)
{
	uint64_t key;
	void *value;
	if (!vy_u64map_next(&s->by_base, cursor, &key, &value))
		return false;
	*fd = ((vy_slab *)value)->fd;
	*base = key;
	return true;
}
