/* The host backend's small allocations (under the share granularity):
 * slots of power-of-two size classes carved from slabs, each slab one
 * memfd. Not heap memory, because an fd outlives the process that made it
 * when another process holds it: that is how a keeper keeps a file's bytes
 * through the daemon's death (docs/survive.md, "Memory"). A slab is never
 * handed to another process as a mapping: a small buffer a client maps
 * moves to memory of its own first (core/store.h), so a client still gets
 * only its file's bytes.
 *
 * Not locked: the owner (core/device_host.c) holds its lock. */
#ifndef VY_HOST_SLAB_H
#define VY_HOST_SLAB_H

#include <stdbool.h>
#include <stdint.h>

#include "core/u64map.h"

/* The smallest slot (cuMemAlloc's alignment) and the number of classes:
 * 256 B, 512 B, ... 1 MiB. */
#define VY_SLAB_MIN 256u
#define VY_SLAB_CLASSES 13u

typedef struct vy_slab vy_slab;

typedef struct vy_host_slabs {
	uint64_t slab_bytes;                 /* each slab's size and alignment */
	vy_slab *partial[VY_SLAB_CLASSES];   /* slabs of a class with a free slot */
	vy_u64map by_base;                   /* slab base address -> vy_slab */
	uint64_t slabs;                      /* live slabs (memfds) */
} vy_host_slabs;

/* `slab_bytes`: a power of two, at least VY_SLAB_MIN << (VY_SLAB_CLASSES - 1)
 * (the largest class fits twice). False: not so. */
bool vy_host_slabs_init(vy_host_slabs *s, uint64_t slab_bytes);
/* Unmap and close every slab (whatever is still allocated goes too). */
void vy_host_slabs_destroy(vy_host_slabs *s);

/* Whether `bytes` is served by slabs (1 .. slab_bytes / 2). */
bool vy_host_slabs_take(const vy_host_slabs *s, uint64_t bytes);
/* A slot of at least `bytes`, aligned to its class; NULL when memory or
 * fds run out (errno says which). */
void *vy_host_slabs_alloc(vy_host_slabs *s, uint64_t bytes);
/* Give back a slot vy_host_slabs_alloc returned; false (nothing changed)
 * for any other pointer or a second free. An empty slab goes. */
bool vy_host_slabs_free(vy_host_slabs *s, void *p);

/* The same; the tag of a slab that went with it in *gone (0: none went). */
bool vy_host_slabs_free_tagged(vy_host_slabs *s, void *p, uint32_t *gone);

/* Keeping slabs for a successor (core/host_keep.c). A slab carries a tag
 * of its owner's (a keeper slot, 0 at first): where the slab holding
 * address `p` keeps it, with its fd and base; NULL: no slab holds p. */
uint32_t *vy_host_slabs_tag(vy_host_slabs *s, uint64_t p, int *fd, uint64_t *base);
/* A successor: the slot at offset `at` of `bytes` (its class's) in the
 * slab at *base, or, with *base 0, in a new slab made of memfd `fd`
 * (slab_bytes of it; the slab's fd on success) tagged `tag`, *base set.
 * NULL with errno EINVAL (not a free slot of that class there) or
 * ENOMEM; nothing taken then. */
void *vy_host_slabs_adopt(vy_host_slabs *s, int fd, uint64_t *base, uint32_t tag, uint64_t at, uint64_t bytes);
/* Undo one adopt: the slot is free again; when that empties its slab,
 * the slab goes and its fd, still open, is returned; else -1. */
int vy_host_slabs_unadopt(vy_host_slabs *s, void *p);

/* Each slab's memfd and base, for whoever keeps them (a keeper); false
 * past the last. for (size_t i = 0; vy_host_slabs_next(s, &i, &fd, &base);) */
bool vy_host_slabs_next(const vy_host_slabs *s, size_t *cursor, int *fd, uint64_t *base);

#endif
