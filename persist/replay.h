/* A successor's side: the namespace made again from the kept state (the
 * published image, then the log after it), with each regular file's buffer
 * made of the same memory the keeper held (core/store_keep.h). */
#ifndef VY_PERSIST_REPLAY_H
#define VY_PERSIST_REPLAY_H

#include <stdint.h>

#include "core/err.h"
#include "core/store_keep.h"
#include "persist/replay_counts.h"
#include "persist/shadow.h"

struct vy_fs;
struct vy_state;

/* Into `fs` (fresh from vy_fs_init, nothing served yet) from `st`, taking
 * memory from `mem`; from a standby's copy `pre` when it is current (NULL:
 * none). *shadow is left matching fs, for vy_persist_start.
 * VY_ENOENT: the region keeps no namespace yet (the first daemon died
 * before it kept one): fs is untouched. Another error: fs may be partly
 * made; the caller serves no such namespace. */
struct vy_preload;
vy_err vy_replay(struct vy_fs *fs, struct vy_state *st, vy_keep_fds *mem, struct vy_preload *pre, vy_shadow *shadow,
		 vy_replay_counts *counts, vy_error *e);

#endif
