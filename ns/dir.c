/* Directory entries: a hash by name plus a creation-ordered array. */
#include "ns/dir.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static size_t bucket_of(const vy_dir *d, const char *name)
{
	return (size_t)(XXH3_64bits(name, strlen(name)) & (d->nbuckets - 1));
}

void vy_dir_init(vy_dir *d)
{
	memset(d, 0, sizeof(*d));
	d->next_cookie = 1;
}

void vy_dir_destroy(vy_dir *d)
{
	for (size_t i = 0; i < d->norder; i++)
		if (d->order[i].e) {
			free(d->order[i].e->name);
			free(d->order[i].e);
		}
	free(d->order);
	free(d->buckets);
	vy_dir_init(d);
}

vy_dirent *vy_dir_find(const vy_dir *d, const char *name)
{
	if (!d->nbuckets)
		return NULL;
	for (vy_dirent *e = d->buckets[bucket_of(d, name)]; e; e = e->next_in_bucket)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

static bool rehash(vy_dir *d, size_t nbuckets)
{
	vy_dirent **b = calloc(nbuckets, sizeof(*b));
	if (!b)
		return false;
	free(d->buckets);
	d->buckets = b;
	d->nbuckets = nbuckets;
	for (size_t i = 0; i < d->norder; i++) {
		vy_dirent *e = d->order[i].e;
		if (!e)
			continue;
		size_t k = bucket_of(d, e->name);
		e->next_in_bucket = b[k];
		b[k] = e;
	}
	return true;
}

/* Squeeze out removed slots; cookies, and so the order, stay. */
static void compact(vy_dir *d)
{
	size_t w = 0;
	for (size_t r = 0; r < d->norder; r++)
		if (d->order[r].e)
			d->order[w++] = d->order[r];
	d->norder = w;
	d->holes = 0;
}

/* The first slot whose cookie is >= cookie. */
static size_t lower_bound(const vy_dir *d, uint64_t cookie)
{
	size_t lo = 0, hi = d->norder;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d->order[mid].cookie < cookie)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Add name -> ino at `cookie` (>= 1, not a live entry's): at the end when
 * it is past every slot, else in its place in the order. */
static bool add_at(vy_dir *d, const char *name, uint64_t ino, uint64_t cookie)
{
	if ((d->count + 1) * 2 > d->nbuckets && !rehash(d, d->nbuckets ? d->nbuckets * 2 : 16))
		return false;
	if (d->norder == d->cap_order) {
		if (d->holes > d->norder / 2) {
			compact(d);
		} else {
			size_t cap = d->cap_order ? d->cap_order * 2 : 16;
			vy_dirslot *o = realloc(d->order, cap * sizeof(*o));
			if (!o)
				return false;
			d->order = o;
			d->cap_order = cap;
		}
	}
	size_t at = lower_bound(d, cookie);
	if (at < d->norder && d->order[at].cookie == cookie) {
		if (d->order[at].e)
			return false; /* a live entry's cookie */
		memmove(&d->order[at], &d->order[at + 1], (d->norder - at - 1) * sizeof(*d->order));
		d->norder--; /* a removed entry's slot: taken over below */
		d->holes--;
	}
	vy_dirent *e = calloc(1, sizeof(*e));
	char *copy = strdup(name);
	if (!e || !copy) {
		free(e);
		free(copy);
		return false;
	}
	e->name = copy;
	e->ino = ino;
	e->cookie = cookie;
	if (cookie >= d->next_cookie)
		d->next_cookie = cookie + 1;
	size_t k = bucket_of(d, name);
	e->next_in_bucket = d->buckets[k];
	d->buckets[k] = e;
	memmove(&d->order[at + 1], &d->order[at], (d->norder - at) * sizeof(*d->order));
	d->order[at] = (vy_dirslot){e->cookie, e};
	d->norder++;
	d->count++;
	return true;
}

bool vy_dir_add(vy_dir *d, const char *name, uint64_t ino)
{
	return add_at(d, name, ino, d->next_cookie);
}

bool vy_dir_add_at(vy_dir *d, const char *name, uint64_t ino, uint64_t cookie)
{
	if (cookie == 0 || cookie == UINT64_MAX || vy_dir_find(d, name))
		return false;
	return add_at(d, name, ino, cookie);
}

bool vy_dir_remove(vy_dir *d, const char *name)
{
	if (!d->nbuckets)
		return false;
	vy_dirent **p = &d->buckets[bucket_of(d, name)];
	while (*p && strcmp((*p)->name, name) != 0)
		p = &(*p)->next_in_bucket;
	vy_dirent *e = *p;
	if (!e)
		return false;
	*p = e->next_in_bucket;
	size_t i = lower_bound(d, e->cookie);
	if (i < d->norder && d->order[i].e == e) {
		d->order[i].e = NULL;
		d->holes++;
	}
	d->count--;
	free(e->name);
	free(e);
	if (d->holes > 32 && d->holes > d->norder / 2)
		compact(d);
	return true;
}

const vy_dirent *vy_dir_next(const vy_dir *d, uint64_t after)
{
	for (size_t i = lower_bound(d, after + 1); i < d->norder; i++)
		if (d->order[i].e)
			return d->order[i].e;
	return NULL;
}

const vy_dirent *vy_dir_naming(const vy_dir *d, uint64_t ino)
{
	for (const vy_dirent *e = vy_dir_next(d, 0); e; e = vy_dir_next(d, e->cookie))
		if (e->ino == ino)
			return e;
	return NULL;
}
