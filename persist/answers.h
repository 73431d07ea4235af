/* The kept answers: the reply each request thread gave last, kept with the
 * request's changes (a VY_P_GROUP record) until that thread's next group
 * says it was sent. A successor answers the kernel's resend of a request
 * (its unique with FUSE_UNIQUE_RESEND) from here instead of running it
 * again: a resent mkdir that the dead daemon made gets its entry, not
 * EEXIST. Keyed by (takeover, thread), so a thread's next answer replaces
 * its last and the table stays as small as the threads that answered.
 *
 * Not locked: the shadow's owner holds the lock that orders its records. */
#ifndef VY_PERSIST_ANSWERS_H
#define VY_PERSIST_ANSWERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/u64map.h"
#include "persist/format.h"

/* An answer kept by a daemon this many takeovers back is dropped: the
 * kernel resends at each takeover, and each successor answers what it
 * reads at once. */
#define VY_ANSWERS_TAKEOVERS 3u

void vy_answers_destroy(vy_u64map *m);
/* `g` (with its reply) is now its thread's last answer; false: no memory. */
bool vy_answers_set(vy_u64map *m, const vy_p_group *g);
/* The answer kept for request `unique`, or NULL. */
const vy_p_group *vy_answers_find(const vy_u64map *m, uint64_t unique);
/* Request `unique`'s answer reached the kernel: forget it. */
void vy_answers_sent(vy_u64map *m, uint64_t unique);
/* Drop the answers of daemons more than VY_ANSWERS_TAKEOVERS before `now`. */
void vy_answers_prune(vy_u64map *m, uint32_t now);

static inline size_t vy_answer_bytes(const vy_p_group *g)
{
	return sizeof(*g) + g->reply_len;
}

#endif
