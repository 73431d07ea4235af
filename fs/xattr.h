/* Extended attributes stored per inode (the user.* namespace; the fs layer
 * decides which names are allowed). Not locked: the inode's lock covers. */
#ifndef VY_XATTR_H
#define VY_XATTR_H

#include <stddef.h>

#define VY_XATTR_VALUE_MAX 65536u
#define VY_XATTR_TOTAL_MAX (1u << 20) /* per inode, names and values */

typedef struct vy_xattr {
	char *name;
	void *value;
	size_t size;
} vy_xattr;

typedef struct vy_xattrs {
	vy_xattr *v;
	size_t n, cap;
	size_t bytes; /* names and values together */
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
