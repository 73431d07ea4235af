/* A small pool of non-blocking streams shared by all threads. Each piece of
 * work takes a stream, issues its copies, syncs it once and gives it back.
 * Streams are made on demand up to `max`; past that a taker waits. */
#ifndef VY_STREAMS_H
#define VY_STREAMS_H

#include <pthread.h>

#include "core/device.h"

typedef struct vy_streams {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	vy_device *dev;
	vy_stream **all;  /* every stream made */
	vy_stream **idle; /* a stack of the ones not in use */
	unsigned made;     /* streams in `all` */
	unsigned reserved; /* made, plus creations under way */
	unsigned idle_count, max;
} vy_streams;

vy_err vy_streams_init(vy_streams *sp, vy_device *dev, unsigned max, vy_error *e);
vy_err vy_streams_destroy(vy_streams *sp, vy_error *e);
vy_err vy_streams_acquire(vy_streams *sp, vy_stream **out, vy_error *e);
void vy_streams_release(vy_streams *sp, vy_stream *s);

#endif
