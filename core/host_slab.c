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

/* A new slab of class `cls`: a memfd mapped at an address aligned to its
 * size, so a slot's slab is its address rounded down. */
static vy_slab *slab_new(vy_host_slabs *s, unsigned cls)
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
	b->fd = memfd_create("vyrefs-small", MFD_CLOEXEC);
	void *room = MAP_FAILED;
	if (b->fd < 0 || ftruncate(b->fd, (off_t)n) != 0 ||
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
		if (b->fd >= 0)
			close(b->fd);
		free(b);
		errno = err;
		return NULL;
	}
	s->slabs++;
	return b;
}

void *vy_host_slabs_alloc(vy_host_slabs *s, uint64_t bytes)
{
	if (!vy_host_slabs_take(s, bytes)) {
		errno = EINVAL;
		return NULL;
	}
	unsigned cls = 0;
	while (((uint64_t)VY_SLAB_MIN << cls) < bytes)
		cls++;
	vy_slab *b = s->partial[cls];
	if (!b) {
		b = slab_new(s, cls);
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

bool vy_host_slabs_free(vy_host_slabs *s, void *p)
{
	uint64_t at = (uint64_t)(uintptr_t)p, base = at & ~(s->slab_bytes - 1);
	vy_slab *b = s->slab_bytes ? vy_u64map_get(&s->by_base, base) : NULL;
	if (!b)
		return false;
	uint64_t size = (uint64_t)VY_SLAB_MIN << b->cls, off = at - base;
	uint64_t slot = off / size;
	if (off % size || slot >= b->slots || !(b->taken[slot / 64] & (1ull << (slot % 64))))
		return false;
	b->taken[slot / 64] &= ~(1ull << (slot % 64));
	b->used--;
	if (!b->listed)
		list_add(s, b);
	/* An empty slab goes, unless it is its class's only one with room:
	 * a loop that makes and removes one small file keeps its slab. */
	if (b->used == 0 && (b->prev || b->next)) {
		list_remove(s, b);
		vy_u64map_remove(&s->by_base, base);
		drop(s, b);
	}
	return true;
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
