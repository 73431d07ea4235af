/* A successor's side, the loaded modules (fs/moddir_keep.h keeps them):
 * each module file of .vyre/modules/ made again with its number, name,
 * attributes and readdir place, its image read from the memfd the keeper
 * held, its log (NAME.log) with its own, and the module loaded on every
 * device as the dead daemon had it. replay.c calls it once the names are
 * made, before the kernel's references and handles are taken back. */
#ifndef VY_PERSIST_REPLAY_MODULES_H
#define VY_PERSIST_REPLAY_MODULES_H

#include "core/err.h"
#include "core/store_keep.h"
#include "persist/replay_counts.h"
#include "persist/shadow.h"

struct vy_fs;

/* Every kept module of `sh` into fs, its memfd taken out of `mem` (its
 * slot stays the keeper's). One that cannot be made or loaded again is
 * logged, counted in modules_lost and forgotten from `sh`; its memfd is
 * left in `mem` (dropped with what nothing took). VY_ENOMEM. */
vy_err vy_replay_modules(struct vy_fs *fs, vy_shadow *sh, vy_keep_fds *mem, vy_replay_counts *counts, vy_error *e);

#endif
