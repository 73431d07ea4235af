/* Items (item.h). */
#include "tier/item.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

vy_tier_item *vy_tier_item_new(uint64_t owner, uint64_t parent, const char *name)
{
	vy_tier_item *it = calloc(1, sizeof(*it));
	if (!it)
		return NULL;
	if (name && !(it->name = strdup(name))) {
		free(it);
		return NULL;
	}
	if (pthread_mutex_init(&it->flushing, NULL) != 0) {
		free(it->name);
		free(it);
		return NULL;
	}
	it->owner = owner;
	it->parent = parent;
	it->fd = -1;
	it->dfd = -1;
	return it;
}

bool vy_tier_item_rename(vy_tier_item *it, uint64_t parent, const char *name)
{
	char *copy = name ? strdup(name) : NULL;
	if (name && !copy)
		return false;
	free(it->name);
	it->name = copy;
	it->parent = parent;
	return true;
}

void vy_tier_item_saw(vy_tier_item *it, const struct stat *st)
{
	it->dev = st->st_dev;
	it->ino = st->st_ino;
	it->mtime = st->st_mtim;
	it->ctime = st->st_ctim;
	it->size = (uint64_t)st->st_size;
	__atomic_add_fetch(&it->saw_gen, 1, __ATOMIC_RELEASE);
}

bool vy_tier_item_changed(const vy_tier_item *it, const struct stat *st)
{
	return it->dev != st->st_dev || it->ino != st->st_ino || it->size != (uint64_t)st->st_size ||
	       it->mtime.tv_sec != st->st_mtim.tv_sec || it->mtime.tv_nsec != st->st_mtim.tv_nsec ||
	       it->ctime.tv_sec != st->st_ctim.tv_sec || it->ctime.tv_nsec != st->st_ctim.tv_nsec;
}

void vy_tier_item_free(vy_tier_item *it)
{
	if (!it)
		return;
	if (it->fd >= 0)
		close(it->fd);
	if (it->dfd >= 0)
		close(it->dfd);
	vy_tier_units_free(&it->present);
	vy_tier_units_free(&it->dirty);
	vy_tier_units_free(&it->suspect);
	vy_tier_units_free(&it->summed);
	vy_tier_units_free(&it->again);
	free(it->sums);
	pthread_mutex_destroy(&it->flushing);
	free(it->name);
	free(it);
}

bool vy_tier_item_sum(vy_tier_item *it, uint64_t i, uint64_t sum)
{
	if (i >= it->nsums) {
		uint64_t n = it->nsums ? it->nsums : 16;
		while (n <= i)
			n *= 2;
		uint64_t *s = realloc(it->sums, n * sizeof(*s));
		if (!s)
			return false;
		it->sums = s;
		it->nsums = n;
	}
	if (!vy_tier_units_set(&it->summed, i, i + 1))
		return false;
	it->sums[i] = sum;
	return true;
}

bool vy_tier_item_same(const vy_tier_item *it, uint64_t i, uint64_t sum)
{
	return i < it->nsums && vy_tier_units_has(&it->summed, i) && it->sums[i] == sum;
}
