/* A mount's tier state (tier.h). */
#include "tier/tier.h"

#include <stdlib.h>
#include <string.h>

#include "core/grow.h"

vy_err vy_tier_open_mount(vy_tier **out, const char *dir, uint64_t delay_ms, vy_error *e)
{
	vy_tier *t = calloc(1, sizeof(*t));
	if (!t)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the backing directory's state");
	vy_err rc = vy_tier_dir_open(&t->dir, dir, e);
	if (rc != VY_OK) {
		free(t);
		return rc;
	}
	vy_u64map_init(&t->ids);
	if (!vy_tier_cache_init(&t->cache) || pthread_mutex_init(&t->gone_lock, NULL) != 0) {
		vy_tier_dir_close(&t->dir);
		free(t);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the backing directory's state");
	}
	t->delay_ms = delay_ms;
	*out = t;
	return VY_OK;
}

void vy_tier_close(vy_tier *t)
{
	if (!t)
		return;
	vy_u64map_destroy(&t->ids);
	vy_tier_cache_destroy(&t->cache);
	for (size_t i = 0; i < t->ngone; i++)
		free(t->gone[i].name);
	free(t->gone);
	pthread_mutex_destroy(&t->gone_lock);
	vy_tier_dir_close(&t->dir);
	free(t);
}

void vy_tier_gone(vy_tier *t, vy_tier_item *it)
{
	vy_tier_cache_remove(&t->cache, it);
	vy_tier_cache_clean(&t->cache, it);
	uint64_t d = it->dirty.count * VY_TIER_UNIT;
	if (d)
		atomic_fetch_sub(&t->stats.dirty_bytes, d);
	vy_tier_units_clear(&it->dirty, 0, UINT64_MAX);
}

void vy_tier_forget(vy_tier *t, vy_tier_item *it)
{
	if (!it)
		return;
	vy_tier_gone(t, it);
	vy_tier_item_free(it);
}

bool vy_tier_gone_add(vy_tier *t, uint64_t parent, const char *name)
{
	char *copy = strdup(name);
	pthread_mutex_lock(&t->gone_lock);
	bool ok = copy && vy_grow((void **)&t->gone, &t->capgone, t->ngone, sizeof(*t->gone));
	if (ok)
		t->gone[t->ngone++] = (struct vy_tier_gone_name){parent, copy};
	pthread_mutex_unlock(&t->gone_lock);
	if (!ok)
		free(copy);
	return ok;
}

size_t vy_tier_gone_take(vy_tier *t, struct vy_tier_gone_name *out, size_t max)
{
	pthread_mutex_lock(&t->gone_lock);
	size_t n = t->ngone < max ? t->ngone : max;
	memcpy(out, t->gone + t->ngone - n, n * sizeof(*out));
	t->ngone -= n;
	pthread_mutex_unlock(&t->gone_lock);
	return n;
}
