/* Per-inode extended attributes: a small array, searched by name. */
#include "ns/xattr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

void vy_xattrs_destroy(vy_xattrs *x)
{
	if (x->budget)
		atomic_fetch_sub(&x->budget->used, x->bytes);
	for (size_t i = 0; i < x->n; i++) {
		free(x->v[i].name);
		free(x->v[i].value);
	}
	free(x->v);
	memset(x, 0, sizeof(*x));
}

static vy_xattr *find(const vy_xattrs *x, const char *name)
{
	for (size_t i = 0; i < x->n; i++)
		if (!strcmp(x->v[i].name, name))
			return &x->v[i];
	return NULL;
}

const vy_xattr *vy_xattrs_get(const vy_xattrs *x, const char *name)
{
	return find(x, name);
}

int vy_xattrs_set(vy_xattrs *x, const char *name, const void *value, size_t size, int flags)
{
	if (size > VY_XATTR_VALUE_MAX)
		return E2BIG;
	vy_xattr *a = find(x, name);
	if (a && (flags & XATTR_CREATE))
		return EEXIST;
	if (!a && (flags & XATTR_REPLACE))
		return ENODATA;
	size_t name_len = strlen(name) + 1;
	size_t bytes = x->bytes - (a ? a->size + name_len : 0) + size + name_len;
	if (bytes > VY_XATTR_TOTAL_MAX)
		return ENOSPC;
	/* Reserve the growth in the mount's total first; give back on failure. */
	uint64_t grow = bytes > x->bytes ? bytes - x->bytes : 0;
	if (grow && x->budget && atomic_fetch_add(&x->budget->used, grow) + grow > x->budget->max) {
		atomic_fetch_sub(&x->budget->used, grow);
		return ENOSPC;
	}
	void *copy = malloc(size ? size : 1);
	if (!copy) {
		if (grow && x->budget)
			atomic_fetch_sub(&x->budget->used, grow);
		return ENOMEM;
	}
	memcpy(copy, value, size);
	if (!a) {
		if (x->n == x->cap) {
			size_t cap = x->cap ? x->cap * 2 : 4;
			vy_xattr *v = realloc(x->v, cap * sizeof(*v));
			if (!v) {
				free(copy);
				if (grow && x->budget)
					atomic_fetch_sub(&x->budget->used, grow);
				return ENOMEM;
			}
			x->v = v;
			x->cap = cap;
		}
		char *n = strdup(name);
		if (!n) {
			free(copy);
			if (grow && x->budget)
				atomic_fetch_sub(&x->budget->used, grow);
			return ENOMEM;
		}
		a = &x->v[x->n++];
		*a = (vy_xattr){.name = n};
	}
	free(a->value);
	a->value = copy;
	a->size = size;
	if (x->budget && bytes < x->bytes)
		atomic_fetch_sub(&x->budget->used, x->bytes - bytes);
	x->bytes = bytes;
	return 0;
}

int vy_xattrs_remove(vy_xattrs *x, const char *name)
{
	vy_xattr *a = find(x, name);
	if (!a)
		return ENODATA;
	size_t gone = a->size + strlen(a->name) + 1;
	x->bytes -= gone;
	if (x->budget)
		atomic_fetch_sub(&x->budget->used, gone);
	free(a->name);
	free(a->value);
	*a = x->v[--x->n];
	return 0;
}

size_t vy_xattrs_list(const vy_xattrs *x, char *buf, size_t cap)
{
	size_t need = 0;
	for (size_t i = 0; i < x->n; i++)
		need += strlen(x->v[i].name) + 1;
	if (need <= cap) {
		size_t at = 0;
		for (size_t i = 0; i < x->n; i++) {
			size_t len = strlen(x->v[i].name) + 1;
			memcpy(buf + at, x->v[i].name, len);
			at += len;
		}
	}
	return need;
}

bool vy_xattr_budget_take(vy_xattr_budget *b, uint64_t n)
{
	if (atomic_fetch_add(&b->used, n) + n > b->max) {
		atomic_fetch_sub(&b->used, n);
		return false;
	}
	return true;
}

void vy_xattr_budget_give(vy_xattr_budget *b, uint64_t n)
{
	atomic_fetch_sub(&b->used, n);
}
