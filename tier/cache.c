/* The least recently used order (cache.h): a doubly linked list. */
#include "tier/cache.h"

bool vy_tier_cache_init(vy_tier_cache *c)
{
	c->oldest = c->newest = NULL;
	c->count = 0;
	c->dirty = c->dirty_last = NULL;
	c->ndirty = 0;
	return pthread_mutex_init(&c->lock, NULL) == 0;
}

void vy_tier_cache_destroy(vy_tier_cache *c)
{
	pthread_mutex_destroy(&c->lock);
}

static void unlink_item(vy_tier_cache *c, vy_tier_item *it)
{
	if (it->older)
		it->older->newer = it->newer;
	else
		c->oldest = it->newer;
	if (it->newer)
		it->newer->older = it->older;
	else
		c->newest = it->older;
	it->older = it->newer = NULL;
	it->in_lru = false;
	c->count--;
}

void vy_tier_cache_touch(vy_tier_cache *c, vy_tier_item *it)
{
	pthread_mutex_lock(&c->lock);
	if (it->in_lru && c->newest == it) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	if (it->in_lru)
		unlink_item(c, it);
	it->older = c->newest;
	it->newer = NULL;
	if (c->newest)
		c->newest->newer = it;
	else
		c->oldest = it;
	c->newest = it;
	it->in_lru = true;
	c->count++;
	pthread_mutex_unlock(&c->lock);
}

void vy_tier_cache_remove(vy_tier_cache *c, vy_tier_item *it)
{
	pthread_mutex_lock(&c->lock);
	if (it->in_lru)
		unlink_item(c, it);
	pthread_mutex_unlock(&c->lock);
}

size_t vy_tier_cache_oldest(vy_tier_cache *c, size_t skip, uint64_t *out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&c->lock);
	vy_tier_item *it = c->oldest;
	for (; it && skip; skip--)
		it = it->newer;
	for (; it && n < max; it = it->newer)
		out[n++] = it->owner;
	pthread_mutex_unlock(&c->lock);
	return n;
}

void vy_tier_cache_dirty(vy_tier_cache *c, vy_tier_item *it, uint64_t now)
{
	pthread_mutex_lock(&c->lock);
	if (!it->on_dirty) {
		it->dirty_ns = now;
		it->dirty_prev = c->dirty_last;
		it->dirty_next = NULL;
		if (c->dirty_last)
			c->dirty_last->dirty_next = it;
		else
			c->dirty = it;
		c->dirty_last = it;
		it->on_dirty = true;
		c->ndirty++;
	}
	pthread_mutex_unlock(&c->lock);
}

void vy_tier_cache_clean(vy_tier_cache *c, vy_tier_item *it)
{
	pthread_mutex_lock(&c->lock);
	if (it->on_dirty) {
		if (it->dirty_prev)
			it->dirty_prev->dirty_next = it->dirty_next;
		else
			c->dirty = it->dirty_next;
		if (it->dirty_next)
			it->dirty_next->dirty_prev = it->dirty_prev;
		else
			c->dirty_last = it->dirty_prev;
		it->dirty_prev = it->dirty_next = NULL;
		it->on_dirty = false;
		it->dirty_ns = 0;
		c->ndirty--;
	}
	pthread_mutex_unlock(&c->lock);
}

size_t vy_tier_cache_due(vy_tier_cache *c, uint64_t due, uint64_t *out, size_t max)
{
	size_t n = 0;
	pthread_mutex_lock(&c->lock);
	for (vy_tier_item *it = c->dirty; it && n < max; it = it->dirty_next)
		if (it->dirty_ns <= due)
			out[n++] = it->owner;
	pthread_mutex_unlock(&c->lock);
	return n;
}
