/* The cuda backend's allocations: which memory each one gets.
 *
 * - While kept for a successor (cuda_keep_start), small ones (up to
 *   VY_SLAB_MAX) are slots of slabs (core/slab.h), each slab one VMM
 *   granule kept as one keeper slot: a small file costs a slot, not a
 *   granule, an export and a keeper ADD of its own (what made an untar on
 *   cuda with survive=on 3x slower, docs/survive.md). Larger ones are VMM
 *   of whole granules: only VMM memory has an fd a keeper can hold.
 * - Otherwise: VMM from the share granularity on, so another process can
 *   map it; cuMemAlloc below it. */
#include "core/cuda.h"

#ifdef VY_HAVE_CUDA_H

#include <errno.h>

/* A slab's memory: one VMM granule (slab_lock held; the context
 * current). */
static int slab_make(void *ctx, uint64_t bytes, uint64_t *base, int64_t *handle)
{
	cuda_device *c = ctx;
	vy_dptr p = 0;
	if (vy_cuda_vmm_alloc(c, bytes, true, &p, &c->slab_err) != VY_OK)
		return c->slab_err.code == VY_ENOSPC ? ENOSPC : EIO;
	*base = p; /* kept at its first slot (slab_alloc) */
	*handle = -1;
	return 0;
}

static void slab_unmake(void *ctx, uint64_t base, int64_t handle)
{
	(void)handle;
	bool was;
	vy_cuda_vmm_free(ctx, base, true, &was, NULL);
}

void vy_cuda_slabs_start(cuda_device *c)
{
	pthread_mutex_lock(&c->slab_lock);
	c->slabs_on = vy_slabs_init(&c->slabs, c->base.info.share_granularity,
				    &(vy_slab_backing){.ctx = c, .make = slab_make, .unmake = slab_unmake});
	c->base.slab_max = c->slabs_on ? VY_SLAB_MAX : 0;
	pthread_mutex_unlock(&c->slab_lock);
}

void vy_cuda_slabs_destroy(cuda_device *c)
{
	if (c->slabs_on)
		vy_slabs_destroy(&c->slabs);
	c->slabs_on = false;
}

uint64_t vy_cuda_slabs_idle(cuda_device *c)
{
	if (!c->slabs_on)
		return 0;
	pthread_mutex_lock(&c->slab_lock);
	uint64_t idle = c->slabs.empty * c->slabs.slab_bytes;
	pthread_mutex_unlock(&c->slab_lock);
	return idle;
}

vy_dptr vy_cuda_slab_of(cuda_device *c, vy_dptr p)
{
	int64_t handle;
	uint64_t base;
	return c->slabs_on && vy_slabs_holds(&c->slabs, p) && vy_slabs_tag(&c->slabs, p, &handle, &base) ? base : 0;
}

/* A slab's slot: true when slabs serve `bytes` (*rc says how it went). */
static bool slab_alloc(cuda_device *c, uint64_t bytes, vy_dptr *out, vy_err *rc, vy_error *e)
{
	if (!c->slabs_on || !vy_slabs_take(&c->slabs, bytes))
		return false;
	pthread_mutex_lock(&c->slab_lock);
	uint64_t p = vy_slabs_alloc(&c->slabs, bytes);
	/* A slab the keeper could not take when made is offered again, as
	 * the host does; its tag is its keeper slot once it has one. */
	int64_t handle;
	uint64_t base;
	uint32_t *tag = p ? vy_slabs_tag(&c->slabs, p, &handle, &base) : NULL;
	if (tag && !*tag)
		*tag = vy_cuda_keep_made(c, base);
	*rc = VY_OK;
	if (!p && errno == ENOMEM) {
		*rc = vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a slab");
	} else if (!p) { /* the driver's error, from slab_make */
		*rc = c->slab_err.code;
		if (e) {
			*e = c->slab_err;
			vy_error_prefix(e, "cuda backend: a slab for small files: ");
		}
	}
	pthread_mutex_unlock(&c->slab_lock);
	*out = p;
	return true;
}

vy_err vy_cuda_alloc(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CUdeviceptr p = 0;
	if (bytes == 0)
		return vy_fail(e, VY_EINVAL, "allocate at least 1 byte", "cuda backend: zero-byte allocation");
	if (bytes > SIZE_MAX)
		return vy_fail(e, VY_EOVERFLOW, "allocate less", "cuda backend: %llu bytes do not fit size_t",
			       (unsigned long long)bytes);
	CU_CURRENT(c, e);
	vy_err rc;
	if (slab_alloc(c, bytes, out, &rc, e))
		return rc;
	uint64_t g = c->base.info.share_granularity;
	/* Kept (d->whole_granules): the rest too, as only VMM memory has an
	 * fd a keeper can hold. */
	if (g && (bytes >= g || d->whole_granules)) {
		uint64_t whole = vy_device_alloc_size(d, bytes); /* VMM takes whole granules */
		if (!whole || whole > SIZE_MAX)
			return vy_fail(e, VY_EOVERFLOW, "allocate less", "cuda backend: %llu bytes do not fit size_t",
				       (unsigned long long)bytes);
		rc = vy_cuda_vmm_alloc(c, whole, false, out, e);
		if (rc == VY_OK)
			vy_cuda_keep_made(c, *out);
		return rc;
	}
	CU_CALL(c, e, MemAlloc, (&p, (size_t)bytes));
	*out = (vy_dptr)p;
	return VY_OK;
}

vy_err vy_cuda_free(vy_device *d, vy_dptr p, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	if (c->slabs_on) {
		pthread_mutex_lock(&c->slab_lock);
		bool slot = vy_slabs_free(&c->slabs, p, NULL); /* an emptied slab's granule goes */
		pthread_mutex_unlock(&c->slab_lock);
		if (slot)
			return VY_OK;
	}
	bool was = false;
	vy_err rc = c->base.info.share_granularity ? vy_cuda_vmm_free(c, p, false, &was, e) : VY_OK;
	if (was || rc != VY_OK)
		return rc;
	/* Anything else, a slab's granule too, is cuMemFree's to refuse. */
	CU_CALL(c, e, MemFree, ((CUdeviceptr)p));
	return VY_OK;
}

#endif
