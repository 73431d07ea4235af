/* Keeping a device's memory for a successor daemon (issue "survive",
 * docs/survive.md "Memory"): the fd side of it, below the store. A keeper
 * (keeper/) holds a copy of each allocation's fd under a slot number; a
 * successor handed those fds makes the same memory live again.
 *
 * The optional sub-table `keep` of a device (core/device.h; NULL: this
 * device cannot keep). core/store_keep.c calls it; the host backend's is
 * core/host_keep.c, cuda's core/cuda_keep.c. */
#ifndef VY_DEVICE_KEEP_H
#define VY_DEVICE_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/device.h"

/* Where the keeper holds an allocation: a slot number >= 6
 * (keeper/wire.h VY_KEEPER_SLOT_MEMORY); 0 means none. */
typedef uint32_t vy_keep_slot;

/* Who keeps the fds (daemon/keeper_memory.c gives one). Called with the
 * store's and device's locks held: it must not call back into either. */
typedef struct vy_keep_sink {
	void *ctx;
	/* Hold a copy of `fd` (the caller keeps and later closes its own):
	 * the slot it is held in, or 0 when it cannot be (then that memory
	 * does not survive the daemon; the sink logs why). */
	vy_keep_slot (*add)(void *ctx, int fd);
	/* The allocation kept in `slot` is freed: its copy goes. */
	void (*drop)(void *ctx, vy_keep_slot slot);
	/* Whether a new allocation may still be kept (NULL: always). False:
	 * the store refuses it (ENOSPC, with `why`'s Fix) rather than make
	 * memory a successor would not get back. Called before the device
	 * allocates, with the store's lock held. */
	bool (*room)(void *ctx, char *why, size_t cap);
	/* From hold to release (this thread's, nested) drops wait: a file's
	 * layout change frees memory, and the keeper lets go of it only once
	 * the layout that stops naming it is kept. NULL: drops go at once. */
	void (*hold)(void *ctx);
	void (*release)(void *ctx);
} vy_keep_sink;

/* The fds a successor was handed, by slot: fd[slot] (-1: none), n slots.
 * vy_store_keep_adopt takes the fds it uses (leaving -1); the caller
 * drops and closes what no layout took once every file is adopted. */
typedef struct vy_keep_fds {
	int *fd;
	uint32_t n;
} vy_keep_fds;

struct vy_device_keep_ops {
	/* From now on hand every allocation that can hold a file's bytes to
	 * `sink` (add when made, drop when freed), those live now at once.
	 * Once per device; the sink outlives it. cuda: every allocation is
	 * whole share granules from now on (d->whole_granules). */
	vy_err (*start)(vy_device *d, const vy_keep_sink *sink, vy_error *e);
	/* The allocation at `p` is no file's (the store's granule of zeros):
	 * its slot is dropped now, and it is never kept. */
	void (*forget)(vy_device *d, vy_dptr p);
	/* Where the live allocation starting at `p` is kept: its slot (0:
	 * not kept) and where in that slot's memory it starts. False: `p`
	 * is no live allocation of d. */
	bool (*where)(vy_device *d, vy_dptr p, vy_keep_slot *slot, uint64_t *at);
	/* A successor: bytes [at, at + bytes) of the memory kept in `slot`
	 * as a live allocation of d, exactly as alloc(bytes) makes one
	 * (counted in mem_info, freed by free). The fd comes from fds (taken:
	 * -1 left there), or, for a slot of a host slab another allocation
	 * adopted already, from d. VY_EINVAL (with a Fix) when the slot or
	 * its fd does not fit; nothing taken then. */
	vy_err (*adopt)(vy_device *d, vy_keep_slot slot, uint64_t at, uint64_t bytes, vy_keep_fds *fds, vy_dptr *out,
			vy_error *e);
	/* Undo one adopt (an adoption that failed later): the memory is no
	 * longer d's, and its fd is back in fds where adopt took it. */
	void (*unadopt)(vy_device *d, vy_dptr p, vy_keep_fds *fds);
};

#endif
