/* statfs's space (df): every device's budget, what is free, and what new
 * files can get (see docs/fs.md, "statfs"). */
#ifndef VY_FS_SPACE_H
#define VY_FS_SPACE_H

#include "fs/fs.h"

typedef struct vy_space {
	uint64_t total; /* every device's budget summed */
	uint64_t free;  /* the budgets less live buffers (pooled bytes are free) */
	uint64_t avail; /* what new files can get with fallocate: each device's
			 * largest allocation now (core/store.h), summed */
} vy_space;

void vy_space_get(vy_fs *fs, vy_space *out);

#endif
