/* A standby successor's copy of the kept namespace (docs/survive.md,
 * "Standby"): a shadow it keeps current while it waits, by following the
 * state region the serving daemon writes (state/follow.h) every
 * VY_PRELOAD_STEP_MS on a thread of its own. At the death the takeover
 * applies only the records written since the last step (vy_replay), where
 * a successor started after the death loads the whole image and log. */
#ifndef VY_PERSIST_PRELOAD_H
#define VY_PERSIST_PRELOAD_H
#include "persist/shadow.h"
#include "state/state.h"

#define VY_PRELOAD_STEP_MS 20

typedef struct vy_preload vy_preload;

/* Follow the region (region, A and B fds: taken, closed on failure too).
 * NULL when it cannot (logged): the takeover then loads everything. */
vy_preload *vy_preload_start(const vy_state_fds *fds);
/* Stop following: a step that started afresh is cut short (it would not
 * be used), one that applies new records ends first. */
void vy_preload_stop(vy_preload *p);
/* Stop with time to spare (a successor whose devices still open): the
 * step under way ends rather than being cut, and one more, on this
 * thread, reads what was written since. NULL is fine. */
void vy_preload_finish(vy_preload *p);
/* The copy made now, on this thread (fds taken as by vy_preload_start),
 * for a successor whose devices still open and that followed nothing;
 * NULL when it cannot (logged). */
vy_preload *vy_preload_load(const vy_state_fds *fds);
/* After vy_preload_stop or _finish, for a takeover of `st`: when the copy is a prefix
 * of it, move the shadow into *sh (initialised here) and say the last
 * record it holds and how many records made it. False: load everything. */
bool vy_preload_take(vy_preload *p, const vy_state *st, vy_shadow *sh, uint64_t *seq, uint64_t *records);
/* Stop, free; NULL is fine. */
void vy_preload_free(vy_preload *p);
#endif
