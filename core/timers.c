/* Timing event pairs, reused (see timers.h). */
#include "core/timers.h"

#include <stdlib.h>

vy_err vy_timers_init(vy_timers *t, vy_device *dev, vy_error *e)
{
	*t = (vy_timers){.dev = dev};
	if (pthread_mutex_init(&t->lock, NULL) != 0)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot create the timer list's mutex");
	return VY_OK;
}

static vy_err destroy_pair(vy_device *d, vy_timer *tm, vy_error *e)
{
	vy_err rc = VY_OK;
	vy_error err;
	if (tm->start)
		vy_error_keep_first(&rc, d->ops->event_destroy(d, tm->start, &err), e, &err);
	if (tm->end)
		vy_error_keep_first(&rc, d->ops->event_destroy(d, tm->end, &err), e, &err);
	free(tm);
	return rc;
}

vy_err vy_timers_destroy(vy_timers *t, vy_error *e)
{
	vy_err rc = VY_OK;
	while (t->idle) {
		vy_timer *tm = t->idle;
		t->idle = tm->next;
		vy_error err;
		vy_error_keep_first(&rc, destroy_pair(t->dev, tm, &err), e, &err);
	}
	pthread_mutex_destroy(&t->lock);
	return rc;
}

vy_err vy_timers_acquire(vy_timers *t, vy_timer **out, vy_error *e)
{
	pthread_mutex_lock(&t->lock);
	vy_timer *tm = t->idle;
	if (tm)
		t->idle = tm->next;
	pthread_mutex_unlock(&t->lock);
	if (tm) {
		*out = tm;
		return VY_OK;
	}
	tm = calloc(1, sizeof(*tm));
	if (!tm)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate a timer");
	vy_err rc = t->dev->ops->event_create(t->dev, &tm->start, e);
	if (rc == VY_OK)
		rc = t->dev->ops->event_create(t->dev, &tm->end, e);
	if (rc != VY_OK) {
		destroy_pair(t->dev, tm, NULL);
		return rc;
	}
	*out = tm;
	return VY_OK;
}

void vy_timers_release(vy_timers *t, vy_timer *tm)
{
	pthread_mutex_lock(&t->lock);
	tm->next = t->idle;
	t->idle = tm;
	pthread_mutex_unlock(&t->lock);
}

void vy_timers_discard(vy_timers *t, vy_timer *tm)
{
	destroy_pair(t->dev, tm, NULL);
}
