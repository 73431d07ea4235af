/* The cuda backend's VMM memory (cuMemCreate with a POSIX fd handle,
 * reserved, mapped and made accessible), its exports, and spans (reserved
 * ranges that map other allocations, imported fds and the zero granule).
 * cuda_alloc.c decides which memory an allocation gets. */
#include "core/cuda.h"

#ifdef VY_HAVE_CUDA_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reserve an address range for r's physical memory, map it and allow read
 * and write from this device; record it in c->vmm. On failure r's handle
 * is released and r freed. */
vy_err vy_cuda_vmm_map(cuda_device *c, vmm_rec *r, vy_dptr *out, vy_error *e)
{
	CUdeviceptr p = 0;
	const char *call = "cuMemAddressReserve";
	/* Aligned to the granule, so a slab's slot finds its slab by address. */
	CUresult cr = c->api.MemAddressReserve(&p, (size_t)r->bytes, (size_t)c->base.info.share_granularity, 0, 0);
	bool reserved = cr == CUDA_SUCCESS, mapped = false;
	if (cr == CUDA_SUCCESS) {
		call = "cuMemMap";
		cr = c->api.MemMap(p, (size_t)r->bytes, 0, r->handle, 0);
		mapped = cr == CUDA_SUCCESS;
	}
	if (cr == CUDA_SUCCESS) {
		CUmemAccessDesc access[VY_PEERS_MAX + 1];
		int n = access_list(c, access);
		call = "cuMemSetAccess";
		cr = c->api.MemSetAccess(p, (size_t)r->bytes, access, (size_t)n);
	}
	bool put = false;
	if (cr == CUDA_SUCCESS) {
		pthread_mutex_lock(&c->vmm_lock);
		put = vy_u64map_put(&c->vmm, (uint64_t)p, r);
		pthread_mutex_unlock(&c->vmm_lock);
	}
	if (put) {
		*out = (vy_dptr)p;
		return VY_OK;
	}
	vy_err rc = cr != CUDA_SUCCESS ? vy_cuda_fail(c, cr, call, e)
				       : vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a mapping");
	if (mapped)
		c->api.MemUnmap(p, (size_t)r->bytes);
	if (reserved)
		c->api.MemAddressFree(p, (size_t)r->bytes);
	c->api.MemRelease(r->handle);
	free(r); /* an imported one's fd stays the caller's */
	return rc;
}

/* Undo vmm_map (the record is the caller's to free). */
static vy_err vmm_unmap(cuda_device *c, vy_dptr p, vmm_rec *r, vy_error *e)
{
	vy_err rc = VY_OK;
	CUresult cr = c->api.MemUnmap((CUdeviceptr)p, (size_t)r->bytes);
	if (cr != CUDA_SUCCESS)
		rc = vy_cuda_fail(c, cr, "cuMemUnmap", e);
	cr = c->api.MemAddressFree((CUdeviceptr)p, (size_t)r->bytes);
	if (cr != CUDA_SUCCESS && rc == VY_OK)
		rc = vy_cuda_fail(c, cr, "cuMemAddressFree", e);
	cr = c->api.MemRelease(r->handle);
	if (cr != CUDA_SUCCESS && rc == VY_OK)
		rc = vy_cuda_fail(c, cr, "cuMemRelease", e);
	return rc;
}

vy_err vy_cuda_vmm_alloc(cuda_device *c, uint64_t bytes, bool slab, vy_dptr *out, vy_error *e)
{
	CUmemAllocationProp prop = {0};
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	prop.location.id = c->base.info.ordinal;
	prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	vmm_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record an allocation");
	r->bytes = bytes;
	r->slab = slab;
	CUresult cr = c->api.MemCreate(&r->handle, (size_t)bytes, &prop, 0);
	if (cr != CUDA_SUCCESS) {
		free(r);
		return vy_cuda_fail(c, cr, "cuMemCreate", e);
	}
	return vy_cuda_vmm_map(c, r, out, e);
}

/* Keeping (core/device_keep.h; cuda_keep.c has the sub-table): a new
 * allocation's fd to the sink, a freed one's slot dropped. */

void vy_cuda_rec_free(vmm_rec *r)
{
	if (r && r->imported)
		close(r->fd);
	free(r);
}

/* A new fd for r's memory, or -1. */
int vy_cuda_export(cuda_device *c, const vmm_rec *r)
{
	if (r->imported)
		return fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
	int fd = -1;
	CUresult cr = c->api.MemExportToShareableHandle(&fd, r->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	return cr == CUDA_SUCCESS ? fd : -1;
}

/* Hand r (at p) to the sink: its slot, 0 when not kept. vmm_lock held. */
vy_keep_slot vy_cuda_keep_add(cuda_device *c, const vmm_rec *r, vy_dptr p)
{
	int fd = vy_cuda_export(c, r);
	if (fd < 0)
		return 0; /* the layout says this memory is not kept */
	vy_keep_slot slot = c->sink->add(c->sink->ctx, fd);
	close(fd); /* the keeper holds its own copy */
	if (slot && !vy_u64map_put(&c->by_slot, slot, (void *)(uintptr_t)p)) {
		c->sink->drop(c->sink->ctx, slot);
		slot = 0;
	}
	return slot;
}

vy_keep_slot vy_cuda_keep_made(cuda_device *c, vy_dptr p)
{
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = c->sink ? vy_u64map_get(&c->vmm, p) : NULL;
	if (r && !r->slot)
		r->slot = vy_cuda_keep_add(c, r, p);
	vy_keep_slot slot = r ? r->slot : 0;
	pthread_mutex_unlock(&c->vmm_lock);
	return slot;
}

void vy_cuda_keep_freed(cuda_device *c, vmm_rec *r)
{
	if (!r->slot)
		return;
	vy_u64map_remove(&c->by_slot, r->slot);
	if (c->sink)
		c->sink->drop(c->sink->ctx, r->slot);
	r->slot = 0;
}

vy_err vy_cuda_vmm_free(cuda_device *c, vy_dptr p, bool slab, bool *was, vy_error *e)
{
	*was = false;
	CU_CURRENT(c, e);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	*was = r && r->slab == slab;
	if (*was) {
		vy_u64map_remove(&c->vmm, p);
		vy_cuda_keep_freed(c, r);
	}
	pthread_mutex_unlock(&c->vmm_lock);
	if (!*was)
		return VY_OK;
	vy_err rc = vmm_unmap(c, p, r, e);
	vy_cuda_rec_free(r);
	return rc;
}

static vy_err cuda_export_fd(vy_device *d, vy_dptr p, int *fd, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	if (r && r->slab)
		r = NULL; /* several files' memory: no process gets it */
	CUmemGenericAllocationHandle h = r ? r->handle : 0;
	bool imported = r && r->imported;
	int copy = imported ? vy_cuda_export(c, r) : -1, copy_err = errno;
	pthread_mutex_unlock(&c->vmm_lock);
	if (!r)
		return vy_fail(e, VY_EINVAL, "share only allocations of the share granularity or more",
			       "cuda backend: 0x%llx is not a shareable allocation", (unsigned long long)p);
	if (imported) { /* taken back from a dead daemon: the driver will not export it again */
		if (copy < 0)
			return vy_fail(e, copy_err == EMFILE || copy_err == ENFILE ? VY_EMFILE : VY_ENOMEM,
				       "raise the open-file limit", "cuda backend: cannot copy an allocation's fd: %s",
				       strerror(copy_err));
		*fd = copy;
		return VY_OK;
	}
	int out = -1;
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemExportToShareableHandle, (&out, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
	*fd = out;
	return VY_OK;
}

static vy_err cuda_unmap(vy_device *d, vy_dptr at, uint64_t bytes, vy_error *e);

/* Take `p` of `bytes` out of `map` if it is recorded there with that size. */
static bool take_record(cuda_device *c, vy_u64map *map, vy_dptr p, uint64_t bytes)
{
	pthread_mutex_lock(&c->vmm_lock);
	void *v = vy_u64map_get(map, p);
	bool yes = v && (uint64_t)(uintptr_t)v == bytes;
	if (yes)
		vy_u64map_remove(map, p);
	pthread_mutex_unlock(&c->vmm_lock);
	return yes;
}

static bool put_record(cuda_device *c, vy_u64map *map, vy_dptr p, uint64_t bytes)
{
	pthread_mutex_lock(&c->vmm_lock);
	bool put = vy_u64map_put(map, p, (void *)(uintptr_t)bytes);
	pthread_mutex_unlock(&c->vmm_lock);
	return put;
}

static vy_err span_size_check(uint64_t bytes, vy_error *e)
{
	if (bytes == 0 || bytes > SIZE_MAX)
		return vy_fail(e, VY_EINVAL, "map a buffer with the size it was exported with",
			       "cuda backend: cannot map %llu bytes", (unsigned long long)bytes);
	return VY_OK;
}

static vy_err cuda_reserve(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	vy_err rc = span_size_check(bytes, e);
	if (rc != VY_OK)
		return rc;
	CU_CURRENT(c, e);
	CUdeviceptr p = 0;
	/* Aligned to the zero run, so long holes can use it. */
	size_t align = c->zrun_bytes && bytes >= c->zrun_bytes ? (size_t)c->zrun_bytes : 0;
	CU_CALL(c, e, MemAddressReserve, (&p, (size_t)bytes, align, 0, 0));
	if (!put_record(c, &c->reserved, (vy_dptr)p, bytes)) {
		c->api.MemAddressFree(p, (size_t)bytes);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a reservation");
	}
	*out = (vy_dptr)p;
	return VY_OK;
}

static vy_err cuda_unreserve(vy_device *d, vy_dptr p, uint64_t bytes, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	if (!take_record(c, &c->reserved, p, bytes))
		return vy_fail(e, VY_EINVAL, "release only what was reserved, once",
			       "cuda backend: 0x%llx is not a reservation of %llu bytes", (unsigned long long)p,
			       (unsigned long long)bytes);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemAddressFree, ((CUdeviceptr)p, (size_t)bytes));
	return VY_OK;
}

/* Map physical memory at `at` and make it readable and writable here; the
 * mapping holds the memory, so the caller releases its handle after. */
static vy_err map_handle(cuda_device *c, CUmemGenericAllocationHandle h, uint64_t bytes, vy_dptr at, vy_error *e)
{
	CUresult cr = c->api.MemMap((CUdeviceptr)at, (size_t)bytes, 0, h, 0);
	if (cr != CUDA_SUCCESS)
		return vy_cuda_fail(c, cr, "cuMemMap", e);
	CUmemAccessDesc access[VY_PEERS_MAX + 1];
	int n = access_list(c, access);
	cr = c->api.MemSetAccess((CUdeviceptr)at, (size_t)bytes, access, (size_t)n);
	if (cr == CUDA_SUCCESS && !put_record(c, &c->mapped, at, bytes)) {
		c->api.MemUnmap((CUdeviceptr)at, (size_t)bytes);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a mapping");
	}
	if (cr != CUDA_SUCCESS) {
		c->api.MemUnmap((CUdeviceptr)at, (size_t)bytes);
		return vy_cuda_fail(c, cr, "cuMemSetAccess", e);
	}
	return VY_OK;
}

static vy_err cuda_map_fd(vy_device *d, int fd, uint64_t bytes, vy_dptr at, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	vy_err rc = span_size_check(bytes, e);
	if (rc != VY_OK)
		return rc;
	CU_CURRENT(c, e);
	CUmemGenericAllocationHandle h;
	CU_CALL(c, e, MemImportFromShareableHandle,
		(&h, (void *)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
	rc = map_handle(c, h, bytes, at, e);
	CUresult cr = c->api.MemRelease(h);
	if (cr != CUDA_SUCCESS && rc == VY_OK) {
		cuda_unmap(d, at, bytes, NULL);
		rc = vy_cuda_fail(c, cr, "cuMemRelease", e);
	}
	return rc;
}

static vy_err cuda_map_own(vy_device *d, vy_dptr p, uint64_t bytes, vy_dptr at, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	bool ok = r && r->bytes == bytes && !r->slab;
	CUmemGenericAllocationHandle h = ok ? r->handle : 0;
	pthread_mutex_unlock(&c->vmm_lock);
	if (!ok)
		return vy_fail(e, VY_EINVAL, "map only whole shareable allocations",
			       "cuda backend: 0x%llx is not a shareable allocation of %llu bytes", (unsigned long long)p,
			       (unsigned long long)bytes);
	CU_CURRENT(c, e);
	/* Our handle stays ours (cuda_free releases it); the mapping keeps
	 * the memory until it is unmapped. */
	return map_handle(c, h, bytes, at, e);
}

static vy_err cuda_unmap(vy_device *d, vy_dptr at, uint64_t bytes, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	if (!take_record(c, &c->mapped, at, bytes))
		return vy_fail(e, VY_EINVAL, "unmap only what was mapped, once",
			       "cuda backend: 0x%llx is not a mapping of %llu bytes", (unsigned long long)at,
			       (unsigned long long)bytes);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemUnmap, ((CUdeviceptr)at, (size_t)bytes));
	return VY_OK;
}

/* The zero run is an ordinary shareable allocation, zeroed once and mapped
 * where runs of holes are; counted so it goes with its last mapping. */
static void zrun_put(cuda_device *c)
{
	pthread_mutex_lock(&c->vmm_lock);
	vy_dptr p = --c->zrun_maps == 0 ? c->zrun : 0;
	if (p)
		c->zrun = 0;
	pthread_mutex_unlock(&c->vmm_lock);
	bool was;
	if (p)
		vy_cuda_vmm_free(c, p, false, &was, NULL);
}

/* The zero run with one more mapping counted, made at the first. */
static vy_err zrun_get(cuda_device *c, vy_dptr *out, vy_error *e)
{
	pthread_mutex_lock(&c->vmm_lock);
	vy_dptr p = c->zrun;
	c->zrun_maps += p != 0;
	pthread_mutex_unlock(&c->vmm_lock);
	if (p) {
		*out = p;
		return VY_OK;
	}
	vy_err rc = vy_cuda_vmm_alloc(c, c->zrun_bytes, false, &p, e);
	bool was;
	if (rc != VY_OK)
		return rc;
	CUresult cr = c->api.MemsetD8Async((CUdeviceptr)p, 0, (size_t)c->zrun_bytes, NULL);
	if (cr == CUDA_SUCCESS)
		cr = c->api.CtxSynchronize();
	if (cr != CUDA_SUCCESS) {
		vy_cuda_vmm_free(c, p, false, &was, NULL);
		return vy_cuda_fail(c, cr, "zeroing the zero run", e);
	}
	pthread_mutex_lock(&c->vmm_lock);
	vy_dptr won = c->zrun; /* another thread made one meanwhile: use it */
	if (!won)
		c->zrun = p;
	c->zrun_maps++;
	*out = c->zrun;
	pthread_mutex_unlock(&c->vmm_lock);
	if (won)
		vy_cuda_vmm_free(c, p, false, &was, NULL);
	return VY_OK;
}

/* One more mapping of the zero run at `at` (a multiple of its size). */
static vy_err zrun_map(cuda_device *c, vy_dptr at, vy_error *e)
{
	vy_dptr z = 0;
	vy_err rc = zrun_get(c, &z, e);
	if (rc == VY_OK)
		rc = cuda_map_own(&c->base, z, c->zrun_bytes, at, e);
	pthread_mutex_lock(&c->vmm_lock);
	if (rc == VY_OK && !vy_u64map_put(&c->zruns, at, (void *)(uintptr_t)1)) {
		pthread_mutex_unlock(&c->vmm_lock);
		cuda_unmap(&c->base, at, c->zrun_bytes, NULL);
		pthread_mutex_lock(&c->vmm_lock);
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a mapping");
	}
	pthread_mutex_unlock(&c->vmm_lock);
	if (rc != VY_OK && z)
		zrun_put(c);
	return rc;
}

/* Take back the zero run mapped at `at`, if it is there. */
static bool zrun_unmap(cuda_device *c, vy_dptr at, vy_error *e, vy_err *rc)
{
	pthread_mutex_lock(&c->vmm_lock);
	bool was = vy_u64map_remove(&c->zruns, at) != NULL;
	pthread_mutex_unlock(&c->vmm_lock);
	if (!was)
		return false;
	*rc = cuda_unmap(&c->base, at, c->zrun_bytes, e);
	zrun_put(c);
	return true;
}

static vy_err cuda_unmap_zeros(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e);

/* A hole run: the zero run at each of its aligned places the run covers
 * whole, the granule of zeros at every other granule (a mapping cannot
 * repeat a smaller allocation across a larger range). */
static vy_err cuda_map_zeros(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	uint64_t g = d->info.share_granularity, z = c->zrun_bytes, x = 0;
	CU_CURRENT(c, e);
	vy_err rc = VY_OK;
	while (rc == VY_OK && x < bytes) {
		bool run = z && (at + x) % z == 0 && bytes - x >= z;
		rc = run ? zrun_map(c, at + x, e) : cuda_map_own(d, zero, g, at + x, e);
		if (rc == VY_OK)
			x += run ? z : g;
	}
	if (rc != VY_OK && x)
		cuda_unmap_zeros(d, zero, at, x, NULL);
	return rc;
}

/* Back to bare address space. A zero run only partly inside goes whole
 * (cuMemUnmap takes whole mappings), and granules of zeros take the
 * place of its part outside. */
static vy_err cuda_unmap_zeros(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	uint64_t g = d->info.share_granularity, z = c->zrun_bytes, end = at + bytes;
	vy_err first = VY_OK;
	for (vy_dptr x = at; x < end;) {
		vy_err rc = VY_OK;
		vy_dptr base = z ? x / z * z : x;
		if (z && zrun_unmap(c, base, first == VY_OK ? e : NULL, &rc)) {
			uint64_t past = base + z;
			if (rc == VY_OK && base < at)
				rc = cuda_map_zeros(d, zero, base, at - base, first == VY_OK ? e : NULL);
			if (rc == VY_OK && end < past)
				rc = cuda_map_zeros(d, zero, end, past - end, first == VY_OK ? e : NULL);
			x = past;
		} else {
			rc = cuda_unmap(d, x, g, first == VY_OK ? e : NULL);
			x += g;
		}
		if (first == VY_OK)
			first = rc;
	}
	return first;
}

const vy_device_share_ops vy_cuda_share = {
	.export_fd = cuda_export_fd,
	.reserve = cuda_reserve,
	.unreserve = cuda_unreserve,
	.map_fd = cuda_map_fd,
	.map_own = cuda_map_own,
	.unmap = cuda_unmap,
	.map_zeros = cuda_map_zeros,
	.unmap_zeros = cuda_unmap_zeros,
};

#endif
