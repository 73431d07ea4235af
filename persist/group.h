/* The records of the request a thread serves, waiting for its reply
 * (persist/request.h keeps them, as one group, with it). Thread-local: each
 * worker serves one request at a time. A record waits as its bytes, or as
 * the inode to read it from when the group is kept (an inode's attributes,
 * its lookup count: read then, so no other request's record of it is
 * older). Knows nothing of the writer: `owner` only tells whose group it is. */
#ifndef VY_PERSIST_GROUP_H
#define VY_PERSIST_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vy_inode;

/* This thread serves request `unique` for `owner` (0: records go at once). */
void vy_group_begin(const void *owner, uint64_t unique);
/* Whether records for `owner` wait in this thread's group. */
bool vy_group_on(const void *owner);
/* The request the group is for (0: none), and how many records wait. */
uint64_t vy_group_unique(void);
uint32_t vy_group_records(void);
/* Forget the group (kept or not). */
void vy_group_end(void);

/* Add a record's bytes; the inode to read one of `type` from (once per
 * inode and type); or, for inode `ino` freed, a VY_P_GONE and nothing
 * more read of it. False: no host memory (the record is not kept). */
bool vy_group_add(uint16_t type, const void *payload, uint32_t len);
bool vy_group_add_live(uint16_t type, struct vy_inode *in);
bool vy_group_gone(uint64_t ino);

/* Walk the records: *cursor from 0; each gives its type and either its
 * bytes or (*live non-NULL) the inode to read it from. */
bool vy_group_next(size_t *cursor, uint16_t *type, const void **bytes, uint32_t *len, struct vy_inode **live);

/* The thread's buffer to build the kept group in, at least `cap` bytes
 * (NULL: no host memory); bytes waiting for that, at most. */
uint8_t *vy_group_out(size_t cap);
size_t vy_group_out_bound(size_t reply_len);

/* The thread's id (gettid), by which answers are kept. */
uint32_t vy_group_thread(void);

#endif
