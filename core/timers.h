/* Pairs of events that time a piece of device work, made on demand and
 * reused. Creating and destroying two events costs about as much as the
 * launch they would time (bench/cudaraw: raw.event_pair_us against
 * raw.launch_sync_us), so a control sequence takes a pair from here. */
#ifndef VY_TIMERS_H
#define VY_TIMERS_H

#include <pthread.h>

#include "core/device.h"

typedef struct vy_timer {
	vy_event *start, *end;
	struct vy_timer *next; /* in the idle list */
} vy_timer;

typedef struct vy_timers {
	pthread_mutex_t lock;
	vy_device *dev;
	vy_timer *idle;
} vy_timers;

vy_err vy_timers_init(vy_timers *t, vy_device *dev, vy_error *e);
/* Destroy every idle pair (none may be in use). */
vy_err vy_timers_destroy(vy_timers *t, vy_error *e);
vy_err vy_timers_acquire(vy_timers *t, vy_timer **out, vy_error *e);
/* Back for reuse: both events complete (their stream was synced). */
void vy_timers_release(vy_timers *t, vy_timer *tm);
/* Destroy a pair whose events may still be pending (a failed sync). */
void vy_timers_discard(vy_timers *t, vy_timer *tm);

#endif
