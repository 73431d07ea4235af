/* The host backend's slabs' memory (core/slab.h's backing): each slab one
 * memfd, mapped at an address aligned to its size, so a slot's slab is its
 * address rounded down. */
#include "core/host_impl.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

int vy_host_slab_map(int fd, uint64_t bytes, uint64_t *base)
{
	size_t n = (size_t)bytes;
	void *room = mmap(NULL, 2 * n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (room == MAP_FAILED)
		return errno;
	uintptr_t at = ((uintptr_t)room + n - 1) & ~(uintptr_t)(n - 1);
	void *p = mmap((void *)at, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
	int err = p == MAP_FAILED ? errno : 0;
	/* The reservation's parts before and after the slab. */
	if (at > (uintptr_t)room)
		munmap(room, at - (uintptr_t)room);
	uintptr_t end = (uintptr_t)room + 2 * n;
	if (end > at + n)
		munmap((void *)(at + n), end - (at + n));
	if (err) {
		munmap((void *)at, n);
		return err;
	}
	*base = at;
	return 0;
}

static int make(void *ctx, uint64_t bytes, uint64_t *base, int64_t *handle)
{
	(void)ctx;
	int fd = memfd_create("vyrefs-small", MFD_CLOEXEC), err = 0;
	if (fd < 0)
		return errno;
	if (ftruncate(fd, (off_t)bytes) != 0)
		err = errno;
	else
		err = vy_host_slab_map(fd, bytes, base);
	if (err) {
		close(fd);
		return err;
	}
	*handle = fd;
	return 0;
}

static void unmake(void *ctx, uint64_t base, int64_t handle)
{
	vy_slabs *s = ctx;
	munmap((void *)(uintptr_t)base, (size_t)s->slab_bytes);
	close((int)handle);
}

bool vy_host_slabs_init(vy_slabs *s, uint64_t slab_bytes)
{
	return vy_slabs_init(s, slab_bytes, &(vy_slab_backing){.ctx = s, .make = make, .unmake = unmake});
}
