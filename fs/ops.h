/* The FUSE low-level operations over a vy_fs (the session's userdata). */
#ifndef VY_OPS_H
#define VY_OPS_H

#include "fs/fs.h"

extern const struct fuse_lowlevel_ops vy_fs_ops;

#endif
