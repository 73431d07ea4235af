/* Pinned host staging buffers in power-of-two buckets. */
#include "core/staging.h"
#include "core/checked.h"

#include <pthread.h>
#include <stdlib.h>

#define BUCKETS 64
#define MAX_SLOTS 1024

typedef struct bucket {
	void **slots; /* idle buffers of this size */
	size_t count, limit;
} bucket;

struct vy_staging {
	pthread_mutex_t lock;
	vy_device *dev;
	vy_telemetry *tel;
	uint64_t cap;
	uint64_t cached;
	bucket buckets[BUCKETS]; /* index: log2 of the size */
};

vy_err vy_staging_open(vy_device *dev, vy_telemetry *tel, uint64_t cache_cap, vy_staging **out, vy_error *e)
{
	vy_staging *st = calloc(1, sizeof(*st));
	if (!st)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the staging cache");
	if (pthread_mutex_init(&st->lock, NULL) != 0) {
		free(st);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot create the staging cache's mutex");
	}
	st->dev = dev;
	st->tel = tel;
	st->cap = cache_cap;
	vy_telemetry_set(tel, staging_cached_bytes, 0);
	*out = st;
	return VY_OK;
}

vy_err vy_staging_close(vy_staging *st, vy_error *e)
{
	if (!st)
		return VY_OK;
	vy_err first = VY_OK;
	for (int i = 0; i < BUCKETS; i++) {
		bucket *b = &st->buckets[i];
		for (size_t k = 0; k < b->count; k++) {
			vy_error err;
			vy_err rc = st->dev->ops->host_free(st->dev, b->slots[k], &err);
			if (rc != VY_OK && first == VY_OK) {
				first = rc;
				if (e)
					*e = err;
			}
		}
		free(b->slots);
	}
	vy_telemetry_set(st->tel, staging_cached_bytes, 0);
	pthread_mutex_destroy(&st->lock);
	free(st);
	return first;
}

static int log2_of(uint64_t pow2)
{
	return 63 - __builtin_clzll(pow2);
}

vy_err vy_staging_acquire(vy_staging *st, size_t bytes, vy_staging_buf *out, vy_error *e)
{
	uint64_t size;
	if (!vy_pow2_ceil_u64(bytes < VY_STAGING_MIN_BUCKET ? VY_STAGING_MIN_BUCKET : bytes, &size) || size > SIZE_MAX)
		return vy_fail(e, VY_EOVERFLOW, "transfer in smaller pieces",
			       "a %zu-byte staging buffer does not fit this machine", bytes);
	bucket *b = &st->buckets[log2_of(size)];
	pthread_mutex_lock(&st->lock);
	if (b->count > 0) {
		out->ptr = b->slots[--b->count];
		out->size = (size_t)size;
		st->cached -= size;
		vy_telemetry_set(st->tel, staging_cached_bytes, st->cached);
		pthread_mutex_unlock(&st->lock);
		vy_telemetry_add(st->tel, staging_hits, 1);
		return VY_OK;
	}
	pthread_mutex_unlock(&st->lock);
	vy_telemetry_add(st->tel, staging_misses, 1);
	void *p = NULL;
	vy_err rc = st->dev->ops->host_alloc(st->dev, (size_t)size, &p, e);
	if (rc != VY_OK)
		return rc;
	out->ptr = p;
	out->size = (size_t)size;
	return VY_OK;
}

bool vy_staging_acquire_counted(vy_staging *st, size_t bytes, _Atomic unsigned *held, unsigned cap,
				vy_staging_buf *out)
{
	if (atomic_fetch_add(held, 1) >= cap) {
		atomic_fetch_sub(held, 1);
		return false;
	}
	if (vy_staging_acquire(st, bytes, out, NULL) != VY_OK) {
		atomic_fetch_sub(held, 1);
		out->ptr = NULL;
		return false;
	}
	return true;
}

void vy_staging_release_counted(vy_staging *st, _Atomic unsigned *held, vy_staging_buf *buf)
{
	if (!buf->ptr)
		return;
	vy_staging_release(st, buf);
	atomic_fetch_sub(held, 1);
}

/* Keep the buffer if its bucket has a free slot and the cap has room. */
static int keep(vy_staging *st, vy_staging_buf *buf)
{
	bucket *b = &st->buckets[log2_of(buf->size)];
	if (st->cap < buf->size || st->cached > st->cap - buf->size)
		return 0;
	if (!b->slots) {
		uint64_t limit = st->cap / buf->size;
		b->limit = limit < 1 ? 1 : (limit > MAX_SLOTS ? MAX_SLOTS : (size_t)limit);
		b->slots = calloc(b->limit, sizeof(*b->slots));
		if (!b->slots)
			return 0;
	}
	if (b->count == b->limit)
		return 0;
	b->slots[b->count++] = buf->ptr;
	st->cached += buf->size;
	vy_telemetry_set(st->tel, staging_cached_bytes, st->cached);
	return 1;
}

void vy_staging_release(vy_staging *st, vy_staging_buf *buf)
{
	if (!buf->ptr)
		return;
	pthread_mutex_lock(&st->lock);
	int kept = keep(st, buf);
	pthread_mutex_unlock(&st->lock);
	/* A failed host free leaves nothing to undo: the memory is gone. */
	if (!kept)
		st->dev->ops->host_free(st->dev, buf->ptr, NULL);
	buf->ptr = NULL;
	buf->size = 0;
}
