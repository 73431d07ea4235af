/* Small allocations (under the share granularity) as slots of power-of-two
 * size classes carved from slabs, each slab one piece of memory a backend
 * makes: a memfd on the host backend (core/device_host.c), one VMM granule
 * on cuda while its memory is kept (core/cuda_slab.c). Memory that is an fd,
 * because an fd outlives the process that made it when another process
 * holds it: that is how a keeper keeps a small file's bytes through the
 * daemon's death (docs/survive.md, "Memory"), one keeper slot a slab rather
 * than one a file.
 *
 * A slab is never handed to another process as a mapping: a small buffer a
 * client maps moves to memory of its own first (core/store.h), so a client
 * still gets only its file's bytes.
 *
 * Bookkeeping only: the backend's `make` and `unmake` give and take the
 * memory. Not locked: the owner holds its lock. */
#ifndef VY_SLAB_H
#define VY_SLAB_H

#include <stdbool.h>
#include <stdint.h>

#include "core/u64map.h"

/* The smallest slot (cuMemAlloc's alignment) and the number of classes:
 * 256 B, 512 B, ... 1 MiB. */
#define VY_SLAB_MIN 256u
#define VY_SLAB_CLASSES 13u
#define VY_SLAB_MAX ((uint64_t)VY_SLAB_MIN << (VY_SLAB_CLASSES - 1))

typedef struct vy_slab vy_slab;

/* Where a backend's slabs come from. `make`: slab_bytes of new memory at
 * an address aligned to them (*base), and the backend's own word for it
 * (*handle: host, the memfd); 0, or an errno. `unmake`: an empty slab's
 * memory goes (not on unadopt: that gives it back to the caller). */
typedef struct vy_slab_backing {
	void *ctx;
	int (*make)(void *ctx, uint64_t bytes, uint64_t *base, int64_t *handle);
	void (*unmake)(void *ctx, uint64_t base, int64_t handle);
} vy_slab_backing;

typedef struct vy_slabs {
	uint64_t slab_bytes;                 /* each slab's size and alignment */
	vy_slab_backing backing;
	vy_slab *partial[VY_SLAB_CLASSES];   /* slabs of a class with a free slot */
	vy_u64map by_base;                   /* slab base address -> vy_slab */
	uint64_t slabs;                      /* live slabs */
	/* Of them, empty ones: an emptied slab stays while it is its class's
	 * only one with room (a loop that makes and removes one small file
	 * then makes no memory). A backend that counts its memory as the
	 * driver sees it reports these as free (cuda: a successor does not
	 * make them again, so df reads the same after a takeover). */
	uint64_t empty;
} vy_slabs;

/* `slab_bytes`: a power of two, at least 2 * VY_SLAB_MAX (the largest
 * class fits twice). False: not so; then s takes no size at all. */
bool vy_slabs_init(vy_slabs *s, uint64_t slab_bytes, const vy_slab_backing *backing);
/* Unmake every slab (whatever is still allocated goes too). */
void vy_slabs_destroy(vy_slabs *s);

/* The slot that serves `bytes` (1 .. VY_SLAB_MAX): its class's size. */
uint64_t vy_slab_size(uint64_t bytes);
/* Whether `bytes` is served by slabs (1 .. VY_SLAB_MAX). */
bool vy_slabs_take(const vy_slabs *s, uint64_t bytes);
/* A slot of at least `bytes`, aligned to its class; 0 with errno when
 * `make` failed (or EINVAL: not a slab's size). */
uint64_t vy_slabs_alloc(vy_slabs *s, uint64_t bytes);
/* Give back a slot vy_slabs_alloc (or adopt) returned; false (nothing
 * changed) for any other address or a second free. An empty slab goes,
 * unless it is its class's only one with room; then its tag in *gone
 * (when not NULL; 0: none went). */
bool vy_slabs_free(vy_slabs *s, uint64_t p, uint32_t *gone);

/* Whether `p` is where a live slot starts. */
bool vy_slabs_holds(const vy_slabs *s, uint64_t p);
/* The slab holding address `p` (a live slot or not): its tag, a word of
 * its owner's (a keeper slot, 0 at first), with its base and handle;
 * NULL: no slab holds p. */
uint32_t *vy_slabs_tag(vy_slabs *s, uint64_t p, int64_t *handle, uint64_t *base);

/* A successor: the slot at offset `at` of `bytes` (its class's) in the
 * slab at `base`; when no slab is there yet, one is made of the memory
 * the caller mapped at `base` (aligned, slab_bytes of it), with `handle`
 * and `tag`. 0 with errno EINVAL (not a free slot of that class there)
 * or ENOMEM; nothing taken then. */
uint64_t vy_slabs_adopt(vy_slabs *s, uint64_t base, int64_t handle, uint32_t tag, uint64_t at, uint64_t bytes);
/* Undo one adopt: the slot is free again. When that empties its slab the
 * slab goes without `unmake`: true, its base and handle the caller's to
 * undo. */
bool vy_slabs_unadopt(vy_slabs *s, uint64_t p, uint64_t *base, int64_t *handle);

/* Each slab's handle and base; false past the last.
 * for (size_t i = 0; vy_slabs_next(s, &i, &handle, &base);) */
bool vy_slabs_next(const vy_slabs *s, size_t *cursor, int64_t *handle, uint64_t *base);

#endif
