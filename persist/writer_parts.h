/* The writer's insides, shared by writer.c (the records) and request.c (a
 * request's records kept together with its answer). Not for fs/. */
#ifndef VY_PERSIST_WRITER_PARTS_H
#define VY_PERSIST_WRITER_PARTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "persist/shadow.h"
#include "persist/writer.h"

struct vy_inode;

/* The scratch a record is built in: the largest is an inode's xattrs. */
#define SCRATCH_BYTES (VY_XATTR_TOTAL_MAX + 64 * 1024)

typedef struct vy_persist {
	pthread_mutex_t lock;
	struct vy_state *st;
	vy_shadow shadow;
	uint8_t *scratch;
	uint32_t takeover; /* this daemon's place in the mount's line (answers are keyed by it) */
	bool broken; /* a record was lost: the mount no longer survives */
	bool said_lost; /* a file's memory the keeper does not hold, logged once */
	vy_persist_counts counts;
} vy_persist;

/* Append one record to the log and make it the shadow's; checkpoint when
 * the log is half full. Lock held. */
void vy_persist_commit(vy_persist *p, uint16_t type, const void *payload, uint32_t len);
/* A record could not be kept: the mount no longer survives (logged once). Lock held. */
void vy_persist_lose(vy_persist *p, const vy_error *e);
/* The same, for a request's records that host memory could not hold. */
void vy_persist_no_memory(vy_persist *p);

/* The records read from a live inode (persist/format.h), into `out`: an
 * inode's (sizeof(vy_p_inode) + its target, at most 4096) and its lookup
 * count (sizeof(vy_p_lookup)). */
uint32_t vy_persist_inode_record(struct vy_inode *in, uint8_t *out);
void vy_persist_lookup_record(const struct vy_inode *in, uint8_t *out);

#endif
