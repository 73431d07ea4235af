/* The session-2 state region (region.h). */
#include "daemon/region.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

vy_region *vy_region_create(int *fd, char *why, size_t cap)
{
	*fd = memfd_create("vyrefs-state", MFD_CLOEXEC);
	if (*fd < 0 || ftruncate(*fd, VY_REGION_BYTES) != 0) {
		snprintf(why, cap, "cannot create the state region: %s (Fix: check the memory limits, or mount with "
				   "survive=off)", strerror(errno));
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return NULL;
	}
	vy_region *r = mmap(NULL, VY_REGION_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (r == MAP_FAILED) {
		snprintf(why, cap, "cannot map the state region: %s (Fix: mount with survive=off)", strerror(errno));
		close(*fd);
		*fd = -1;
		return NULL;
	}
	memcpy(r->magic, VY_REGION_MAGIC, sizeof(r->magic));
	r->bytes = VY_REGION_BYTES;
	return r;
}

vy_region *vy_region_map(int fd, char *why, size_t cap)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != VY_REGION_BYTES) {
		snprintf(why, cap, "the keeper's state region is not a %d-byte memory file", VY_REGION_BYTES);
		return NULL;
	}
	vy_region *r = mmap(NULL, VY_REGION_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		snprintf(why, cap, "cannot map the state region: %s", strerror(errno));
		return NULL;
	}
	uint32_t in = atomic_load(&r->init_in_len), out = atomic_load(&r->init_out_len);
	const char *bad = memcmp(r->magic, VY_REGION_MAGIC, sizeof(r->magic)) || r->bytes != VY_REGION_BYTES
				  ? "is of another format"
			  : in == 0 || out == 0 || in > VY_REGION_INIT_MAX || out > VY_REGION_INIT_MAX
				  ? "holds no INIT exchange (the first daemon died before it served)"
				  : NULL;
	if (bad) {
		snprintf(why, cap, "the keeper's state region %s", bad);
		munmap(r, VY_REGION_BYTES);
		return NULL;
	}
	return r;
}
