/* What a successor's replay made again and what it could not, counted by
 * each of its parts (persist/replay.c and the replay_*.c it calls) for
 * the log and .vyre/stats. Its own header: the parts sit below
 * persist/replay.c, which calls them. */
#ifndef VY_PERSIST_REPLAY_COUNTS_H
#define VY_PERSIST_REPLAY_COUNTS_H

#include <stdint.h>

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

#endif
