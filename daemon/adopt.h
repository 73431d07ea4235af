/* A successor's start (survive=on): started by the keeper as `vyrefs
 * --adopt ARGS...` after its daemon died, it takes the keeper's fds, checks
 * the state region, makes the namespace again from it and serves the live
 * /dev/fuse without mounting. */
#ifndef VY_ADOPT_H
#define VY_ADOPT_H

#include "daemon/mount.h"

/* The process's exit status, as vy_mount_run's. */
int vy_adopt_run(const vy_mount_args *a);

#endif
