/* The host backend's memory kept for a successor (core/device_keep.h):
 * every dedicated memfd and every slab is one keeper slot; a slab's
 * slots are pieces `at` their offset in it. Lock held wherever the
 * sink is called (host_impl.h). */
#include "core/host_impl.h"
#include "core/checked.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIX_LAYOUT "adopt only layouts vy_store_keep_layout wrote, with the fds the keeper handed; report this bug"
#define SLAB_TAG 1u /* in by_slot: a slab's base | 1; an allocation's pointer is page aligned */

static host_device *host_of(vy_device *d)
{
	return (host_device *)d;
}

/* Hand one fd to the sink and record its slot: 0 when it is not kept. */
static vy_keep_slot add(host_device *h, int fd, uint64_t what)
{
	vy_keep_slot slot = h->sink->add(h->sink->ctx, fd);
	if (slot && !vy_u64map_put(&h->by_slot, slot, (void *)(uintptr_t)what)) {
		h->sink->drop(h->sink->ctx, slot); /* no record, no keeping */
		slot = 0;
	}
	return slot;
}

static void drop(host_device *h, vy_keep_slot slot)
{
	if (!slot)
		return;
	vy_u64map_remove(&h->by_slot, slot);
	if (h->sink)
		h->sink->drop(h->sink->ctx, slot);
}

/* A slab not kept yet (made before the keeper took them, or one the
 * sink could not take then) is handed now. */
static void keep_slab(host_device *h, vy_dptr p)
{
	int64_t fd;
	uint64_t base;
	uint32_t *tag = vy_slabs_tag(&h->slabs, p, &fd, &base);
	if (tag && !*tag)
		*tag = add(h, (int)fd, base | SLAB_TAG);
}

void vy_host_keep_made(host_device *h, host_alloc_rec *r, vy_dptr p)
{
	if (!h->sink)
		return;
	if (r->fd >= 0)
		r->slot = add(h, r->fd, p);
	else
		keep_slab(h, p);
}

void vy_host_keep_freed(host_device *h, const host_alloc_rec *r, vy_keep_slot slab_gone)
{
	drop(h, r->fd >= 0 ? r->slot : slab_gone);
}

static vy_err host_keep_start(vy_device *d, const vy_keep_sink *sink, vy_error *e)
{
	host_device *h = host_of(d);
	pthread_mutex_lock(&h->lock);
	if (h->sink) {
		pthread_mutex_unlock(&h->lock);
		return vy_fail(e, VY_EINVAL, "start keeping a device's memory once", "host backend: its memory is kept already");
	}
	h->sink = sink;
	uint64_t key;
	void *value;
	for (size_t i = 0; vy_u64map_next(&h->live, &i, &key, &value);) {
		host_alloc_rec *r = value;
		if (r->fd >= 0 && !r->slot)
			r->slot = add(h, r->fd, key);
		else if (r->fd < 0)
			keep_slab(h, key);
	}
	pthread_mutex_unlock(&h->lock);
	return VY_OK;
}

static void host_keep_forget(vy_device *d, vy_dptr p)
{
	host_device *h = host_of(d);
	pthread_mutex_lock(&h->lock);
	host_alloc_rec *r = vy_u64map_get(&h->live, p);
	if (r && r->fd >= 0) {
		drop(h, r->slot);
		r->slot = 0;
	}
	pthread_mutex_unlock(&h->lock);
}

static bool host_keep_where(vy_device *d, vy_dptr p, vy_keep_slot *slot, uint64_t *at)
{
	host_device *h = host_of(d);
	pthread_mutex_lock(&h->lock);
	host_alloc_rec *r = vy_u64map_get(&h->live, p);
	int64_t fd;
	uint64_t base = 0;
	uint32_t *tag = r && r->fd < 0 ? vy_slabs_tag(&h->slabs, p, &fd, &base) : NULL;
	if (r) {
		*slot = r->fd >= 0 ? r->slot : tag ? *tag : 0;
		*at = r->fd >= 0 ? 0 : p - base;
	}
	pthread_mutex_unlock(&h->lock);
	return r != NULL;
}

/* The fd handed in `slot`, or why there is none. */
static vy_err handed(const vy_keep_fds *fds, vy_keep_slot slot, int *fd, vy_error *e)
{
	*fd = slot < fds->n ? fds->fd[slot] : -1;
	if (*fd < 0)
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT, "host backend: keeper slot %u holds no memory this successor was handed",
			       slot);
	return VY_OK;
}

/* A dedicated memfd: all of it, as host_alloc made it (sealed at its size,
 * so no holder can shrink it under the mapping). */
static vy_err adopt_memfd(vy_keep_slot slot, uint64_t at, uint64_t bytes, vy_keep_fds *fds,
			  void **out, vy_error *e)
{
	int fd;
	vy_err rc = handed(fds, slot, &fd, e);
	if (rc != VY_OK)
		return rc;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	if (at != 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != bytes || seals < 0 ||
	    (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT,
			       "host backend: keeper slot %u is not a sealed allocation of %llu bytes (at %llu)", slot,
			       (unsigned long long)bytes, (unsigned long long)at);
	void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot map keeper slot %u: %s", slot,
			       strerror(errno));
	*out = p;
	return VY_OK;
}

/* A slab's slot: the slab's first adopted slot takes its fd (checked to be
 * a slab's size) and maps it, the next ones find the slab by its slot
 * (`was`). */
static vy_err adopt_slab(host_device *h, vy_keep_slot slot, uint64_t was, uint64_t at, uint64_t bytes,
			 const vy_keep_fds *fds, void **out, vy_error *e)
{
	int fd = -1, err = 0;
	uint64_t base = was & ~(uint64_t)SLAB_TAG, n = h->slabs.slab_bytes;
	struct stat st;
	if (!was) {
		vy_err rc = handed(fds, slot, &fd, e);
		if (rc != VY_OK)
			return rc;
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != n)
			return vy_fail(e, VY_EINVAL, FIX_LAYOUT, "host backend: keeper slot %u is not a slab of %llu bytes",
				       slot, (unsigned long long)n);
		err = vy_host_slab_map(fd, n, &base);
	} else if (!vy_slabs_tag(&h->slabs, base, &(int64_t){0}, &(uint64_t){0})) {
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT, "host backend: keeper slot %u names no slab adopted here", slot);
	}
	uint64_t p = err ? 0 : vy_slabs_adopt(&h->slabs, base, fd, slot, at, bytes);
	if (!p && !err)
		err = errno;
	if (!p && !was && base)
		munmap((void *)(uintptr_t)base, (size_t)n);
	if (err == EINVAL)
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT,
			       "host backend: %llu bytes at %llu of keeper slot %u are no free slot of its slab",
			       (unsigned long long)bytes, (unsigned long long)at, slot);
	if (err)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot map a slab: %s", strerror(err));
	*out = (void *)(uintptr_t)p;
	return VY_OK;
}

/* A slot of an adopted slab free again; a slab that empties is unmapped,
 * its fd returned (else -1). */
static int unadopt_slab(host_device *h, void *p)
{
	uint64_t base;
	int64_t fd;
	if (!vy_slabs_unadopt(&h->slabs, (uint64_t)(uintptr_t)p, &base, &fd))
		return -1;
	munmap((void *)(uintptr_t)base, (size_t)h->slabs.slab_bytes);
	return (int)fd;
}

/* Undo adopt_slab or adopt_memfd. A slab this adoption made (`was` 0)
 * still has its fd in fds; one adopted before that goes now gives its fd
 * back there, and its slot is nobody's here again. */
static void unmake(host_device *h, void *p, uint64_t bytes, bool slab, vy_keep_slot slot, uint64_t was,
		   vy_keep_fds *fds)
{
	if (!slab) {
		munmap(p, (size_t)bytes);
		return;
	}
	int fd = unadopt_slab(h, p);
	if (fd < 0 || !was)
		return;
	vy_u64map_remove(&h->by_slot, slot);
	if (slot < fds->n && fds->fd[slot] < 0)
		fds->fd[slot] = fd;
	else
		close(fd);
}

static vy_err host_keep_adopt(vy_device *d, vy_keep_slot slot, uint64_t at, uint64_t bytes, vy_keep_fds *fds,
			      vy_dptr *out, vy_error *e)
{
	host_device *h = host_of(d);
	if (bytes == 0 || bytes > SIZE_MAX || slot == 0)
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT, "host backend: cannot adopt %llu bytes of keeper slot %u",
			       (unsigned long long)bytes, slot);
	host_alloc_rec *r = malloc(sizeof(*r));
	if (!r)
		return vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot record an allocation");
	*r = (host_alloc_rec){.bytes = bytes, .fd = -1};
	pthread_mutex_lock(&h->lock);
	vy_err rc = VY_OK;
	void *p = NULL;
	uint64_t was = (uint64_t)(uintptr_t)vy_u64map_get(&h->by_slot, slot), used;
	bool slab = vy_slabs_take(&h->slabs, bytes);
	if (!vy_add_u64(h->used, bytes, &used) || used > h->capacity)
		rc = vy_fail(e, VY_ENOSPC, "mount the successor with the host_memory its predecessor had",
			     "host backend: %llu bytes kept do not fit: %llu of %llu in use", (unsigned long long)bytes,
			     (unsigned long long)h->used, (unsigned long long)h->capacity);
	else if (was && (!slab || !(was & SLAB_TAG)))
		rc = vy_fail(e, VY_EINVAL, FIX_LAYOUT, "host backend: keeper slot %u is adopted already as another allocation",
			     slot);
	else
		rc = slab ? adopt_slab(h, slot, was, at, bytes, fds, &p, e) : adopt_memfd(slot, at, bytes, fds, &p, e);
	if (rc == VY_OK && !vy_u64map_put(&h->live, (uint64_t)(uintptr_t)p, r)) {
		unmake(h, p, bytes, slab, slot, was, fds);
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot record an allocation");
	}
	uint64_t what = slab ? ((uint64_t)(uintptr_t)p & ~(h->slabs.slab_bytes - 1)) | SLAB_TAG : (uint64_t)(uintptr_t)p;
	if (rc == VY_OK && !was && !vy_u64map_put(&h->by_slot, slot, (void *)(uintptr_t)what)) {
		vy_u64map_remove(&h->live, (uint64_t)(uintptr_t)p);
		unmake(h, p, bytes, slab, slot, was, fds);
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "host backend: cannot record a kept slot");
	}
	if (rc == VY_OK) {
		if (!slab) {
			r->fd = fds->fd[slot];
			r->slot = slot;
		}
		if (!was)
			fds->fd[slot] = -1; /* the allocation's, or its slab's, now */
		h->used = used;
	}
	pthread_mutex_unlock(&h->lock);
	if (rc != VY_OK) {
		free(r);
		return rc;
	}
	*out = (vy_dptr)(uintptr_t)p;
	return VY_OK;
}

static void host_keep_unadopt(vy_device *d, vy_dptr p, vy_keep_fds *fds)
{
	host_device *h = host_of(d);
	pthread_mutex_lock(&h->lock);
	host_alloc_rec *r = vy_u64map_remove(&h->live, p);
	int fd = -1;
	vy_keep_slot slot = 0;
	if (r && r->fd >= 0) {
		munmap((void *)(uintptr_t)p, (size_t)r->bytes);
		fd = r->fd;
		slot = r->slot;
	} else if (r) {
		int64_t sfd;
		uint64_t base;
		uint32_t *tag = vy_slabs_tag(&h->slabs, p, &sfd, &base);
		slot = tag ? *tag : 0;
		fd = unadopt_slab(h, (void *)(uintptr_t)p);
	}
	if (r)
		h->used -= r->bytes;
	if (fd >= 0) { /* the slot's memory is nobody's here again */
		vy_u64map_remove(&h->by_slot, slot);
		if (slot < fds->n && fds->fd[slot] < 0)
			fds->fd[slot] = fd;
		else
			close(fd);
	}
	pthread_mutex_unlock(&h->lock);
	free(r);
}

const vy_device_keep_ops vy_host_keep = {
	.start = host_keep_start,
	.forget = host_keep_forget,
	.where = host_keep_where,
	.adopt = host_keep_adopt,
	.unadopt = host_keep_unadopt,
};
