/* The cuda backend's memory kept for a successor (core/device_keep.h):
 * each VMM allocation is exported once, as a POSIX fd, to the keeper's
 * sink; a successor imports the fd (cuMemImportFromShareableHandle) and
 * holds the handle as an allocation of its own, so vy_cuda_free releases
 * it and map_own maps it. While kept every allocation is VMM, of whole
 * granules (d->whole_granules): cuMemAlloc memory has no fd. */
#include "core/cuda.h"

#ifdef VY_HAVE_CUDA_H

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
	if (c->sink) {
		pthread_mutex_unlock(&c->vmm_lock);
		return vy_fail(e, VY_EINVAL, "start keeping a device's memory once", "cuda backend: its memory is kept already");
	}
	c->sink = sink;
	d->whole_granules = true;
	uint64_t key;
	void *value;
	for (size_t i = 0; vy_u64map_next(&c->vmm, &i, &key, &value);) {
		vmm_rec *r = value;
		if (key != c->zrun && !r->slot) /* the zero run is no file's */
			r->slot = vy_cuda_keep_add(c, r, key);
	}
	pthread_mutex_unlock(&c->vmm_lock);
	return VY_OK;
}

static void cuda_keep_forget(vy_device *d, vy_dptr p)
{
	cuda_device *c = cuda_of(d);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	if (r)
		vy_cuda_keep_freed(c, r);
	pthread_mutex_unlock(&c->vmm_lock);
}

static bool cuda_keep_where(vy_device *d, vy_dptr p, vy_keep_slot *slot, uint64_t *at)
{
	cuda_device *c = cuda_of(d);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	if (r) {
		*slot = r->slot;
		*at = 0;
	}
	pthread_mutex_unlock(&c->vmm_lock);
	return r != NULL;
}

static vy_err cuda_keep_adopt(vy_device *d, vy_keep_slot slot, uint64_t at, uint64_t bytes, vy_keep_fds *fds,
			      vy_dptr *out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	uint64_t g = d->info.share_granularity;
	int fd = slot < fds->n ? fds->fd[slot] : -1;
	pthread_mutex_lock(&c->vmm_lock);
	bool taken = vy_u64map_get(&c->by_slot, slot) != NULL;
	pthread_mutex_unlock(&c->vmm_lock);
	/* One allocation is one piece, all of it: VMM has no slabs. */
	if (slot == 0 || fd < 0 || taken || at != 0 || !g || bytes == 0 || bytes % g || bytes > SIZE_MAX)
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT,
			       "cuda backend: keeper slot %u (%llu bytes at %llu) was not handed, is adopted already, or "
			       "is not whole granules",
			       slot, (unsigned long long)bytes, (unsigned long long)at);
	CU_CURRENT(c, e);
	vmm_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record an allocation");
	r->bytes = bytes;
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
		vy_cuda_free(d, p, NULL);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a kept slot");
	}
	fds->fd[slot] = -1; /* the record's now */
	*out = p;
	return VY_OK;
}

static void cuda_keep_unadopt(vy_device *d, vy_dptr p, vy_keep_fds *fds)
{
	cuda_device *c = cuda_of(d);
	if (vy_cuda_current(c, NULL) != VY_OK)
		return;
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
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
	if (r)
		vy_cuda_free(d, p, NULL);
}

const vy_device_keep_ops vy_cuda_keep = {
	.start = cuda_keep_start,
	.forget = cuda_keep_forget,
	.where = cuda_keep_where,
	.adopt = cuda_keep_adopt,
	.unadopt = cuda_keep_unadopt,
};

#endif
