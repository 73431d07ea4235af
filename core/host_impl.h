/* The host backend's insides, shared by device_host.c (the device table)
 * and host_keep.c (keeping its memory for a successor); nothing else
 * includes it. */
#ifndef VY_HOST_IMPL_H
#define VY_HOST_IMPL_H

#include "core/device.h"
#include "core/device_keep.h"
#include "core/slab.h"
#include "core/u64map.h"

#include <pthread.h>

/* A live allocation: a slab's slot (fd -1; its slab carries the keeper
 * slot) or a memfd mapping of its own, shareable from the share
 * granularity on, kept in `slot` (0: not kept). */
typedef struct host_alloc_rec {
	uint64_t bytes;
	int fd;
	vy_keep_slot slot;
} host_alloc_rec;

typedef struct host_device {
	vy_device base;
	pthread_mutex_t lock;
	uint64_t capacity;
	uint64_t used;
	vy_u64map live;     /* pointer -> host_alloc_rec */
	vy_u64map reserved; /* pointer -> its bytes: spans' address ranges */
	vy_u64map mapped;   /* pointer -> its bytes: what map_fd/map_own put there */
	vy_slabs slabs; /* small allocations (lock; host_slab.c makes their memory) */
	/* Keeping (host_keep.c; lock): the sink once started, and each kept
	 * slot's memory: an allocation's pointer, or a slab's base | 1. */
	const vy_keep_sink *sink;
	vy_u64map by_slot;
} host_device;

extern const vy_device_keep_ops vy_host_keep;

/* host_slab.c: slabs whose memory is memfds of `slab_bytes`; and a memfd
 * mapped at an address aligned to `bytes` (*base; 0 or an errno), as a
 * slab's is, for a successor's adopted slab too. */
bool vy_host_slabs_init(vy_slabs *s, uint64_t slab_bytes);
int vy_host_slab_map(int fd, uint64_t bytes, uint64_t *base);

/* host_keep.c's hooks into alloc and free, lock held: a new allocation
 * (a slab's slot when r->fd < 0) is handed to the sink; a freed one's
 * slot (a dedicated memfd's, or `slab_gone`, the tag of a slab that went)
 * is dropped. */
void vy_host_keep_made(host_device *h, host_alloc_rec *r, vy_dptr p);
void vy_host_keep_freed(host_device *h, const host_alloc_rec *r, vy_keep_slot slab_gone);

#endif
