/* POSIX ACLs in their xattr form (system.posix_acl_access and
 * system.posix_acl_default): the kernel enforces them (FUSE_POSIX_ACL) and
 * leaves to the filesystem what tmpfs does in fs/posix_acl.c: keep them,
 * keep the mode in step, and inherit a directory's default ACL.
 *
 * The form (linux/posix_acl_xattr.h): a little-endian u32 version (2),
 * then entries of {u16 tag, u16 perm, u32 id}. Pure functions on that form,
 * no locks, no allocation but vy_acl_inherit's. */
#ifndef VY_ACL_H
#define VY_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define VY_ACL_ACCESS "system.posix_acl_access"
#define VY_ACL_DEFAULT "system.posix_acl_default"

/* Whether `name` is one of the two ACL xattrs. */
bool vy_acl_name(const char *name);

/* 0 when `value` is a valid ACL as the kernel's posix_acl_valid checks it
 * (version 2, a whole number of entries, at least one, tags in order
 * USER_OBJ, USER..., GROUP_OBJ, GROUP..., MASK, OTHER, a mask where named
 * entries are, permissions rwx only); EINVAL otherwise (EOPNOTSUPP for
 * another version, as the kernel answers). */
int vy_acl_valid(const void *value, size_t size);

/* The mode an access ACL gives (posix_acl_equiv_mode): `*mode`'s rwx bits
 * for owner, group (the mask when there is one) and other. Returns 1 when
 * the ACL says more than the mode can (named entries or a mask), 0 when it
 * is the mode and need not be kept. `value` must be valid. */
int vy_acl_equiv_mode(const void *value, size_t size, mode_t *mode);

/* chmod of a file with an access ACL (posix_acl_chmod_masq): the owner,
 * mask (group entry without one) and other entries take the mode's bits.
 * In place; `value` must be valid. */
void vy_acl_chmod(void *value, size_t size, mode_t mode);

/* A new inode's ACLs from its directory's default ACL (posix_acl_create):
 * `*mode`'s rwx bits are masked by the ACL and its entries by the mode.
 * On success *access (NULL: the mode says it all) and, for a directory,
 * *dflt (a copy of the default) are malloc'ed, with their sizes; 0 or
 * ENOMEM. `dflt_value` must be valid. */
int vy_acl_inherit(const void *dflt_value, size_t size, mode_t *mode, void **access, size_t *access_size,
		   void **dflt, size_t *dflt_size);

#endif
