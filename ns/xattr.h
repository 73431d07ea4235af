/* Extended attributes stored per inode (the user.* namespace; the fs layer
 * decides which names are allowed). Not locked: the inode's lock covers. */
#ifndef VY_XATTR_H
#define VY_XATTR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#define VY_XATTR_VALUE_MAX 65536u
#define VY_XATTR_TOTAL_MAX (1u << 20) /* per inode, names and values */
/* The mount's total by default: xattr_budget. */
#define VY_XATTR_BUDGET_DEFAULT (64ull << 20)

typedef struct vy_xattr {
	char *name;
	void *value;
	size_t size;
} vy_xattr;

/* The mount's total, shared by every inode's set: each set counts its
 * bytes there, and a set that would take it past `max` is refused with
 * ENOSPC, so no user can grow the daemon's memory without bound. */
typedef struct vy_xattr_budget {
	_Atomic uint64_t used;
	uint64_t max;
} vy_xattr_budget;

/* Take n bytes of the budget (false: over its max, nothing taken), or
 * give them back. Symlink targets count here too (fs/ops.c). */
bool vy_xattr_budget_take(vy_xattr_budget *b, uint64_t n);
void vy_xattr_budget_give(vy_xattr_budget *b, uint64_t n);

typedef struct vy_xattrs {
	vy_xattr *v;
	size_t n, cap;
	size_t bytes; /* names and values together */
	vy_xattr_budget *budget; /* the mount's (NULL: none) */
} vy_xattrs;

void vy_xattrs_destroy(vy_xattrs *x);
const vy_xattr *vy_xattrs_get(const vy_xattrs *x, const char *name);
/* 0, or an errno: EEXIST (XATTR_CREATE and present), ENODATA
 * (XATTR_REPLACE and absent), ENOSPC (over the per-inode total), ERANGE
 * (value too large), ENOMEM. */
int vy_xattrs_set(vy_xattrs *x, const char *name, const void *value, size_t size, int flags);
/* 0 or ENODATA. */
int vy_xattrs_remove(vy_xattrs *x, const char *name);
/* The names, each NUL-terminated, as listxattr returns them; the length
 * needed is returned, and written only if it fits `cap`. */
size_t vy_xattrs_list(const vy_xattrs *x, char *buf, size_t cap);

#endif
