/* The device interface: one table of operations that every backend fills.
 *
 * `cuda` (device_cuda.c) drives a GPU through the CUDA Driver API, loaded at
 * run time; `host` (device_host.c) implements the same table over host memory
 * for machines without a GPU. Layers above core/ never call a backend
 * directly: they go through the resident store, the pool, staging and
 * transfers, which call this table.
 *
 * Copies and memsets are asynchronous on a stream: their effects are visible
 * after stream_sync. Pointers are device addresses (vy_dptr); the host
 * backend's are plain host addresses. */
#ifndef VY_DEVICE_H
#define VY_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

typedef uint64_t vy_dptr;
typedef struct vy_device vy_device;
typedef struct vy_stream vy_stream; /* opaque, owned by the backend */
typedef struct vy_event vy_event;   /* opaque, owned by the backend */
typedef struct vy_module vy_module; /* a loaded PTX/cubin/fatbin image */
typedef struct vy_function vy_function; /* a kernel entry of a module */
typedef struct vy_device_keep_ops vy_device_keep_ops; /* core/device_keep.h */

#define VY_PARAMS_MAX 256

/* What launching a kernel must respect. */
typedef struct vy_function_info {
	size_t nparams;
	size_t param_size[VY_PARAMS_MAX];
	int max_threads;     /* per block, for this kernel */
	int static_shared;   /* bytes the kernel declares itself */
	int max_dynamic_shared;
	/* The occupancy calculator's answer (no dynamic shared memory): the
	 * block size that keeps the most threads resident, and the blocks of
	 * that size that fill the device once. 0: the backend has none. */
	int occ_block, occ_grid;
} vy_function_info;

typedef enum vy_backend_kind {
	VY_BACKEND_AUTO = 0,
	VY_BACKEND_CUDA,
	VY_BACKEND_HOST,
} vy_backend_kind;

typedef struct vy_device_info {
	const char *backend;     /* "cuda" or "host" */
	char name[256];          /* device name */
	int ordinal;
	int cc_major, cc_minor;  /* compute capability (0.0 on host) */
	int driver_version;      /* e.g. 13000 (0 on host) */
	int multiprocessors;
	int max_threads_per_block;
	int max_block[3];
	int max_grid[3];
	int max_shared_per_block;
	uint64_t total_bytes;    /* device memory (host: the configured capacity) */
	/* Allocations of at least this many bytes are made shareable (rounded
	 * up to a multiple of it); 0: this device cannot share memory. */
	uint64_t share_granularity;
} vy_device_info;

/* Memory another process can map: the optional sub-table of a backend that
 * can share (cuda: VMM allocations with a POSIX fd handle; host: memfd).
 * Every allocation of `share_granularity` bytes or more, made through
 * alloc, is shareable as a whole; nothing smaller is, and no shareable
 * allocation ever holds two buffers.
 *
 * Several shareable allocations can be mapped back to back in a reserved
 * address range (a span, core/span.h): that is how a file grows in place,
 * one more allocation at its end, without copying what it holds, and how
 * another process maps such a file. fd ownership: export_fd hands the
 * caller a new fd it must close; map_fd never takes the fd it is given. */
typedef struct vy_device_share_ops {
	/* A new fd for the shareable allocation that starts at `p`. */
	vy_err (*export_fd)(vy_device *d, vy_dptr p, int *fd, vy_error *e);
	/* The same, through which its receiver can only read: no writable
	 * mapping, no write, and no way back to one (a reopen included).
	 * NULL where the backend cannot enforce that against its receiver
	 * (cuda: an importer sets its own access with cuMemSetAccess). */
	vy_err (*export_fd_readonly)(vy_device *d, vy_dptr p, int *fd, vy_error *e);
	/* `bytes` (a multiple of the granularity) of address space, with
	 * nothing behind it yet; and its release, once nothing is mapped in it. */
	vy_err (*reserve)(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e);
	vy_err (*unreserve)(vy_device *d, vy_dptr p, uint64_t bytes, vy_error *e);
	/* Map all `bytes` of an exported allocation (by its fd), or of one of
	 * this process's own shareable allocations (by its pointer), at `at`
	 * inside a reservation, with read and write access (host: read only
	 * where the fd was opened for reading only, as export_fd_readonly's). */
	vy_err (*map_fd)(vy_device *d, int fd, uint64_t bytes, vy_dptr at, vy_error *e);
	vy_err (*map_own)(vy_device *d, vy_dptr p, uint64_t bytes, vy_dptr at, vy_error *e);
	/* Undo one map_fd or map_own, with the same `at` and `bytes`. */
	vy_err (*unmap)(vy_device *d, vy_dptr at, uint64_t bytes, vy_error *e);
	/* Zeros at [at, at + bytes) inside a reservation, whole granules,
	 * costing no memory of their own: holes (core/view.h). cuda maps
	 * `zero`, one shareable granule of zeros, at each granule; host maps
	 * anonymous zero pages, one mapping for the run. unmap_zeros takes
	 * any run of whole granules of them back to bare address space. */
	vy_err (*map_zeros)(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e);
	vy_err (*unmap_zeros)(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e);
} vy_device_share_ops;

/* The most shareable allocations one buffer is made of: growth in place
 * adds them in steps that grow with the buffer, so even a buffer of the
 * whole device stays far below this. */
#define VY_CHUNKS_MAX 128
/* The most other devices whose memory one device reaches (a mount's). */
#define VY_PEERS_MAX 16

typedef struct vy_device_ops {
	void (*close)(vy_device *d);
	vy_err (*mem_info)(vy_device *d, uint64_t *free_bytes, uint64_t *total_bytes, vy_error *e);
	vy_err (*alloc)(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e);
	vy_err (*free)(vy_device *d, vy_dptr p, vy_error *e);
	/* Page-locked host memory, the source and target of async copies. */
	vy_err (*host_alloc)(vy_device *d, size_t bytes, void **out, vy_error *e);
	vy_err (*host_free)(vy_device *d, void *p, vy_error *e);
	/* Host memory the caller mapped (page-aligned, whole pages), made
	 * page-locked for async copies until unregistered: memory another
	 * process may hold too (a memfd the keeper keeps). NULL: any host
	 * memory serves as it is. */
	vy_err (*host_register)(vy_device *d, void *p, size_t bytes, vy_error *e);
	vy_err (*host_unregister)(vy_device *d, void *p, vy_error *e);
	/* Non-blocking streams: never the null stream. */
	vy_err (*stream_create)(vy_device *d, vy_stream **out, vy_error *e);
	vy_err (*stream_destroy)(vy_device *d, vy_stream *s, vy_error *e);
	vy_err (*stream_sync)(vy_device *d, vy_stream *s, vy_error *e);
	/* Wait for all work of this process's context on the device. */
	vy_err (*synchronize)(vy_device *d, vy_error *e);
	vy_err (*copy_htod)(vy_device *d, vy_stream *s, vy_dptr dst, const void *src, uint64_t n, vy_error *e);
	vy_err (*copy_dtoh)(vy_device *d, vy_stream *s, void *dst, vy_dptr src, uint64_t n, vy_error *e);
	vy_err (*copy_dtod)(vy_device *d, vy_stream *s, vy_dptr dst, vy_dptr src, uint64_t n, vy_error *e);
	/* Another device of this process (same backend): let d reach its
	 * memory directly; *on says whether the devices allow it. Called for
	 * every pair of a mount's devices before either allocates. */
	vy_err (*peer_enable)(vy_device *d, vy_device *other, bool *on, vy_error *e);
	/* n bytes from `src` of device `from` to `dst` of d, on d's stream:
	 * device to device where peer_enable said on (otherwise the driver
	 * stages it; the core stages itself then, core/peer.h). */
	vy_err (*copy_peer)(vy_device *d, vy_stream *s, vy_dptr dst, vy_device *from, vy_dptr src, uint64_t n,
			    vy_error *e);
	vy_err (*memset8)(vy_device *d, vy_stream *s, vy_dptr dst, uint8_t value, uint64_t n, vy_error *e);
	vy_err (*event_create)(vy_device *d, vy_event **out, vy_error *e);
	vy_err (*event_destroy)(vy_device *d, vy_event *ev, vy_error *e);
	vy_err (*event_record)(vy_device *d, vy_event *ev, vy_stream *s, vy_error *e);
	/* Wait until the work queued before the event's record completed. */
	vy_err (*event_sync)(vy_device *d, vy_event *ev, vy_error *e);
	/* Microseconds between two recorded, completed events. */
	vy_err (*event_elapsed_us)(vy_device *d, vy_event *start, vy_event *end, double *us, vy_error *e);
	/* Load a PTX (NUL-terminated), cubin or fatbin image. `log` receives
	 * the JIT's error and info log (NUL-terminated, maybe empty). */
	vy_err (*module_load)(vy_device *d, const void *image, size_t len, vy_module **out, char *log, size_t log_cap,
			      vy_error *e);
	vy_err (*module_unload)(vy_device *d, vy_module *m, vy_error *e);
	vy_err (*function_get)(vy_device *d, vy_module *m, const char *name, vy_function **out, vy_error *e);
	vy_err (*function_info)(vy_device *d, vy_function *f, vy_function_info *out, vy_error *e);
	/* Queue a launch; args[i] points at parameter i's bytes. */
	vy_err (*launch)(vy_device *d, vy_stream *s, vy_function *f, const unsigned grid[3], const unsigned block[3],
			 unsigned shared, void **args, vy_error *e);
} vy_device_ops;

struct vy_device {
	const vy_device_ops *ops;
	/* NULL when this device cannot share memory with another process. */
	const vy_device_share_ops *share;
	/* NULL when this device cannot keep its memory for a successor
	 * daemon (core/device_keep.h). */
	const vy_device_keep_ops *keep;
	/* Every allocation is whole share granules, small ones too (cuda
	 * while kept: only VMM memory has an fd), but those of at most
	 * slab_max bytes: slots of slabs (core/slab.h), of their class's
	 * size, each slab a granule; never pooled (core/pool.h), as an idle
	 * slot would hold its slab. 0: none (the host's slabs count what was
	 * asked, as before). */
	bool whole_granules;
	uint64_t slab_max;
	vy_device_info info;
};

typedef struct vy_device_options {
	vy_backend_kind backend;
	int ordinal;            /* cuda: which GPU */
	uint64_t host_memory;   /* host: capacity in bytes (0: a quarter of RAM) */
} vy_device_options;

void vy_device_close(vy_device *d);

/* Create and destroy `n` streams at once. The CUDA driver keeps the device
 * memory of the most streams a context ever had until the context goes
 * (an H100 with driver 580 keeps 4 MiB after 8 streams were destroyed), so
 * whoever compares free device memory before and after work first warms
 * that high-water mark, as many streams as the core may use. */
vy_err vy_device_warm_streams(vy_device *d, unsigned n, vy_error *e);

/* The bytes an allocation of `len` really takes: its slab class's size up
 * to slab_max; else rounded up to the share granularity when it is
 * shareable, or always with whole_granules (0 on overflow). */
uint64_t vy_device_alloc_size(const vy_device *d, uint64_t len);
/* The largest allocation whose vy_device_alloc_size is at most `room`:
 * what one new file can get (statfs's available). Below one granule with
 * whole_granules, only a slab slot's class fits, or nothing. */
uint64_t vy_device_largest_fit(const vy_device *d, uint64_t room);

/* Opening a device: the backends and the choice between them. */
#include "core/backend.h"

#endif
