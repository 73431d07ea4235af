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

#include "core/u64map.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VY_FIX_DRIVER "install the NVIDIA driver (libcuda.so.1), or use -o backend=host"

/* One field per entry point; X(field, symbol, pfn type). */
#define CUDA_ENTRY_POINTS(X)                                                   \
	X(Init, "cuInit", PFN_cuInit_v2000)                                     \
	X(GetErrorName, "cuGetErrorName", PFN_cuGetErrorName_v6000)             \
	X(GetErrorString, "cuGetErrorString", PFN_cuGetErrorString_v6000)       \
	X(DeviceGetCount, "cuDeviceGetCount", PFN_cuDeviceGetCount_v2000)       \
	X(DeviceGet, "cuDeviceGet", PFN_cuDeviceGet_v2000)                      \
	X(DeviceGetName, "cuDeviceGetName", PFN_cuDeviceGetName_v2000)          \
	X(DeviceGetAttribute, "cuDeviceGetAttribute", PFN_cuDeviceGetAttribute_v2000) \
	X(DeviceTotalMem, "cuDeviceTotalMem", PFN_cuDeviceTotalMem_v3020)       \
	X(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain", PFN_cuDevicePrimaryCtxRetain_v7000) \
	X(PrimaryCtxRelease, "cuDevicePrimaryCtxRelease", PFN_cuDevicePrimaryCtxRelease_v11000) \
	X(CtxSetCurrent, "cuCtxSetCurrent", PFN_cuCtxSetCurrent_v4000)          \
	X(MemGetInfo, "cuMemGetInfo", PFN_cuMemGetInfo_v3020)                   \
	X(MemAlloc, "cuMemAlloc", PFN_cuMemAlloc_v3020)                         \
	X(MemFree, "cuMemFree", PFN_cuMemFree_v3020)                            \
	X(MemHostAlloc, "cuMemHostAlloc", PFN_cuMemHostAlloc_v2020)             \
	X(MemFreeHost, "cuMemFreeHost", PFN_cuMemFreeHost_v2000)                \
	X(StreamCreate, "cuStreamCreate", PFN_cuStreamCreate_v2000)             \
	X(StreamDestroy, "cuStreamDestroy", PFN_cuStreamDestroy_v4000)          \
	X(StreamSynchronize, "cuStreamSynchronize", PFN_cuStreamSynchronize_v2000) \
	X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", PFN_cuMemcpyHtoDAsync_v3020)    \
	X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", PFN_cuMemcpyDtoHAsync_v3020)    \
	X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync", PFN_cuMemcpyDtoDAsync_v3020)    \
	X(MemsetD8Async, "cuMemsetD8Async", PFN_cuMemsetD8Async_v3020)          \
	X(EventCreate, "cuEventCreate", PFN_cuEventCreate_v2000)                \
	X(EventDestroy, "cuEventDestroy", PFN_cuEventDestroy_v4000)             \
	X(EventRecord, "cuEventRecord", PFN_cuEventRecord_v2000)                \
	X(EventSynchronize, "cuEventSynchronize", PFN_cuEventSynchronize_v2000) \
	X(EventElapsedTime, "cuEventElapsedTime", PFN_cuEventElapsedTime_v2000) \
	X(ModuleLoadDataEx, "cuModuleLoadDataEx", PFN_cuModuleLoadDataEx_v2010)  \
	X(ModuleUnload, "cuModuleUnload", PFN_cuModuleUnload_v2000)             \
	X(ModuleGetFunction, "cuModuleGetFunction", PFN_cuModuleGetFunction_v2000) \
	X(FuncGetParamInfo, "cuFuncGetParamInfo", PFN_cuFuncGetParamInfo_v12040) \
	X(FuncGetAttribute, "cuFuncGetAttribute", PFN_cuFuncGetAttribute_v2020) \
	X(LaunchKernel, "cuLaunchKernel", PFN_cuLaunchKernel_v4000)             \
	X(OccupancyMaxPotentialBlockSize, "cuOccupancyMaxPotentialBlockSize", PFN_cuOccupancyMaxPotentialBlockSize_v6050) \
	X(MemCreate, "cuMemCreate", PFN_cuMemCreate_v10020)                     \
	X(MemRelease, "cuMemRelease", PFN_cuMemRelease_v10020)                  \
	X(MemAddressReserve, "cuMemAddressReserve", PFN_cuMemAddressReserve_v10020) \
	X(MemAddressFree, "cuMemAddressFree", PFN_cuMemAddressFree_v10020)      \
	X(MemMap, "cuMemMap", PFN_cuMemMap_v10020)                              \
	X(MemUnmap, "cuMemUnmap", PFN_cuMemUnmap_v10020)                        \
	X(MemSetAccess, "cuMemSetAccess", PFN_cuMemSetAccess_v10020)            \
	X(MemGetAllocationGranularity, "cuMemGetAllocationGranularity", PFN_cuMemGetAllocationGranularity_v10020) \
	X(MemExportToShareableHandle, "cuMemExportToShareableHandle", PFN_cuMemExportToShareableHandle_v10020) \
	X(MemImportFromShareableHandle, "cuMemImportFromShareableHandle", PFN_cuMemImportFromShareableHandle_v10020) \
	X(DeviceCanAccessPeer, "cuDeviceCanAccessPeer", PFN_cuDeviceCanAccessPeer_v4000) \
	X(CtxEnablePeerAccess, "cuCtxEnablePeerAccess", PFN_cuCtxEnablePeerAccess_v4000) \
	X(MemcpyPeerAsync, "cuMemcpyPeerAsync", PFN_cuMemcpyPeerAsync_v4000)

typedef struct cuda_api {
#define CUDA_FIELD(field, symbol, type) type field;
	CUDA_ENTRY_POINTS(CUDA_FIELD)
#undef CUDA_FIELD
	/* CUDA 13 gave cuCtxSynchronize a context argument: ask for the
	 * CUDA 12 form by version. */
	PFN_cuCtxSynchronize_v2000 CtxSynchronize;
} cuda_api;

typedef struct cuda_device {
	vy_device base;
	cuda_api api;
	CUdevice dev;
	CUcontext ctx;
	uint64_t generation; /* tells threads whose current context is stale */
	pthread_mutex_t vmm_lock;
	bool vmm_lock_made;
	vy_u64map vmm;      /* pointer -> vmm_rec: our VMM allocations */
	vy_u64map reserved; /* pointer -> its bytes: spans' address ranges */
	vy_u64map mapped;   /* pointer -> its bytes: what map_fd/map_own put there */
	/* Devices of this process that reach our memory directly (peer
	 * access, cuda_peer_enable): every mapping grants them access too.
	 * Set before any allocation, read without the lock after. */
	int peers[VY_PEERS_MAX];
	int npeers;
} cuda_device;

/* What may read and write a mapping: this device and its peers. */
static int access_list(const cuda_device *c, CUmemAccessDesc *out)
{
	int n = 0;
	for (int i = -1; i < c->npeers; i++) {
		memset(&out[n], 0, sizeof(out[n]));
		out[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
		out[n].location.id = i < 0 ? c->base.info.ordinal : c->peers[i];
		out[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
		n++;
	}
	return n;
}

/* A VMM allocation or import: its physical handle and mapped size. */
typedef struct vmm_rec {
	CUmemGenericAllocationHandle handle;
	uint64_t bytes;
} vmm_rec;

/* Each open gets a new generation; a thread sets the context current once
 * per generation instead of once per call. */
static _Atomic uint64_t cuda_generation;
static _Thread_local uint64_t cuda_thread_generation;

static cuda_device *cuda_of(vy_device *d)
{
	return (cuda_device *)d;
}

/* Fill `e` from a driver result, naming the call. Out-of-memory is ENOSPC so
 * that callers can tell "free something" from "the device failed". */
static vy_err cuda_fail(cuda_device *c, CUresult rc, const char *call, vy_error *e)
{
	const char *name = "CUDA_ERROR_UNKNOWN", *text = "unknown error";
	if (c->api.GetErrorName)
		c->api.GetErrorName(rc, &name);
	if (c->api.GetErrorString)
		c->api.GetErrorString(rc, &text);
	if (rc == CUDA_ERROR_OUT_OF_MEMORY)
		return vy_fail(e, VY_ENOSPC, "free device buffers (delete or truncate files) or lower resident_budget",
			       "%s: %s (%s)", call, name, text);
	if (rc == CUDA_ERROR_INVALID_VALUE)
		return vy_fail(e, VY_EINVAL, "report this bug with the command that caused it",
			       "%s: %s (%s)", call, name, text);
	return vy_fail(e, VY_EDEVICE, "check `nvidia-smi` and the kernel log; if the GPU is healthy, remount",
		       "%s: %s (%s)", call, name, text);
}

#define CU_CALL(c, e, call, args)                                  \
	do {                                                       \
		CUresult rc_ = (c)->api.call args;                 \
		if (rc_ != CUDA_SUCCESS)                           \
			return cuda_fail((c), rc_, "cu" #call, (e)); \
	} while (0)

static vy_err cuda_current(cuda_device *c, vy_error *e)
{
	if (cuda_thread_generation == c->generation)
		return VY_OK;
	CU_CALL(c, e, CtxSetCurrent, (c->ctx));
	cuda_thread_generation = c->generation;
	return VY_OK;
}

#define CU_CURRENT(c, e)                        \
	do {                                    \
		vy_err cur_ = cuda_current((c), (e)); \
		if (cur_ != VY_OK)              \
			return cur_;            \
	} while (0)

static void cuda_close(vy_device *d)
{
	cuda_device *c = cuda_of(d);
	/* VMM memory outlives contexts: give back what the layers above left,
	 * spans first (their mappings hold physical memory too). */
	uint64_t key;
	void *value;
	size_t cursor = 0;
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
		free(r);
	}
	vy_u64map_destroy(&c->vmm);
	vy_u64map_destroy(&c->reserved);
	vy_u64map_destroy(&c->mapped);
	if (c->vmm_lock_made)
		pthread_mutex_destroy(&c->vmm_lock);
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
	*free_bytes = f;
	*total_bytes = t;
	return VY_OK;
}

/* Reserve an address range for r's physical memory, map it and allow read
 * and write from this device; record it in `into`. On failure r's handle is
 * released and r freed. */
static vy_err vmm_map(cuda_device *c, vmm_rec *r, vy_dptr *out, vy_error *e)
{
	CUdeviceptr p = 0;
	const char *call = "cuMemAddressReserve";
	CUresult cr = c->api.MemAddressReserve(&p, (size_t)r->bytes, 0, 0, 0);
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
	vy_err rc = cr != CUDA_SUCCESS ? cuda_fail(c, cr, call, e)
				       : vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a mapping");
	if (mapped)
		c->api.MemUnmap(p, (size_t)r->bytes);
	if (reserved)
		c->api.MemAddressFree(p, (size_t)r->bytes);
	c->api.MemRelease(r->handle);
	free(r);
	return rc;
}

/* Undo vmm_map (the record is the caller's to free). */
static vy_err vmm_unmap(cuda_device *c, vy_dptr p, vmm_rec *r, vy_error *e)
{
	vy_err rc = VY_OK;
	CUresult cr = c->api.MemUnmap((CUdeviceptr)p, (size_t)r->bytes);
	if (cr != CUDA_SUCCESS)
		rc = cuda_fail(c, cr, "cuMemUnmap", e);
	cr = c->api.MemAddressFree((CUdeviceptr)p, (size_t)r->bytes);
	if (cr != CUDA_SUCCESS && rc == VY_OK)
		rc = cuda_fail(c, cr, "cuMemAddressFree", e);
	cr = c->api.MemRelease(r->handle);
	if (cr != CUDA_SUCCESS && rc == VY_OK)
		rc = cuda_fail(c, cr, "cuMemRelease", e);
	return rc;
}

/* Physical memory another process can import by fd, mapped here. */
static vy_err vmm_alloc(cuda_device *c, uint64_t bytes, vy_dptr *out, vy_error *e)
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
	CUresult cr = c->api.MemCreate(&r->handle, (size_t)bytes, &prop, 0);
	if (cr != CUDA_SUCCESS) {
		free(r);
		return cuda_fail(c, cr, "cuMemCreate", e);
	}
	return vmm_map(c, r, out, e);
}

static vy_err cuda_alloc(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CUdeviceptr p = 0;
	if (bytes == 0)
		return vy_fail(e, VY_EINVAL, "allocate at least 1 byte", "cuda backend: zero-byte allocation");
	if (bytes > SIZE_MAX)
		return vy_fail(e, VY_EOVERFLOW, "allocate less", "cuda backend: %llu bytes do not fit size_t",
			       (unsigned long long)bytes);
	CU_CURRENT(c, e);
	uint64_t g = c->base.info.share_granularity;
	if (g && bytes >= g) {
		uint64_t whole = vy_device_alloc_size(d, bytes); /* VMM takes whole granules */
		if (!whole || whole > SIZE_MAX)
			return vy_fail(e, VY_EOVERFLOW, "allocate less", "cuda backend: %llu bytes do not fit size_t",
				       (unsigned long long)bytes);
		return vmm_alloc(c, whole, out, e);
	}
	CU_CALL(c, e, MemAlloc, (&p, (size_t)bytes));
	*out = (vy_dptr)p;
	return VY_OK;
}

static vy_err cuda_free(vy_device *d, vy_dptr p, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	CU_CURRENT(c, e);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = c->base.info.share_granularity ? vy_u64map_remove(&c->vmm, p) : NULL;
	pthread_mutex_unlock(&c->vmm_lock);
	if (r) {
		vy_err rc = vmm_unmap(c, p, r, e);
		free(r);
		return rc;
	}
	CU_CALL(c, e, MemFree, ((CUdeviceptr)p));
	return VY_OK;
}

static vy_err cuda_export_fd(vy_device *d, vy_dptr p, int *fd, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	CUmemGenericAllocationHandle h = r ? r->handle : 0;
	pthread_mutex_unlock(&c->vmm_lock);
	if (!r)
		return vy_fail(e, VY_EINVAL, "share only allocations of the share granularity or more",
			       "cuda backend: 0x%llx is not a shareable allocation", (unsigned long long)p);
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
	CU_CALL(c, e, MemAddressReserve, (&p, (size_t)bytes, 0, 0, 0));
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
		return cuda_fail(c, cr, "cuMemMap", e);
	CUmemAccessDesc access[VY_PEERS_MAX + 1];
	int n = access_list(c, access);
	cr = c->api.MemSetAccess((CUdeviceptr)at, (size_t)bytes, access, (size_t)n);
	if (cr == CUDA_SUCCESS && !put_record(c, &c->mapped, at, bytes)) {
		c->api.MemUnmap((CUdeviceptr)at, (size_t)bytes);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cuda backend: cannot record a mapping");
	}
	if (cr != CUDA_SUCCESS) {
		c->api.MemUnmap((CUdeviceptr)at, (size_t)bytes);
		return cuda_fail(c, cr, "cuMemSetAccess", e);
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
		rc = cuda_fail(c, cr, "cuMemRelease", e);
	}
	return rc;
}

static vy_err cuda_map_own(vy_device *d, vy_dptr p, uint64_t bytes, vy_dptr at, vy_error *e)
{
	cuda_device *c = cuda_of(d);
	pthread_mutex_lock(&c->vmm_lock);
	vmm_rec *r = vy_u64map_get(&c->vmm, p);
	bool ok = r && r->bytes == bytes;
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

/* A hole run: the granule of zeros mapped at each granule (a mapping
 * cannot repeat a smaller allocation across a larger range). */
static vy_err cuda_map_zeros(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e)
{
	uint64_t g = d->info.share_granularity;
	for (uint64_t x = 0; x < bytes; x += g) {
		vy_err rc = cuda_map_own(d, zero, g, at + x, e);
		if (rc != VY_OK) {
			for (uint64_t y = 0; y < x; y += g)
				cuda_unmap(d, at + y, g, NULL);
			return rc;
		}
	}
	return VY_OK;
}

static vy_err cuda_unmap_zeros(vy_device *d, vy_dptr at, uint64_t bytes, vy_error *e)
{
	uint64_t g = d->info.share_granularity;
	vy_err first = VY_OK;
	for (uint64_t x = 0; x < bytes; x += g) {
		vy_err rc = cuda_unmap(d, at + x, g, first == VY_OK ? e : NULL);
		if (first == VY_OK)
			first = rc;
	}
	return first;
}

static const vy_device_share_ops cuda_share = {
	.export_fd = cuda_export_fd,
	.reserve = cuda_reserve,
	.unreserve = cuda_unreserve,
	.map_fd = cuda_map_fd,
	.map_own = cuda_map_own,
	.unmap = cuda_unmap,
	.map_zeros = cuda_map_zeros,
	.unmap_zeros = cuda_unmap_zeros,
};

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
		return cuda_fail(c, cr, "cuCtxEnablePeerAccess", e);
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
		cuda_fail(c, rc, "cuModuleLoadDataEx", &why);
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
		return cuda_fail(c, rc, "cuModuleGetFunction", e);
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
			return cuda_fail(c, rc, "cuFuncGetParamInfo", e);
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
	.alloc = cuda_alloc,
	.free = cuda_free,
	.host_alloc = cuda_host_alloc,
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
		c->base.share = &cuda_share;
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
	if (pthread_mutex_init(&c->vmm_lock, NULL) != 0) {
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
		cuda_fail(c, cr, "cuInit", &why);
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
		rc = cuda_fail(c, cr, "cuDeviceGet", e);
		goto fail;
	}
	cr = c->api.PrimaryCtxRetain(&c->ctx, c->dev);
	if (cr != CUDA_SUCCESS) {
		c->ctx = NULL;
		rc = cuda_fail(c, cr, "cuDevicePrimaryCtxRetain", e);
		goto fail;
	}
	c->generation = atomic_fetch_add(&cuda_generation, 1) + 1;
	c->base.ops = &cuda_ops;
	rc = cuda_current(c, e);
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
	pthread_mutex_destroy(&c->vmm_lock);
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
