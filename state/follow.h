/* Following a region another process is writing: what a standby successor
 * does while it waits (docs/survive.md, "Standby"), so that at a death it
 * applies only the records written since its last step.
 *
 * The writer is never waited on and never written to. Each step copies
 * what it needs (the published image, the log's new bytes) into private
 * memory, then reads the root again: unchanged, no checkpoint ran, so no
 * trim, so no committed record changed under the copy, and what the copy
 * holds is handed over. Moved, the step is VY_EBUSY and what it handed
 * over is not to be used (the caller starts afresh at the next step's
 * reset). */
#ifndef VY_STATE_FOLLOW_H
#define VY_STATE_FOLLOW_H
#include "state/image.h"

typedef struct vy_state_follow {
	vy_state live;       /* the region, mapped: only read here */
	uint8_t *ring;       /* private copy of the log's bytes (live.cap, at their offsets) */
	bool loaded;         /* the caller holds image + records through `seq` of `root` */
	vy_state_root root;
	uint64_t seq;        /* the last record handed over */
	uint64_t end;        /* the log position after it */
	uint64_t steps, fresh; /* steps taken, and how many started afresh */
} vy_state_follow;

/* What a step hands over: reset (start afresh: forget all before), then
 * the image's sections, then log records in order. A callback's error
 * stops the step and is returned (the caller's to say what it means). */
typedef struct vy_state_follow_fns {
	void (*reset)(void *ctx);
	vy_state_section_fn section;
	vy_state_rec_fn record;
} vy_state_follow_fns;

/* Map the region (checked as a successor checks it: another format is
 * VY_ENOTSUP). On success f owns the fds; on failure they stay the caller's. */
vy_err vy_state_follow_open(const vy_state_fds *fds, vy_state_follow *f, vy_error *e);
/* One step: afresh when nothing is loaded or the root moved, else the
 * records after f->seq. VY_OK: f->loaded, f->seq current as of the step.
 * VY_EBUSY: a checkpoint ran meanwhile (f->loaded false). A log that does
 * not scan whole (a damaged region) is VY_EINVAL. */
vy_err vy_state_follow_step(vy_state_follow *f, const vy_state_follow_fns *fns, void *ctx, vy_error *e);
/* At a takeover, with the region adopted as `s`: true when what f handed
 * over is still a prefix of it (the same root), so the caller applies only
 * s's records after f->seq (vy_state_log_scan(s, root.seq, f->seq, ...)). */
bool vy_state_follow_current(const vy_state_follow *f, const vy_state *s);
/* Unmap, close the fds, free the copy; a zeroed f is fine. */
void vy_state_follow_close(vy_state_follow *f);
#endif
