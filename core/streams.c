/* Stream pool. */
#include "core/streams.h"

#include <stdlib.h>

vy_err vy_streams_init(vy_streams *sp, vy_device *dev, unsigned max, vy_error *e)
{
	*sp = (vy_streams){.dev = dev, .max = max ? max : 1};
	sp->all = calloc(sp->max, sizeof(*sp->all));
	sp->idle = calloc(sp->max, sizeof(*sp->idle));
	if (!sp->all || !sp->idle || pthread_mutex_init(&sp->lock, NULL) != 0) {
		free(sp->all);
		free(sp->idle);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the stream pool");
	}
	if (pthread_cond_init(&sp->freed, NULL) != 0) {
		pthread_mutex_destroy(&sp->lock);
		free(sp->all);
		free(sp->idle);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the stream pool");
	}
	return VY_OK;
}

vy_err vy_streams_destroy(vy_streams *sp, vy_error *e)
{
	vy_err first = VY_OK;
	for (unsigned i = 0; i < sp->made; i++) {
		vy_error err;
		vy_err rc = sp->dev->ops->stream_destroy(sp->dev, sp->all[i], &err);
		if (rc != VY_OK && first == VY_OK) {
			first = rc;
			if (e)
				*e = err;
		}
	}
	pthread_cond_destroy(&sp->freed);
	pthread_mutex_destroy(&sp->lock);
	free(sp->all);
	free(sp->idle);
	sp->all = sp->idle = NULL;
	sp->made = sp->reserved = sp->idle_count = 0;
	return first;
}

vy_err vy_streams_acquire(vy_streams *sp, vy_stream **out, vy_error *e)
{
	pthread_mutex_lock(&sp->lock);
	for (;;) {
		if (sp->idle_count > 0) {
			*out = sp->idle[--sp->idle_count];
			pthread_mutex_unlock(&sp->lock);
			return VY_OK;
		}
		if (sp->reserved < sp->max)
			break;
		pthread_cond_wait(&sp->freed, &sp->lock);
	}
	/* Reserve a place, then create outside the lock. */
	sp->reserved++;
	pthread_mutex_unlock(&sp->lock);
	vy_stream *s = NULL;
	vy_err rc = sp->dev->ops->stream_create(sp->dev, &s, e);
	pthread_mutex_lock(&sp->lock);
	if (rc != VY_OK) {
		sp->reserved--;
		pthread_cond_signal(&sp->freed);
	} else {
		sp->all[sp->made++] = s;
		*out = s;
	}
	pthread_mutex_unlock(&sp->lock);
	return rc;
}

void vy_streams_release(vy_streams *sp, vy_stream *s)
{
	pthread_mutex_lock(&sp->lock);
	sp->idle[sp->idle_count++] = s;
	pthread_cond_signal(&sp->freed);
	pthread_mutex_unlock(&sp->lock);
}
