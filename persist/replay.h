/* A successor's side: the namespace made again from the kept state (the
 * published image, then the log after it), with each regular file's buffer
 * made of the same memory the keeper held (core/store_keep.h). */
#ifndef VY_PERSIST_REPLAY_H
#define VY_PERSIST_REPLAY_H

#include <stdint.h>

#include "core/err.h"
#include "core/store_keep.h"
#include "persist/shadow.h"

struct vy_fs;
struct vy_state;

typedef struct vy_replay_counts {
	uint64_t records;  /* from the image and the log */
	uint64_t followed; /* of those, applied by a standby before the death (persist/preload.h) */
	uint64_t inodes;   /* made again (the root not counted) */
	uint64_t names;
	uint64_t files;    /* regular files whose memory was taken back */
	uint64_t lost;     /* regular files whose memory could not be: emptied, logged */
	uint64_t dropped;  /* inodes nothing held: no name, no handle, no kernel reference (freed) */
	uint64_t handles;  /* open files and directories taken back */
	uint64_t handles_lost; /* that could not be (their programs get EBADF) */
	uint64_t lookups_lost; /* kernel references to inodes not made again (modules being written) */
	uint64_t mappings;     /* files client programs map, held again */
	uint64_t mappings_lost; /* mappings of files not made again */
	uint64_t modules;       /* module files made again and loaded */
	uint64_t load_us, memory_us; /* the state's load and the files' memory taken back, in microseconds */
	uint64_t inodes_us, names_us; /* the inodes made, and the names between them, in microseconds */
	uint64_t modules_lost;  /* that could not be (logged) */
} vy_replay_counts;

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
