/* POSIX ACLs on inodes (FUSE_POSIX_ACL): what the kernel leaves to the
 * filesystem when it enforces ACLs, done as tmpfs does it. ns/acl.c has the
 * format; this file the inode's side: setting, chmod, inheritance. */
#ifndef VY_ACL_INODE_H
#define VY_ACL_INODE_H

#include "ns/ns.h"

/* Who sets an ACL: its uid, and whether it is in a group (its fs gid or a
 * supplementary one), which only the layer above can tell. */
typedef struct vy_acl_caller {
	uid_t uid;
	bool (*in_group)(void *ctx, gid_t gid);
	void *ctx;
} vy_acl_caller;

/* setxattr of system.posix_acl_access or _default on `in` by `caller`:
 * validated (EINVAL: the caller says why), a default ACL on anything but a directory
 * refused (EACCES, as the kernel does). An access ACL sets the mode's rwx
 * bits (the mask is the group bits), drops set-group-ID for a caller
 * outside the file's group but root (posix_acl_update_mode), and is not
 * kept when the mode says it all. Takes the inode's locks; 0 or an errno
 * (ENOSPC past xattr_budget). `*mode_changed` says whether the mode moved. */
int vy_acl_inode_set(vy_inode *in, const char *name, const void *value, size_t size, int flags,
		     const vy_acl_caller *caller, bool *mode_changed);

/* chmod of `in` to `mode`: its access ACL's owner, mask (or group) and
 * other entries follow (posix_acl_chmod). The inode's write lock is held. */
void vy_acl_inode_chmod(vy_inode *in, mode_t mode);

/* A new inode's ACLs, worked out before it exists. */
typedef struct vy_acl_new {
	void *access, *dflt; /* NULL: none */
	size_t access_size, dflt_size;
} vy_acl_new;

/* For a new inode of `*mode` in `parent` (ns held; takes the parent's read
 * lock): with a default ACL, the inode's ACLs from it and the mode masked
 * by it (no umask, as posix_acl_create); without one, the mode less
 * `umask`. 0 or ENOMEM. */
int vy_acl_inode_inherit(vy_inode *parent, mode_t umask, mode_t *mode, vy_acl_new *out);

/* Store what vy_acl_inode_inherit worked out on the new inode: 0, or
 * ENOSPC past xattr_budget, or ENOMEM. */
int vy_acl_inode_give(vy_inode *in, const vy_acl_new *n);

void vy_acl_new_free(vy_acl_new *n);

#endif
