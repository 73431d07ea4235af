/* A successor's side, what the kernel holds (replay.c calls it once the
 * inodes and names are made): the references it counts on each inode, and
 * the open files and directories it names by `fh`, taken back with the
 * same ids so a program's open fd reads on after the death. */
#ifndef VY_PERSIST_REPLAY_KERNEL_H
#define VY_PERSIST_REPLAY_KERNEL_H

#include "core/err.h"
#include "persist/replay.h"
#include "persist/shadow.h"

struct vy_fs;

/* Lookup counts and handles from `sh` into fs; a handle that cannot be
 * taken back (its inode is not made again, or is of another kind) is
 * dropped from `sh` and counted: the kernel's next request on it gets
 * EBADF. VY_ENOMEM. */
vy_err vy_replay_kernel_refs(struct vy_fs *fs, vy_shadow *sh, vy_replay_counts *counts, vy_error *e);

#endif
