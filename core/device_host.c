/* The host backend: the device table over host memory.
 *
 * A real backend for machines without a GPU: "device" memory is host memory
 * counted against a fixed capacity, copies are memcpy, streams complete work
 * as it is issued (so a sync only orders nothing), and events read the
 * monotonic clock. Live allocations are kept in a map, so a free of
 * anything this backend did not hand out, or a second free, is refused as the
 * driver would refuse it, without touching that memory.
 *
 * Sharing: allocations of share_granularity (2 MiB, as the GPU's VMM
 * granularity) or more are memfd mappings, so another process (the launcher,
 * a client) can map exactly that buffer, as VMM memory is shared on a GPU.
 * Smaller ones are not shared: slots of memfd slabs (core/slab.h, core/host_slab.c), or
 * from 1 MiB a memfd of their own; no file byte is in heap memory, so a
 * keeper holding the fds keeps every byte (docs/survive.md). */
#include "core/host_impl.h"
#include "core/checked.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The GPU's VMM granularity, so the host backend shares as the GPU does. */
#define HOST_SHARE_GRANULARITY (2ull << 20)

struct vy_stream {
	int unused;
};

struct vy_event {
	struct timespec at;
	int recorded;
};

static host_device *host_of(vy_device *d)
{
	return (host_device *)d;
}

static void host_close(vy_device *d)
{
	host_device *h = host_of(d);
	/* Whatever the layers above left allocated goes with the device. */
	uint64_t key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&h->live, &cursor, &key, &value)) {
		host_alloc_rec *r = value;
		if (r->fd >= 0) {
			munmap((void *)(uintptr_t)key, (size_t)r->bytes);
			close(r->fd);
		}
		free(r);
	}
	vy_slabs_destroy(&h->slabs);
	cursor = 0; /* a reservation's munmap takes what is mapped in it too */
	while (vy_u64map_next(&h->reserved, &cursor, &key, &value))
		munmap((void *)(uintptr_t)key, (size_t)(uintptr_t)value);
	vy_u64map_destroy(&h->live);
	vy_u64map_destroy(&h->reserved);
	vy_u64map_destroy(&h->mapped);
	vy_u64map_destroy(&h->by_slot);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

static vy_err host_mem_info(vy_device *d, uint64_t *free_bytes, uint64_t *total_bytes, vy_error *e)
{
	(void)e;
	host_device *h = host_of(d);
	pthread_mutex_lock(&h->lock);
	*free_bytes = h->capacity - h->used;
	*total_bytes = h->capacity;
	pthread_mutex_unlock(&h->lock);
	return VY_OK;
}

static vy_err host_alloc(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e)
{
	host_device *h = host_of(d);
	if (bytes == 0)
		return vy_fail(e, VY_EINVAL, "allocate at least 1 byte", "host backend: zero-byte allocation");
	if (bytes > SIZE_MAX || bytes > (uint64_t)UINTPTR_MAX)
		return vy_fail(e, VY_EOVERFLOW, "allocate less", "host backend: %llu bytes do not fit this machine's address space",
			       (unsigned long long)bytes);
	pthread_mutex_lock(&h->lock);
	if (bytes > h->capacity - h->used) {
		uint64_t left = h->capacity - h->used;
		pthread_mutex_unlock(&h->lock);
		return vy_fail(e, VY_ENOSPC, "free device buffers or raise host_memory",
			       "host backend out of memory: %llu bytes asked, %llu of %llu free",
			       (unsigned long long)bytes, (unsigned long long)left, (unsigned long long)h->capacity);
	}
	h->used += bytes;
	pthread_mutex_unlock(&h->lock);

	void *p = NULL;
	host_alloc_rec *r = malloc(sizeof(*r));
	if (r) {
		r->bytes = bytes;
		r->fd = -1;
		r->slot = 0;
		if (!vy_slabs_take(&h->slabs, bytes)) {
			/* Sealed at its size before anyone else sees it: a client
			 * given an fd (a mapping) cannot shrink it under the
			 * daemon's mapping (SIGBUS) nor grow it. */
			r->fd = memfd_create("vyrefs-buffer", MFD_CLOEXEC | MFD_ALLOW_SEALING);
			if (r->fd >= 0 && ftruncate(r->fd, (off_t)bytes) == 0 &&
			    fcntl(r->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
				p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
			if (p == MAP_FAILED)
				p = NULL;
			if (!p && r->fd >= 0)
				close(r->fd);
		}
	}
	pthread_mutex_lock(&h->lock);
	if (r && r->fd < 0 && vy_slabs_take(&h->slabs, bytes))
		p = (void *)(uintptr_t)vy_slabs_alloc(&h->slabs, bytes);
	if (!p || !vy_u64map_put(&h->live, (uint64_t)(uintptr_t)p, r)) {
		h->used -= bytes;
		if (p && r->fd < 0)
			vy_slabs_free(&h->slabs, (uint64_t)(uintptr_t)p, NULL);
		pthread_mutex_unlock(&h->lock);
		if (p && r->fd >= 0) {
			munmap(p, (size_t)bytes);
			close(r->fd);
		}
		free(r);
		return vy_fail(e, VY_ENOMEM, "free host memory or lower host_memory",
			       "host backend: the machine has no %llu bytes of memory left", (unsigned long long)bytes);
	}
	vy_host_keep_made(h, r, (vy_dptr)(uintptr_t)p);
	pthread_mutex_unlock(&h->lock);
	*out = (vy_dptr)(uintptr_t)p;
	return VY_OK;
}

static vy_err host_free(vy_device *d, vy_dptr p, vy_error *e)
{
	host_device *h = host_of(d);
	pthread_mutex_lock(&h->lock);
	void *value = vy_u64map_remove(&h->live, p);
	if (!value) {
		pthread_mutex_unlock(&h->lock);
		return vy_fail(e, VY_EINVAL, "free only pointers this backend allocated, once",
			       "host backend: 0x%llx is not a live device allocation", (unsigned long long)p);
	}
	host_alloc_rec *r = value;
	h->used -= r->bytes; /* counted in at alloc, under this lock */
	vy_keep_slot gone = 0;
	if (r->fd < 0)
		vy_slabs_free(&h->slabs, p, &gone);
	vy_host_keep_freed(h, r, gone);
	pthread_mutex_unlock(&h->lock);
	if (r->fd >= 0) {
		munmap((void *)(uintptr_t)p, (size_t)r->bytes);
		close(r->fd);
	}
	free(r);
	return VY_OK;
}

/* A new open file of the memfd at `p`: of its own (not a dup of ours),
 * so what the receiver does to its file status flags stays its own.
 * Read-only: opened O_RDONLY (no writable shared mapping, no write, no
 * seal), and the memfd made 0600 first, so a receiver of another uid
 * cannot reopen it for writing through /proc/self/fd (a memfd is born
 * 0777) nor chmod it back (only its owner may); never a dup, which would
 * share our read-write open file. */
static vy_err export_as(vy_device *d, vy_dptr p, bool readonly, int *fd, vy_error *e)
{
	host_device *h = host_of(d);
	pthread_mutex_lock(&h->lock);
	host_alloc_rec *r = vy_u64map_get(&h->live, p);
	int dup_fd = -1;
	bool shareable = r && r->fd >= 0 && r->bytes >= h->base.info.share_granularity;
	if (shareable && (!readonly || fchmod(r->fd, 0600) == 0)) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", r->fd);
		dup_fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
		if (dup_fd < 0 && !readonly && errno != EMFILE && errno != ENFILE)
			dup_fd = fcntl(r->fd, F_DUPFD_CLOEXEC, 0);
	}
	int err = errno;
	pthread_mutex_unlock(&h->lock);
	if (!shareable)
		return vy_fail(e, VY_EINVAL, "share only allocations of the share granularity or more",
			       "host backend: 0x%llx is not a shareable allocation", (unsigned long long)p);
	if (dup_fd < 0)
		return vy_fail(e, err == EMFILE || err == ENFILE ? VY_EMFILE : VY_ENOMEM, "raise the open-file limit (ulimit -n)",
			       "host backend: cannot export a buffer: %s", strerror(err));
	*fd = dup_fd;
	return VY_OK;
}

static vy_err host_export_fd(vy_device *d, vy_dptr p, int *fd, vy_error *e)
{
	return export_as(d, p, false, fd, e);
}

static vy_err host_export_fd_readonly(vy_device *d, vy_dptr p, int *fd, vy_error *e)
{
	return export_as(d, p, true, fd, e);
}

/* Take `p` of `bytes` out of `map` if it is recorded there with that size. */
static bool take_record(host_device *h, vy_u64map *map, vy_dptr p, uint64_t bytes)
{
	pthread_mutex_lock(&h->lock);
	void *v = vy_u64map_get(map, p);
	bool yes = v && (uint64_t)(uintptr_t)v == bytes;
	if (yes)
		vy_u64map_remove(map, p);
	pthread_mutex_unlock(&h->lock);
	return yes;
}

static bool put_record(host_device *h, vy_u64map *map, vy_dptr p, uint64_t bytes)
{
	pthread_mutex_lock(&h->lock);
	bool put = vy_u64map_put(map, p, (void *)(uintptr_t)bytes);
	pthread_mutex_unlock(&h->lock);
	return put;
}

/* Address space only: no access, no memory, until something is mapped. */
static void *inaccessible(void *at, uint64_t bytes)
{
	int fixed = at ? MAP_FIXED : 0;
	void *p = mmap(at, (size_t)bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | fixed, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static vy_err host_reserve(vy_device *d, uint64_t bytes, vy_dptr *out, vy_error *e)
{
	host_device *h = host_of(d);
	if (bytes == 0 || bytes > SIZE_MAX)
		return vy_fail(e, VY_EINVAL, "reserve at least 1 byte", "host backend: cannot reserve %llu bytes",
			       (unsigned long long)bytes);
	void *p = inaccessible(NULL, bytes);
	if (!p)
		return vy_fail(e, VY_ENOMEM, "free address space (ulimit -v)", "host backend: cannot reserve %llu bytes: %s",
			       (unsigned long long)bytes, strerror(errno));
	if (!put_record(h, &h->reserved, (vy_dptr)(uintptr_t)p, bytes)) {
		munmap(p, (size_t)bytes);
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot record a reservation");
	}
	*out = (vy_dptr)(uintptr_t)p;
	return VY_OK;
}

static vy_err host_unreserve(vy_device *d, vy_dptr p, uint64_t bytes, vy_error *e)
{
	host_device *h = host_of(d);
	if (!take_record(h, &h->reserved, p, bytes))
		return vy_fail(e, VY_EINVAL, "release only what was reserved, once",
			       "host backend: 0x%llx is not a reservation of %llu bytes", (unsigned long long)p,
			       (unsigned long long)bytes);
	if (munmap((void *)(uintptr_t)p, (size_t)bytes) != 0)
		return vy_fail(e, VY_EINTERNAL, "report this bug", "host backend: munmap: %s", strerror(errno));
	return VY_OK;
}

/* Map `bytes` of memfd `fd` at `at`, replacing the reservation there:
 * read-only when the fd is (a reader's: a write there faults). */
static vy_err map_memfd(host_device *h, int fd, uint64_t bytes, vy_dptr at, vy_error *e)
{
	struct stat st;
	int fl = fcntl(fd, F_GETFL);
	/* Mapping past a memfd's end would fault on first touch: refuse. */
	if (bytes == 0 || bytes > SIZE_MAX || fl < 0 || fstat(fd, &st) != 0 || st.st_size < 0 ||
	    (uint64_t)st.st_size < bytes)
		return vy_fail(e, VY_EINVAL, "map a buffer with the size it was exported with",
			       "host backend: the shared buffer is not %llu bytes", (unsigned long long)bytes);
	int prot = (fl & O_ACCMODE) == O_RDONLY ? PROT_READ : PROT_READ | PROT_WRITE;
	void *p = mmap((void *)(uintptr_t)at, (size_t)bytes, prot, MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot map a shared buffer: %s",
			       strerror(errno));
	if (!put_record(h, &h->mapped, at, bytes)) {
		inaccessible(p, bytes);
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot record a mapping");
	}
	return VY_OK;
}

static vy_err host_map_fd(vy_device *d, int fd, uint64_t bytes, vy_dptr at, vy_error *e)
{
	return map_memfd(host_of(d), fd, bytes, at, e);
}

static vy_err host_map_own(vy_device *d, vy_dptr p, uint64_t bytes, vy_dptr at, vy_error *e)
{
	host_device *h = host_of(d);
	pthread_mutex_lock(&h->lock);
	host_alloc_rec *r = vy_u64map_get(&h->live, p);
	int fd = r && r->fd >= 0 && r->bytes == bytes && bytes >= h->base.info.share_granularity
			 ? fcntl(r->fd, F_DUPFD_CLOEXEC, 0) : -2;
	pthread_mutex_unlock(&h->lock);
	if (fd == -2)
		return vy_fail(e, VY_EINVAL, "map only whole shareable allocations",
			       "host backend: 0x%llx is not a shareable allocation of %llu bytes", (unsigned long long)p,
			       (unsigned long long)bytes);
	if (fd < 0)
		return vy_fail(e, VY_ENOMEM, "raise the open-file limit (ulimit -n)", "host backend: cannot map a buffer: %s",
			       strerror(errno));
	vy_err rc = map_memfd(h, fd, bytes, at, e);
	close(fd); /* the mapping keeps the memory */
	return rc;
}

static vy_err host_unmap(vy_device *d, vy_dptr at, uint64_t bytes, vy_error *e)
{
	host_device *h = host_of(d);
	if (!take_record(h, &h->mapped, at, bytes))
		return vy_fail(e, VY_EINVAL, "unmap only what was mapped, once",
			       "host backend: 0x%llx is not a mapping of %llu bytes", (unsigned long long)at,
			       (unsigned long long)bytes);
	/* Back to reserved address space, so the range stays ours. */
	if (!inaccessible((void *)(uintptr_t)at, bytes))
		return vy_fail(e, VY_EINTERNAL, "report this bug", "host backend: cannot unmap a shared buffer: %s",
			       strerror(errno));
	return VY_OK;
}

/* A hole run: private anonymous pages read as zeros and cost nothing;
 * one mapping for the whole run (the kernel bounds how many a process
 * has). A write there, which the store never lets happen, would land in
 * a private page of its own, not in another hole. */
static vy_err host_map_zeros(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e)
{
	(void)d;
	(void)zero;
	void *p = mmap((void *)(uintptr_t)at, (size_t)bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	if (p == MAP_FAILED)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot map %llu bytes of holes: %s",
			       (unsigned long long)bytes, strerror(errno));
	return VY_OK;
}

static vy_err host_unmap_zeros(vy_device *d, vy_dptr zero, vy_dptr at, uint64_t bytes, vy_error *e)
{
	(void)d;
	(void)zero;
	if (!inaccessible((void *)(uintptr_t)at, bytes))
		return vy_fail(e, VY_EINTERNAL, "report this bug", "host backend: cannot unmap holes: %s", strerror(errno));
	return VY_OK;
}

static const vy_device_share_ops host_share = {
	.export_fd = host_export_fd,
	.export_fd_readonly = host_export_fd_readonly,
	.reserve = host_reserve,
	.unreserve = host_unreserve,
	.map_fd = host_map_fd,
	.map_own = host_map_own,
	.unmap = host_unmap,
	.map_zeros = host_map_zeros,
	.unmap_zeros = host_unmap_zeros,
};

static vy_err host_host_alloc(vy_device *d, size_t bytes, void **out, vy_error *e)
{
	(void)d;
	void *p = NULL;
	if (bytes == 0 || posix_memalign(&p, 4096, bytes) != 0)
		return vy_fail(e, VY_ENOMEM, "free host memory or lower staging_cache",
			       "host backend: cannot allocate %zu bytes of staging memory", bytes);
	*out = p;
	return VY_OK;
}

static vy_err host_host_free(vy_device *d, void *p, vy_error *e)
{
	(void)d;
	(void)e;
	free(p);
	return VY_OK;
}

static vy_err host_stream_create(vy_device *d, vy_stream **out, vy_error *e)
{
	(void)d;
	vy_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot allocate a stream");
	*out = s;
	return VY_OK;
}

static vy_err host_stream_destroy(vy_device *d, vy_stream *s, vy_error *e)
{
	(void)d;
	(void)e;
	free(s);
	return VY_OK;
}

static vy_err host_stream_sync(vy_device *d, vy_stream *s, vy_error *e)
{
	(void)d;
	(void)s;
	(void)e;
	return VY_OK; /* work completes as it is issued */
}

static vy_err host_synchronize(vy_device *d, vy_error *e)
{
	(void)d;
	(void)e;
	return VY_OK; /* work completes as it is issued */
}

static vy_err host_copy_htod(vy_device *d, vy_stream *s, vy_dptr dst, const void *src, uint64_t n, vy_error *e)
{
	(void)d;
	(void)s;
	(void)e;
	memcpy((void *)(uintptr_t)dst, src, (size_t)n);
	return VY_OK;
}

static vy_err host_copy_dtoh(vy_device *d, vy_stream *s, void *dst, vy_dptr src, uint64_t n, vy_error *e)
{
	(void)d;
	(void)s;
	(void)e;
	memcpy(dst, (const void *)(uintptr_t)src, (size_t)n);
	return VY_OK;
}

static vy_err host_copy_dtod(vy_device *d, vy_stream *s, vy_dptr dst, vy_dptr src, uint64_t n, vy_error *e)
{
	(void)d;
	(void)s;
	(void)e;
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, (size_t)n);
	return VY_OK;
}

/* Every host device's memory is this process's: always peers. */
static vy_err host_peer_enable(vy_device *d, vy_device *other, bool *on, vy_error *e)
{
	(void)e;
	*on = other->ops == d->ops && other != d;
	return VY_OK;
}

static vy_err host_copy_peer(vy_device *d, vy_stream *s, vy_dptr dst, vy_device *from, vy_dptr src, uint64_t n,
			     vy_error *e)
{
	if (from->ops != d->ops)
		return vy_fail(e, VY_EINVAL, "report this bug", "host backend: a peer copy from another backend");
	return host_copy_dtod(d, s, dst, src, n, e);
}

static vy_err host_memset8(vy_device *d, vy_stream *s, vy_dptr dst, uint8_t value, uint64_t n, vy_error *e)
{
	(void)d;
	(void)s;
	(void)e;
	memset((void *)(uintptr_t)dst, value, (size_t)n);
	return VY_OK;
}

static vy_err host_event_create(vy_device *d, vy_event **out, vy_error *e)
{
	(void)d;
	vy_event *ev = calloc(1, sizeof(*ev));
	if (!ev)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot allocate an event");
	*out = ev;
	return VY_OK;
}

static vy_err host_event_destroy(vy_device *d, vy_event *ev, vy_error *e)
{
	(void)d;
	(void)e;
	free(ev);
	return VY_OK;
}

static vy_err host_event_record(vy_device *d, vy_event *ev, vy_stream *s, vy_error *e)
{
	(void)d;
	(void)s;
	if (clock_gettime(CLOCK_MONOTONIC, &ev->at) != 0)
		return vy_fail(e, VY_EDEVICE, "report this bug", "host backend: the monotonic clock failed");
	ev->recorded = 1;
	return VY_OK;
}

static vy_err host_event_sync(vy_device *d, vy_event *ev, vy_error *e)
{
	(void)d;
	(void)ev;
	(void)e;
	return VY_OK; /* work completes as it is issued; like the driver, an
		       * event never recorded has nothing to wait for */
}

static vy_err host_event_elapsed_us(vy_device *d, vy_event *start, vy_event *end, double *us, vy_error *e)
{
	(void)d;
	if (!start->recorded || !end->recorded)
		return vy_fail(e, VY_EINVAL, "record both events before timing them",
			       "host backend: event not recorded");
	*us = (double)(end->at.tv_sec - start->at.tv_sec) * 1e6 +
	      (double)(end->at.tv_nsec - start->at.tv_nsec) / 1e3;
	return VY_OK;
}

#define FIX_CUDA "mount with -o backend=cuda on a machine with an NVIDIA GPU"

/* Modules are kept (a copy of the image) but not compiled: there is no
 * device to run them. */
struct vy_module {
	size_t len;
};

static vy_err host_module_load(vy_device *d, const void *image, size_t len, vy_module **out, char *log, size_t log_cap,
			       vy_error *e)
{
	(void)d;
	(void)image;
	vy_module *m = calloc(1, sizeof(*m));
	if (!m)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot record a module");
	m->len = len;
	if (log && log_cap)
		snprintf(log, log_cap, "host backend: module of %zu bytes kept, not compiled; launching needs the cuda backend\n",
			 len);
	*out = m;
	return VY_OK;
}

static vy_err host_module_unload(vy_device *d, vy_module *m, vy_error *e)
{
	(void)d;
	(void)e;
	free(m);
	return VY_OK;
}

static vy_err host_function_get(vy_device *d, vy_module *m, const char *name, vy_function **out, vy_error *e)
{
	(void)d;
	(void)m;
	(void)out;
	return vy_fail(e, VY_ENOTSUP, FIX_CUDA, "kernel '%s' cannot run on the host backend: launching needs the cuda backend",
		       name);
}

static vy_err host_function_info(vy_device *d, vy_function *f, vy_function_info *out, vy_error *e)
{
	(void)d;
	(void)f;
	(void)out;
	return vy_fail(e, VY_ENOTSUP, FIX_CUDA, "the host backend has no kernels: launching needs the cuda backend");
}

static vy_err host_launch(vy_device *d, vy_stream *s, vy_function *f, const unsigned grid[3], const unsigned block[3],
			  unsigned shared, void **args, vy_error *e)
{
	(void)d;
	(void)s;
	(void)f;
	(void)grid;
	(void)block;
	(void)shared;
	(void)args;
	return vy_fail(e, VY_ENOTSUP, FIX_CUDA, "the host backend cannot launch kernels: launching needs the cuda backend");
}

static const vy_device_ops host_ops = {
	.close = host_close,
	.mem_info = host_mem_info,
	.alloc = host_alloc,
	.free = host_free,
	.host_alloc = host_host_alloc,
	.host_free = host_host_free,
	.stream_create = host_stream_create,
	.stream_destroy = host_stream_destroy,
	.stream_sync = host_stream_sync,
	.synchronize = host_synchronize,
	.copy_htod = host_copy_htod,
	.copy_dtoh = host_copy_dtoh,
	.copy_dtod = host_copy_dtod,
	.copy_peer = host_copy_peer,
	.peer_enable = host_peer_enable,
	.memset8 = host_memset8,
	.event_create = host_event_create,
	.event_destroy = host_event_destroy,
	.event_record = host_event_record,
	.event_sync = host_event_sync,
	.event_elapsed_us = host_event_elapsed_us,
	.module_load = host_module_load,
	.module_unload = host_module_unload,
	.function_get = host_function_get,
	.function_info = host_function_info,
	.launch = host_launch,
};

/* A quarter of physical memory: room to work without starving the machine. */
static uint64_t host_default_capacity(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long page = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || page <= 0)
		return 1ull << 30;
	return (uint64_t)pages * (uint64_t)page / 4;
}

vy_err vy_device_host_open(uint64_t capacity, vy_device **out, vy_error *e)
{
	host_device *h = calloc(1, sizeof(*h));
	if (!h)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot allocate its state");
	if (pthread_mutex_init(&h->lock, NULL) != 0) {
		free(h);
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot create a mutex");
	}
	h->capacity = capacity ? capacity : host_default_capacity();
	vy_u64map_init(&h->live);
	vy_u64map_init(&h->reserved);
	vy_u64map_init(&h->mapped);
	vy_u64map_init(&h->by_slot);
	vy_host_slabs_init(&h->slabs, HOST_SHARE_GRANULARITY); /* true: 2 MiB holds 1 MiB twice */
	h->base.ops = &host_ops;
	h->base.share = &host_share;
	h->base.keep = &vy_host_keep;
	vy_device_info *i = &h->base.info;
	i->backend = "host";
	snprintf(i->name, sizeof(i->name), "host memory");
	i->total_bytes = h->capacity;
	i->share_granularity = HOST_SHARE_GRANULARITY;
	*out = &h->base;
	return VY_OK;
}
