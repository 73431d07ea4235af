/* Making and ending the filesystem's state (fs/fs.h): the root, .vyre/,
 * each device's launcher and modules, peer access; at the end the
 * reverse. The daemon's mount calls it; nothing in fs/ calls back here. */
#ifndef VY_FS_LIFECYCLE_H
#define VY_FS_LIFECYCLE_H

#include "fs/fs.h"

/* Build the root and .vyre/ over n opened cores (the caller keeps them),
 * with a launcher and modules for each. */
vy_err vy_fs_init(vy_fs *fs, vy_core *const *cores, unsigned n, const vy_config *cfg, vy_error *e);
/* Free every inode and its buffer. */
void vy_fs_destroy(vy_fs *fs);

#endif
