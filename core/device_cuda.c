/* The cuda backend: the device table over the CUDA Driver API.
 *
 * libcuda.so.1 is loaded with dlopen and every entry point is resolved with
 * cuGetProcAddress, typed by the official <cudaTypedefs.h>, so the binary has
 * no link-time dependency on the driver and starts on machines without a GPU
 * (vy_device_cuda_open then reports VY_ENODEV). Work runs in the primary
 * context of device `ordinal`, on non-blocking streams only.
 *
 * Allocations of the VMM granularity (2 MiB on an H100) or more are VMM
 * allocations (cuMemCreate with a POSIX fd handle, reserved, mapped and made
 * accessible) when the device can share them, so the launcher and clients can
 * map exactly that buffer. Smaller ones come from cuMemAlloc, whose blocks
 * the driver may share between allocations: those are never exported. */
#include "core/device.h"

#ifndef VY_HAVE_CUDA_H

vy_err vy_device_cuda_open(int ordinal, vy_device **out, vy_error *e)
{
	(void)ordinal;
	(void)out;
	return vy_fail(e, VY_ENODEV, "install the CUDA toolkit headers (cuda.h under CUDA_HOME) and rebuild, or use -o backend=host",
		       "this vyrefs was built without the CUDA backend");
}

vy_err vy_device_cuda_count(int *count, vy_error *e)
{
	*count = 0;
	return vy_device_cuda_open(0, NULL, e);
}

#else
#include "core/cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void cuda_close(vy_device *d)
{
	cuda_device *c = cuda_of(d);
	/* VMM memory outlives contexts: give back what the layers above left,
	 * spans first (their mappings hold physical memory too). */
	uint64_t key;
	void *value;
	size_t cursor = 0;
	if (c->vmm_lock_made)
		vy_cuda_slabs_destroy(c); /* their granules freed (and dropped) here */
	while (vy_u64map_next(&c->mapped, &cursor, &key, &value))
		c->api.MemUnmap((CUdeviceptr)key, (size_t)(uintptr_t)value);
	cursor = 0;
	while (vy_u64map_next(&c->reserved, &cursor, &key, &value))
		c->api.MemAddressFree((CUdeviceptr)key, (size_t)(uintptr_t)value);
	cursor = 0;
	while (vy_u64map_next(&c->vmm, &cursor, &key, &value)) {
		vmm_rec *r = value;
		c->api.MemUnmap((CUdeviceptr)key, (size_t)r->bytes);
		c->api.MemAddressFree((CUdeviceptr)key, (size_t)r->bytes);
		c->api.MemRelease(r->handle);
		vy_cuda_rec_free(r);
	}
	vy_u64map_destroy(&c->vmm);
	vy_u64map_destroy(&c->reserved);
	vy_u64map_destroy(&c->mapped);
	vy_u64map_destroy(&c->zruns); /* the zero run itself is in vmm, freed above */
	vy_u64map_destroy(&c->by_slot);
	if (c->vmm_lock_made) {
		pthread_mutex_destroy(&c->vmm_lock);
		pthread_mutex_destroy(&c->slab_lock);
	}
	if (c->ctx)
		c->api.PrimaryCtxRelease(c->dev);
	/* libcuda stays loaded: unloading a driver library whose threads may
	 * still run is unsafe, and dlopen of it again is just a reference. */
	free(c);
}

static vy_err cuda_mem_info(vy_device *d, uint64_t *free_bytes, uint64_t *total_bytes, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	size_t f = 0, t = 0;
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemGetInfo, (&f, &t));
	/* Empty slabs kept for reuse (cuda_alloc.c) are ours to give: free,
	 * as the pool's idle bytes are, and as a successor, which makes none
	 * of them again, finds them. */
	*free_bytes = f + vy_cuda_slabs_idle(c);
	*total_bytes = t;
	return VY_OK;
}

static vy_err cuda_host_alloc(vy_device *d, size_t bytes, void **out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemHostAlloc, (out, bytes, CU_MEMHOSTALLOC_PORTABLE));
	return VY_OK;
}

static vy_err cuda_host_free(vy_device *d, void *p, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemFreeHost, (p));
	return VY_OK;
}

static vy_err cuda_host_register(vy_device *d, void *p, size_t bytes, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemHostRegister, (p, bytes, CU_MEMHOSTREGISTER_PORTABLE));
	return VY_OK;
}

static vy_err cuda_host_unregister(vy_device *d, void *p, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemHostUnregister, (p));
	return VY_OK;
}

static vy_err cuda_stream_create(vy_device *d, vy_stream **out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CUstream s = NULL;
	CU_CURRENT(c, e);
	CU_CALL(c, e, StreamCreate, (&s, CU_STREAM_NON_BLOCKING));
	*out = (vy_stream *)s;
	return VY_OK;
}

static vy_err cuda_stream_destroy(vy_device *d, vy_stream *s, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, StreamDestroy, ((CUstream)s));
	return VY_OK;
}

static vy_err cuda_stream_sync(vy_device *d, vy_stream *s, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, StreamSynchronize, ((CUstream)s));
	return VY_OK;
}

static vy_err cuda_synchronize(vy_device *d, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, CtxSynchronize, ());
	return VY_OK;
}

static vy_err cuda_copy_htod(vy_device *d, vy_stream *s, vy_dptr dst, const void *src, uint64_t n, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemcpyHtoDAsync, ((CUdeviceptr)dst, src, (size_t)n, (CUstream)s));
	return VY_OK;
}

static vy_err cuda_copy_dtoh(vy_device *d, vy_stream *s, void *dst, vy_dptr src, uint64_t n, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemcpyDtoHAsync, (dst, (CUdeviceptr)src, (size_t)n, (CUstream)s));
	return VY_OK;
}

static vy_err cuda_copy_dtod(vy_device *d, vy_stream *s, vy_dptr dst, vy_dptr src, uint64_t n, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemcpyDtoDAsync, ((CUdeviceptr)dst, (CUdeviceptr)src, (size_t)n, (CUstream)s));
	return VY_OK;
}

/* Peer access from d to other's memory: other's mappings grant d access
 * from now on, and d's context reaches other's cuMemAlloc memory. */
static vy_err cuda_peer_enable(vy_device *d, vy_device *other, bool *on, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	*on = false;
	if (other->ops != d->ops || other == d)
		return VY_OK;
	cuda_device *o = cuda_of(other);
	int can = 0;
	CU_CALL(c, e, DeviceCanAccessPeer, (&can, c->dev, o->dev));
	if (!can)
		return VY_OK;
	if (o->npeers == VY_PEERS_MAX)
		return vy_fail(e, VY_EINVAL, "mount at most 16 devices", "cuda backend: too many peers of device %d",
			       o->base.info.ordinal);
	CU_CURRENT(c, e);
	CUresult cr = c->api.CtxEnablePeerAccess(o->ctx, 0);
	if (cr == CUDA_ERROR_TOO_MANY_PEERS)
		return VY_OK; /* past the driver's peers a device may have: copies are staged */
	if (cr != CUDA_SUCCESS && cr != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
		return vy_cuda_fail(c, cr, "cuCtxEnablePeerAccess", e);
	o->peers[o->npeers++] = c->base.info.ordinal;
	*on = true;
	return VY_OK;
}

static vy_err cuda_copy_peer(vy_device *d, vy_stream *s, vy_dptr dst, vy_device *from, vy_dptr src, uint64_t n,
			     vy_error *e)
{
	cuda_device *c = cuda_of(d);
	if (from->ops != d->ops)
		return vy_fail(e, VY_EINVAL, "report this bug", "cuda backend: a peer copy from another backend");
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemcpyPeerAsync,
		((CUdeviceptr)dst, c->ctx, (CUdeviceptr)src, cuda_of(from)->ctx, (size_t)n, (CUstream)s));
	return VY_OK;
}

static vy_err cuda_memset8(vy_device *d, vy_stream *s, vy_dptr dst, uint8_t value, uint64_t n, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, MemsetD8Async, ((CUdeviceptr)dst, value, (size_t)n, (CUstream)s));
	return VY_OK;
}

static vy_err cuda_event_create(vy_device *d, vy_event **out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CUevent ev = NULL;
	CU_CURRENT(c, e);
	CU_CALL(c, e, EventCreate, (&ev, CU_EVENT_DEFAULT));
	*out = (vy_event *)ev;
	return VY_OK;
}

static vy_err cuda_event_destroy(vy_device *d, vy_event *ev, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, EventDestroy, ((CUevent)ev));
	return VY_OK;
}

static vy_err cuda_event_record(vy_device *d, vy_event *ev, vy_stream *s, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, EventRecord, ((CUevent)ev, (CUstream)s));
	return VY_OK;
}

static vy_err cuda_event_sync(vy_device *d, vy_event *ev, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, EventSynchronize, ((CUevent)ev));
	return VY_OK;
}

static vy_err cuda_event_elapsed_us(vy_device *d, vy_event *start, vy_event *end, double *us, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	float ms = 0;
	CU_CURRENT(c, e);
	CU_CALL(c, e, EventElapsedTime, (&ms, (CUevent)start, (CUevent)end));
	*us = (double)ms * 1000.0;
	return VY_OK;
}

static vy_err cuda_module_load(vy_device *d, const void *image, size_t len, vy_module **out, char *log,
			       size_t log_cap, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	/* PTX is text the driver reads up to its NUL; binaries carry their
	 * own length. A copy with a NUL after it serves both. */
	char *copy = malloc(len + 1);
	if (!copy)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot copy a %zu-byte module", len);
	memcpy(copy, image, len);
	copy[len] = '\0';
	enum { HALF = 8192 };
	static _Thread_local char info[HALF], error[HALF];
	info[0] = error[0] = '\0';
	CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
			       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE};
	void *vals[] = {info, (void *)(uintptr_t)HALF, error, (void *)(uintptr_t)HALF, (void *)(uintptr_t)1};
	CUmodule m = NULL;
	CUresult rc = c->api.ModuleLoadDataEx(&m, copy, 5, opts, vals);
	free(copy);
	if (log && log_cap)
		snprintf(log, log_cap, "%s%s%s", error, error[0] && info[0] ? "\n" : "", info);
	if (rc != CUDA_SUCCESS) {
		vy_error why;
		vy_cuda_fail(c, rc, "cuModuleLoadDataEx", &why);
		return vy_fail(e, VY_EINVAL, "fix the module (its JIT log says where), or build it for this GPU",
			       "the module does not load: %s%s%.200s", why.msg, error[0] ? ": " : "", error);
	}
	*out = (vy_module *)m;
	return VY_OK;
}

static vy_err cuda_module_unload(vy_device *d, vy_module *m, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, ModuleUnload, ((CUmodule)m));
	return VY_OK;
}

static vy_err cuda_function_get(vy_device *d, vy_module *m, const char *name, vy_function **out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CUfunction f = NULL;
	CUresult rc = c->api.ModuleGetFunction(&f, (CUmodule)m, name);
	if (rc == CUDA_ERROR_NOT_FOUND)
		return vy_fail(e, VY_ENOENT, "name an entry the module defines (.entry in PTX, extern \"C\" __global__ in CUDA C)",
			       "the module has no kernel '%s'", name);
	if (rc != CUDA_SUCCESS)
		return vy_cuda_fail(c, rc, "cuModuleGetFunction", e);
	*out = (vy_function *)f;
	return VY_OK;
}

static vy_err cuda_function_info(vy_device *d, vy_function *f, vy_function_info *out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	memset(out, 0, sizeof(*out));
	/* The driver answers CUDA_ERROR_INVALID_VALUE past the last one. */
	for (size_t i = 0;; i++) {
		size_t offset = 0, size = 0;
		CUresult rc = c->api.FuncGetParamInfo((CUfunction)f, i, &offset, &size);
		if (rc == CUDA_ERROR_INVALID_VALUE)
			break;
		if (rc != CUDA_SUCCESS)
			return vy_cuda_fail(c, rc, "cuFuncGetParamInfo", e);
		if (i == VY_PARAMS_MAX)
			return vy_fail(e, VY_ENOTSUP, "use a kernel with at most 256 parameters",
				       "the kernel has more than %d parameters", VY_PARAMS_MAX);
		out->param_size[i] = size;
		out->nparams = i + 1;
	}
	CU_CALL(c, e, FuncGetAttribute, (&out->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, (CUfunction)f));
	CU_CALL(c, e, FuncGetAttribute, (&out->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, (CUfunction)f));
	CU_CALL(c, e, FuncGetAttribute,
		(&out->max_dynamic_shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (CUfunction)f));
	/* For launches that give n=COUNT rather than grid and block. */
	CU_CALL(c, e, OccupancyMaxPotentialBlockSize, (&out->occ_grid, &out->occ_block, (CUfunction)f, NULL, 0, 0));
	return VY_OK;
}

static vy_err cuda_launch(vy_device *d, vy_stream *s, vy_function *f, const unsigned grid[3], const unsigned block[3],
			  unsigned shared, void **args, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	CU_CALL(c, e, LaunchKernel,
		((CUfunction)f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, (CUstream)s, args, NULL));
	return VY_OK;
}

static const vy_device_ops cuda_ops = {
	.close = cuda_close,
	.mem_info = cuda_mem_info,
	.alloc = vy_cuda_alloc,
	.free = vy_cuda_free,
	.host_alloc = cuda_host_alloc,
	.host_register = cuda_host_register,
	.host_unregister = cuda_host_unregister,
	.host_free = cuda_host_free,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.stream_sync = cuda_stream_sync,
	.synchronize = cuda_synchronize,
	.copy_htod = cuda_copy_htod,
	.copy_dtoh = cuda_copy_dtoh,
	.copy_dtod = cuda_copy_dtod,
	.copy_peer = cuda_copy_peer,
	.peer_enable = cuda_peer_enable,
	.memset8 = cuda_memset8,
	.event_create = cuda_event_create,
	.event_destroy = cuda_event_destroy,
	.event_record = cuda_event_record,
	.event_sync = cuda_event_sync,
	.event_elapsed_us = cuda_event_elapsed_us,
	.module_load = cuda_module_load,
	.module_unload = cuda_module_unload,
	.function_get = cuda_function_get,
	.function_info = cuda_function_info,
	.launch = cuda_launch,
};


/* Load the driver and resolve every entry point for the driver's version. */
static vy_err cuda_load(cuda_api *api, int *driver_version, vy_error *e)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib)
		return vy_fail(e, VY_ENODEV, VY_FIX_DRIVER, "no CUDA driver: %s", dlerror());
	PFN_cuGetProcAddress_v12000 get_proc = (PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
	PFN_cuDriverGetVersion_v2020 get_version = (PFN_cuDriverGetVersion_v2020)dlsym(lib, "cuDriverGetVersion");
	if (!get_proc || !get_version) {
		dlclose(lib); /* nothing of it ran yet, so it may go */
		return vy_fail(e, VY_ENODEV, "install an NVIDIA driver for CUDA 12.0 or newer, or use -o backend=host",
			       "the CUDA driver is too old: libcuda.so.1 has no cuGetProcAddress_v2");
	}
	int driver = 0;
	if (get_version(&driver) != CUDA_SUCCESS)
		return vy_fail(e, VY_ENODEV, VY_FIX_DRIVER, "cuDriverGetVersion failed");
	*driver_version = driver;
	int version = driver < CUDA_VERSION ? driver : CUDA_VERSION;
	CUdriverProcAddressQueryResult found;
	void *fn;
#define CUDA_RESOLVE(field, symbol, type)                                                     \
	fn = NULL;                                                                            \
	if (get_proc(symbol, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || \
	    found != CU_GET_PROC_ADDRESS_SUCCESS || !fn)                                      \
		return vy_fail(e, VY_ENODEV, "install a newer NVIDIA driver, or use -o backend=host", \
			       "the CUDA driver (version %d) lacks %s", driver, symbol);      \
	api->field = (type)fn;
	CUDA_ENTRY_POINTS(CUDA_RESOLVE)
	version = version < 12000 ? version : 12000;
	CUDA_RESOLVE(CtxSynchronize, "cuCtxSynchronize", PFN_cuCtxSynchronize_v2000)
#undef CUDA_RESOLVE
	return VY_OK;
}

static vy_err cuda_fill_info(cuda_device *c, int ordinal, vy_error *e)
{
	vy_device_info *i = &c->base.info;
	i->backend = "cuda";
	i->ordinal = ordinal;
	CU_CALL(c, e, DeviceGetName, (i->name, (int)sizeof(i->name), c->dev));
	size_t total = 0;
	CU_CALL(c, e, DeviceTotalMem, (&total, c->dev));
	i->total_bytes = total;
	struct {
		int *out;
		CUdevice_attribute attr;
	} attrs[] = {
		{&i->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
		{&i->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
		{&i->multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
		{&i->max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
		{&i->max_block[0], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X},
		{&i->max_block[1], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y},
		{&i->max_block[2], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z},
		{&i->max_grid[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X},
		{&i->max_grid[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y},
		{&i->max_grid[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z},
		{&i->max_shared_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK},
	};
	for (size_t k = 0; k < sizeof(attrs) / sizeof(attrs[0]); k++)
		CU_CALL(c, e, DeviceGetAttribute, (attrs[k].out, attrs[k].attr, c->dev));
	/* Sharing needs VMM with POSIX fd handles (VY_NO_SHARE=1 turns it off,
	 * to compare with plain cuMemAlloc). */
	int vmm = 0, posix_fd = 0;
	CU_CALL(c, e, DeviceGetAttribute, (&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, c->dev));
	CU_CALL(c, e, DeviceGetAttribute, (&posix_fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, c->dev));
	const char *off = getenv("VY_NO_SHARE");
	if (vmm && posix_fd && !(off && !strcmp(off, "1"))) {
		CUmemAllocationProp prop = {0};
		prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
		prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		prop.location.id = ordinal;
		prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
		size_t g = 0;
		CU_CALL(c, e, MemGetAllocationGranularity, (&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
		i->share_granularity = g;
		c->base.share = &vy_cuda_share;
		c->base.keep = &vy_cuda_keep;
		/* The zero run: a power of two of granules near 1/1024 of the
		 * device's memory, at most 64 MiB (its cost while holes are). */
		for (c->zrun_bytes = g; c->zrun_bytes < ((uint64_t)64 << 20) && c->zrun_bytes * 2 <= i->total_bytes / 1024;)
			c->zrun_bytes *= 2;
		if (c->zrun_bytes == g)
			c->zrun_bytes = 0;
	}
	return VY_OK;
}

vy_err vy_device_cuda_open(int ordinal, vy_device **out, vy_error *e)
{
	cuda_device *c = calloc(1, sizeof(*c));
	if (!c)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot allocate its state");
	vy_u64map_init(&c->vmm);
	vy_u64map_init(&c->reserved);
	vy_u64map_init(&c->mapped);
	vy_u64map_init(&c->zruns);
	vy_u64map_init(&c->by_slot);
	if (pthread_mutex_init(&c->vmm_lock, NULL) != 0) {
		free(c);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot create a mutex");
	}
	if (pthread_mutex_init(&c->slab_lock, NULL) != 0) {
		pthread_mutex_destroy(&c->vmm_lock);
		free(c);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot create a mutex");
	}
	c->vmm_lock_made = true;
	vy_err rc = cuda_load(&c->api, &c->base.info.driver_version, e);
	if (rc != VY_OK)
		goto fail;
	CUresult cr = c->api.Init(0);
	if (cr != CUDA_SUCCESS) {
		vy_error why;
		vy_cuda_fail(c, cr, "cuInit", &why);
		rc = vy_fail(e, VY_ENODEV, "check `nvidia-smi`; without a GPU use -o backend=host",
			     "no usable CUDA device: %s", why.msg);
		goto fail;
	}
	int count = 0;
	cr = c->api.DeviceGetCount(&count);
	if (cr != CUDA_SUCCESS || count == 0) {
		rc = vy_fail(e, VY_ENODEV, "check `nvidia-smi`; without a GPU use -o backend=host",
			     "the CUDA driver sees no device");
		goto fail;
	}
	if (ordinal < 0 || ordinal >= count) {
		rc = vy_fail(e, VY_EINVAL, "choose an ordinal the driver lists (`nvidia-smi -L`)",
			     "ordinal %d is not a CUDA device: this machine has %d (0..%d)", ordinal, count, count - 1);
		goto fail;
	}
	cr = c->api.DeviceGet(&c->dev, ordinal);
	if (cr != CUDA_SUCCESS) {
		rc = vy_cuda_fail(c, cr, "cuDeviceGet", e);
		goto fail;
	}
	cr = c->api.PrimaryCtxRetain(&c->ctx, c->dev);
	if (cr != CUDA_SUCCESS) {
		c->ctx = NULL;
		rc = vy_cuda_fail(c, cr, "cuDevicePrimaryCtxRetain", e);
		goto fail;
	}
	c->generation = vy_cuda_next_generation();
	c->base.ops = &cuda_ops;
	rc = vy_cuda_current(c, e);
	if (rc == VY_OK)
		rc = cuda_fill_info(c, ordinal, e);
	if (rc != VY_OK)
		goto fail;
	*out = &c->base;
	return VY_OK;
fail:
	if (c->ctx)
		c->api.PrimaryCtxRelease(c->dev);
	vy_u64map_destroy(&c->vmm);
	vy_u64map_destroy(&c->reserved);
	vy_u64map_destroy(&c->mapped);
	vy_u64map_destroy(&c->zruns);
	vy_u64map_destroy(&c->by_slot);
	pthread_mutex_destroy(&c->vmm_lock);
	pthread_mutex_destroy(&c->slab_lock);
	free(c);
	return rc;
}

vy_err vy_device_cuda_count(int *count, vy_error *e)
{
	cuda_api api;
	int driver = 0;
	*count = 0;
	vy_err rc = cuda_load(&api, &driver, e);
	if (rc != VY_OK)
		return rc;
	if (api.Init(0) != CUDA_SUCCESS || api.DeviceGetCount(count) != CUDA_SUCCESS || *count == 0)
		return vy_fail(e, VY_ENODEV, "check `nvidia-smi`; without a GPU use -o backend=host",
			       "the CUDA driver sees no device");
	return VY_OK;
}

#endif
