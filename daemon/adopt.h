/* A successor's start (survive=on): started by the keeper as `vyrefs
 * --adopt ARGS...` after its daemon died, it takes the keeper's fds, checks
 * the state region, makes the namespace again from it and serves the live
 * /dev/fuse without mounting. */
#ifndef VY_ADOPT_H
#define VY_ADOPT_H

#include "daemon/mount.h"

/* The process's exit status, as vy_mount_run's. */
int vy_adopt_run(const vy_mount_args *a);

/* The kept namespace and file memory into `fs` (fresh, nothing served
 * yet), then keeping both on: changes in `st`, memory through `km` (made
 * here over the keeper's link). What cannot be taken back is said in the
 * log; the mount serves on either way. Whether `km` was made (the caller
 * destroys it after its stores). */
struct vy_fs;
struct vy_state;
struct vy_keeper_adoption;
struct vy_keeper_link;
struct vy_keeper_memory;
bool vy_adopt_namespace(struct vy_fs *fs, struct vy_state *st, struct vy_keeper_adoption *ad,
			struct vy_keeper_link *link, struct vy_keeper_memory *km);

#endif
