/* The cuda backend's own header (device_cuda.c: the device table;
 * cuda_alloc.c: allocations and frees; cuda_vmm.c: VMM memory, exports and
 * spans; cuda_keep.c: memory kept for a successor; cuda_driver.c: the driver's
 * errors and the current context). Nothing outside the backend includes it. */
#ifndef VY_CUDA_H
#define VY_CUDA_H

#ifdef VY_HAVE_CUDA_H

#include "core/device.h"
#include "core/device_keep.h"
#include "core/slab.h"
#include "core/u64map.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdatomic.h>
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
	X(MemHostRegister, "cuMemHostRegister", PFN_cuMemHostRegister_v6050)    \
	X(MemHostUnregister, "cuMemHostUnregister", PFN_cuMemHostUnregister_v4000) \
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
	/* Holes map zeros (core/view.h). A long run maps zrun, one larger
	 * allocation of zeros, at each zrun_bytes-aligned address it covers,
	 * and the caller's granule of zeros at the rest: on the H100 a 2 MiB
	 * granule costs ~38 us a mapping and the driver runs out near 524,000
	 * of them (1 TiB); 64 MiB runs map 1 TiB in 0.55 s. vmm_lock. */
	uint64_t zrun_bytes; /* 0: granules only */
	vy_dptr zrun; /* a shareable allocation: made for the first run, freed after the last */
	uint64_t zrun_maps;
	vy_u64map zruns; /* where zrun is mapped */
	/* Devices of this process that reach our memory directly (peer
	 * access, cuda_peer_enable): every mapping grants them access too.
	 * Set before any allocation, read without the lock after. */
	int peers[VY_PEERS_MAX];
	int npeers;
	/* Keeping for a successor (cuda_keep.c; vmm_lock): the sink once
	 * started, and each kept slot's allocation (slot -> pointer). */
	const vy_keep_sink *sink;
	vy_u64map by_slot;
	/* Small allocations while kept (cuda_alloc.c; slab_lock, taken before
	 * vmm_lock): slots of slabs, each slab one VMM granule (a vmm_rec
	 * marked `slab`, kept as any other), so a small file costs a slot, not
	 * a granule, an export and a keeper ADD of its own. */
	pthread_mutex_t slab_lock;
	vy_slabs slabs;
	bool slabs_on;     /* set once by cuda_keep_start, before files */
	vy_error slab_err; /* why the last slab could not be made */
} cuda_device;

/* What may read and write a mapping: this device and its peers. */
static inline int access_list(const cuda_device *c, CUmemAccessDesc *out)
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
	vy_keep_slot slot; /* where a keeper holds its fd; 0: none */
	/* Taken back from a dead daemon's fd (cuMemImportFromShareableHandle):
	 * the driver will not export an imported handle again, so its exports
	 * (a mapping, a launcher, the keeper) are copies of this fd. */
	bool imported;
	int fd;
	/* A slab's memory (cuda_alloc.c): slots of several files, so never
	 * exported, mapped elsewhere or freed as an allocation. */
	bool slab;
} vmm_rec;
/* Free r, and an imported one's fd. */
void vy_cuda_rec_free(vmm_rec *r);
static inline cuda_device *cuda_of(vy_device *d)
{
	return (cuda_device *)d;
}
/* Fill `e` from a driver result, naming the call. Out-of-memory is ENOSPC so
 * that callers can tell "free something" from "the device failed". */
vy_err vy_cuda_fail(cuda_device *c, CUresult rc, const char *call, vy_error *e);
/* Make c's context current on this thread (once per open, not per call). */
vy_err vy_cuda_current(cuda_device *c, vy_error *e);
/* A new open's generation: threads set its context current again. */
uint64_t vy_cuda_next_generation(void);

#define CU_CALL(c, e, call, args)                                  \
	do {                                                       \
		CUresult rc_ = (c)->api.call args;                 \
		if (rc_ != CUDA_SUCCESS)                           \
			return vy_cuda_fail((c), rc_, "cu" #call, (e)); \
	} while (0)

#define CU_CURRENT(c, e)                        \
	do {                                    \
		vy_err cur_ = vy_cuda_current((c), (e)); \
		if (cur_ != VY_OK)              \
			return cur_;            \
	} while (0)

/* cuda_alloc.c: the device table's alloc and free (a slab's slot while
 * kept and small, VMM when the device can share, else cuMemAlloc); the
 * slabs started (cuda_keep_start) and a slot's slab. */
vy_err vy_cuda_alloc(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e);
vy_err vy_cuda_free(vy_device *d, vy_dptr p, vy_error *e);
void vy_cuda_slabs_start(cuda_device *c);
void vy_cuda_slabs_destroy(cuda_device *c);
/* The bytes of empty slabs kept for reuse. */
uint64_t vy_cuda_slabs_idle(cuda_device *c);
/* The base of the slab whose live slot starts at `p`; 0: none (slab_lock). */
vy_dptr vy_cuda_slab_of(cuda_device *c, vy_dptr p);

/* cuda_vmm.c: VMM allocations and the share sub-table (exports, spans,
 * zeros). */
extern const vy_device_share_ops vy_cuda_share;
/* `bytes` (whole granules) of physical memory another process can import
 * by fd, mapped here at an address aligned to the granule, recorded in
 * c->vmm; `slab` marks it a slab's. */
vy_err vy_cuda_vmm_alloc(cuda_device *c, uint64_t bytes, bool slab, vy_dptr *out, vy_error *e);
/* Free the VMM allocation at p, its slot dropped, if it is one and a
 * slab's exactly when `slab`: *was says; else nothing changes. */
vy_err vy_cuda_vmm_free(cuda_device *c, vy_dptr p, bool slab, bool *was, vy_error *e);
/* Reserve, map and allow access to r's memory, recorded in c->vmm; on
 * failure r's handle is released and r freed. */
vy_err vy_cuda_vmm_map(cuda_device *c, vmm_rec *r, vy_dptr *out, vy_error *e);

/* Keeping (cuda_vmm.c): a new fd for r's memory (an imported one's: a
 * copy of its fd; -1: the driver would not); r at p handed to the sink, its slot (0: not kept) (vmm_lock
 * held); a new allocation so handed once a sink is set (the context
 * current); a freed one's slot dropped (vmm_lock held). */
int vy_cuda_export(cuda_device *c, const vmm_rec *r);
vy_keep_slot vy_cuda_keep_add(cuda_device *c, const vmm_rec *r, vy_dptr p);
vy_keep_slot vy_cuda_keep_made(cuda_device *c, vy_dptr p);
void vy_cuda_keep_freed(cuda_device *c, vmm_rec *r);
/* cuda_keep.c: the keep sub-table over those. */
extern const vy_device_keep_ops vy_cuda_keep;

#endif

#endif
