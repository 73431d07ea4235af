/* The cuda backend's memory kept for a successor (core/device_keep.h):
 * each VMM allocation is exported once, as a POSIX fd, to the keeper's
 * sink; a successor imports the fd (cuMemImportFromShareableHandle) and
 * holds the handle as an allocation of its own, so vy_cuda_free releases
 * it and map_own maps it. While kept, small allocations are slots of slabs
 * (cuda_alloc.c), a slab one VMM granule and one keeper slot, its slots
 * pieces `at` their offset; every other allocation is VMM of whole
 * granules (d->whole_granules): cuMemAlloc memory has no fd. */
#include "core/cuda.h"

#ifdef VY_HAVE_CUDA_H

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

/* (cuda_vmm.c hands each new allocation to the sink and drops a freed
 * one's slot: vy_cuda_keep_add, vy_cuda_keep_freed.) */
#define FIX_LAYOUT "adopt only layouts vy_store_keep_layout wrote, with the fds the keeper handed; report this bug"

static vy_err cuda_keep_start(vy_device *d, const vy_keep_sink *sink, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	pthread_mutex_lock(&c->vmm_lock);
	bool again = c->sink != NULL;
	if (!again) {
		c->sink = sink;
		d->whole_granules = true;
		uint64_t key;
		void *value;
		for (size_t i = 0; vy_u64map_next(&c->vmm, &i, &key, &value);) {
			vmm_rec *r = value;
			if (key != c->zrun && !r->slot) /* the zero run is no file's */
				r->slot = vy_cuda_keep_add(c, r, key);
		}
	}
	pthread_mutex_unlock(&c->vmm_lock);
	if (again)
		return vy_fail(e, VY_EINVAL, "start keeping a device's memory once", "cuda backend: its memory is kept already");
	vy_cuda_slabs_start(c);
	return VY_OK;
}

static void cuda_keep_forget(vy_device *d, vy_dptr p)
{
	cuda_device *c = cuda_of(d);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	if (r && !r->slab)
		vy_cuda_keep_freed(c, r);
	pthread_mutex_unlock(&c->vmm_lock);
}

static bool cuda_keep_where(vy_device *d, vy_dptr p, vy_keep_slot *slot, uint64_t *at)
{
	cuda_device *c = cuda_of(d);
	pthread_mutex_lock(&c->slab_lock);
	vy_dptr base = vy_cuda_slab_of(c, p);
	pthread_mutex_unlock(&c->slab_lock);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, base ? base : p);
	if (r && r->slab != (base != 0))
		r = NULL; /* a slab's granule, not a slot in it */
	if (r) {
		*slot = r->slot;
		*at = p - (base ? base : p);
	}
	pthread_mutex_unlock(&c->vmm_lock);
	return r != NULL;
}

/* The memory kept in `slot` (all `bytes` of it) imported and mapped as an
 * allocation of d's, a slab's when `slab`; its fd taken from fds. */
static vy_err adopt_whole(cuda_device *c, vy_keep_slot slot, uint64_t bytes, bool slab, vy_keep_fds *fds,
			  vy_dptr *out, vy_error *e)
{
	uint64_t g = c->base.info.share_granularity;
	int fd = slot < fds->n ? fds->fd[slot] : -1;
	pthread_mutex_lock(&c->vmm_lock);
	bool taken = vy_u64map_get(&c->by_slot, slot) != NULL;
	pthread_mutex_unlock(&c->vmm_lock);
	if (slot == 0 || fd < 0 || taken || !g || bytes == 0 || bytes % g || bytes > SIZE_MAX)
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT,
			       "cuda backend: keeper slot %u (%llu bytes) was not handed, is adopted already, or is not "
			       "whole granules",
			       slot, (unsigned long long)bytes);
	CU_CURRENT(c, e);
	vmm_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record an allocation");
	r->bytes = bytes;
	r->slab = slab;
	/* The fd is kept with the record: the driver exports no imported
	 * handle again, so a mapping or a launcher gets a copy of it.
	 * cuMemMap fails if the memory is smaller than `bytes`. */
	CUresult cr = c->api.MemImportFromShareableHandle(&r->handle, (void *)(uintptr_t)fd,
							  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	if (cr != CUDA_SUCCESS) {
		free(r);
		return vy_cuda_fail(c, cr, "cuMemImportFromShareableHandle", e);
	}
	r->imported = true;
	r->fd = fd;
	vy_dptr p;
	vy_err rc = vy_cuda_vmm_map(c, r, &p, e); /* frees r on failure (not the fd) */
	if (rc != VY_OK)
		return rc;
	pthread_mutex_lock(&c->vmm_lock);
	bool put = vy_u64map_put(&c->by_slot, slot, (void *)(uintptr_t)p);
	if (put)
		r->slot = slot;
	pthread_mutex_unlock(&c->vmm_lock);
	if (!put) {
		r->imported = false; /* the fd stays the caller's */
		bool was;
		vy_cuda_vmm_free(c, p, slab, &was, NULL);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a kept slot");
	}
	fds->fd[slot] = -1; /* the record's now */
	*out = p;
	return VY_OK;
}

/* Undo adopt_whole: the memory at p is no longer d's, a copy of its fd
 * back in fds where it was taken. */
static void unadopt_whole(cuda_device *c, vy_dptr p, bool slab, vy_keep_fds *fds)
{
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	if (r && r->slab != slab)
		r = NULL; /* not what was adopted here: left as it is */
	vy_keep_slot slot = r ? r->slot : 0;
	/* The same memory, a new fd: the keeper's copy in the slot is as before. */
	int fd = r ? vy_cuda_export(c, r) : -1;
	if (r && slot) {
		vy_u64map_remove(&c->by_slot, slot);
		r->slot = 0; /* not dropped: the keeper keeps it for whoever settles the slots */
	}
	pthread_mutex_unlock(&c->vmm_lock);
	if (fd >= 0 && slot < fds->n && fds->fd[slot] < 0)
		fds->fd[slot] = fd;
	else if (fd >= 0)
		close(fd);
	bool was;
	if (r)
		vy_cuda_vmm_free(c, p, slab, &was, NULL);
}

/* A slab's slot: its first adopted slot imports the slab's granule, the
 * next find it by the keeper slot. slab_lock held. */
static vy_err adopt_slot(cuda_device *c, vy_keep_slot slot, uint64_t at, uint64_t bytes, vy_keep_fds *fds,
			 vy_dptr *out, vy_error *e)
{
	pthread_mutex_lock(&c->vmm_lock);
	vy_dptr base = (vy_dptr)(uintptr_t)vy_u64map_get(&c->by_slot, slot);
	vmm_rec *r = base ? vy_u64map_get(&c->vmm, base) : NULL;
	pthread_mutex_unlock(&c->vmm_lock);
	if (base && (!r || !r->slab))
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT, "cuda backend: keeper slot %u is adopted already as another allocation",
			       slot);
	bool made = !base;
	vy_err rc = made ? adopt_whole(c, slot, c->slabs.slab_bytes, true, fds, &base, e) : VY_OK;
	if (rc != VY_OK)
		return rc;
	*out = vy_slabs_adopt(&c->slabs, base, -1, slot, at, bytes);
	int err = errno;
	if (*out)
		return VY_OK;
	if (made)
		unadopt_whole(c, base, true, fds);
	if (err == ENOMEM)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a slab");
	return vy_fail(e, VY_EINVAL, FIX_LAYOUT, "cuda backend: %llu bytes at %llu of keeper slot %u are no free slot of its slab",
		       (unsigned long long)bytes, (unsigned long long)at, slot);
}

static vy_err cuda_keep_adopt(vy_device *d, vy_keep_slot slot, uint64_t at, uint64_t bytes, vy_keep_fds *fds,
			      vy_dptr *out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	if (!c->slabs_on || !vy_slabs_take(&c->slabs, bytes)) {
		if (at != 0) /* one allocation is one piece, all of it */
			return vy_fail(e, VY_EINVAL, FIX_LAYOUT, "cuda backend: keeper slot %u: %llu bytes at %llu of it",
				       slot, (unsigned long long)bytes, (unsigned long long)at);
		return adopt_whole(c, slot, bytes, false, fds, out, e);
	}
	CU_CURRENT(c, e);
	pthread_mutex_lock(&c->slab_lock);
	vy_err rc = adopt_slot(c, slot, at, bytes, fds, out, e);
	pthread_mutex_unlock(&c->slab_lock);
	return rc;
}

static void cuda_keep_unadopt(vy_device *d, vy_dptr p, vy_keep_fds *fds)
{
	cuda_device *c = cuda_of(d);
	if (vy_cuda_current(c, NULL) != VY_OK)
		return;
	pthread_mutex_lock(&c->slab_lock);
	uint64_t base = 0;
	int64_t handle;
	bool slot = c->slabs_on && vy_cuda_slab_of(c, p);
	if (slot && vy_slabs_unadopt(&c->slabs, p, &base, &handle))
		unadopt_whole(c, base, true, fds); /* its last slot: the granule goes back */
	pthread_mutex_unlock(&c->slab_lock);
	if (!slot)
		unadopt_whole(c, p, false, fds);
}

const vy_device_keep_ops vy_cuda_keep = {
	.start = cuda_keep_start,
	.forget = cuda_keep_forget,
	.where = cuda_keep_where,
	.adopt = cuda_keep_adopt,
	.unadopt = cuda_keep_unadopt,
};

#endif
