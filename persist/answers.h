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
/* `g` with `reply` (g->reply_len bytes; 0: none) is now its thread's last
 * answer; false: no memory (the table as it was). */
bool vy_answers_set(vy_u64map *m, const vy_p_group *g, const void *reply);
/* The answer kept for request `unique` (its reply follows it), or NULL. */
const vy_p_group *vy_answers_find(const vy_u64map *m, uint64_t unique);
/* Request `unique`'s reply, kept by `thread` of daemon `takeover`, was
 * written: it is no longer an answer (O(1): the thread's own entry). */
void vy_answers_sent(vy_u64map *m, uint32_t takeover, uint32_t thread, uint64_t unique);
/* A successor answered request `unique` from its kept reply. */
void vy_answers_forget(vy_u64map *m, uint64_t unique);
/* Drop the answers of daemons more than VY_ANSWERS_TAKEOVERS before `now`. */
void vy_answers_prune(vy_u64map *m, uint32_t now);

static inline size_t vy_answer_bytes(const vy_p_group *g)
{
	return sizeof(*g) + g->reply_len;
}
/* Whether an entry holds an answer (a sent one holds none). */
static inline bool vy_answer_held(const vy_p_group *g)
{
	return g->reply_len != 0;
}

#endif
