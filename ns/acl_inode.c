/* POSIX ACLs on inodes: set, chmod, inherit (see acl_inode.h). */
#include "ns/acl_inode.h"
#include "ns/acl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define RWX_ALL ((mode_t)(S_IRWXU | S_IRWXG | S_IRWXO))

int vy_acl_inode_set(vy_inode *in, const char *name, const void *value, size_t size, int flags,
		     const vy_acl_caller *caller, bool *mode_changed)
{
	*mode_changed = false;
	int err = vy_acl_valid(value, size);
	if (err)
		return err;
	bool access = !strcmp(name, VY_ACL_ACCESS);
	if (!access && vy_inode_type(in) != S_IFDIR)
		return EACCES; /* only directories have a default ACL */
	pthread_rwlock_wrlock(&in->lock);
	mode_t mode = 0;
	if (access) {
		pthread_mutex_lock(&in->meta);
		mode = in->mode;
		pthread_mutex_unlock(&in->meta);
		/* An ACL the mode can say is kept as the mode alone, as
		 * posix_acl_update_mode does: getfacl then shows the mode. */
		if (vy_acl_equiv_mode(value, size, &mode)) {
			err = vy_xattrs_set(&in->xattrs, name, value, size, flags);
		} else {
			err = vy_xattrs_remove(&in->xattrs, name);
			err = err == ENODATA ? 0 : err;
		}
	} else {
		err = vy_xattrs_set(&in->xattrs, name, value, size, flags);
	}
	if (!err) {
		pthread_mutex_lock(&in->meta);
		mode_t was = in->mode;
		if (access) {
			in->mode = (in->mode & ~RWX_ALL) | (mode & RWX_ALL);
			/* As the kernel: set-group-ID goes unless the caller is in
			 * the file's group or may override (uid 0 for CAP_FSETID). */
			if ((in->mode & S_ISGID) && caller->uid != 0 &&
			    !caller->in_group(caller->ctx, in->gid))
				in->mode &= ~(mode_t)S_ISGID;
		}
		vy_now(&in->ctime);
		*mode_changed = in->mode != was;
		pthread_mutex_unlock(&in->meta);
	}
	pthread_rwlock_unlock(&in->lock);
	return err;
}

void vy_acl_inode_chmod(vy_inode *in, mode_t mode)
{
	const vy_xattr *a = vy_xattrs_get(&in->xattrs, VY_ACL_ACCESS);
	if (a)
		vy_acl_chmod(a->value, a->size, mode); /* in place: same size */
}

int vy_acl_inode_inherit(vy_inode *parent, mode_t umask, mode_t *mode, vy_acl_new *out)
{
	memset(out, 0, sizeof(*out));
	pthread_rwlock_rdlock(&parent->lock);
	const vy_xattr *d = vy_xattrs_get(&parent->xattrs, VY_ACL_DEFAULT);
	int err = 0;
	if (d)
		err = vy_acl_inherit(d->value, d->size, mode, &out->access, &out->access_size, &out->dflt,
				     &out->dflt_size);
	else
		*mode &= ~(umask & RWX_ALL); /* the kernel leaves the umask to us (FUSE_DONT_MASK) */
	pthread_rwlock_unlock(&parent->lock);
	return err;
}

int vy_acl_inode_give(vy_inode *in, const vy_acl_new *n)
{
	int err = 0;
	pthread_rwlock_wrlock(&in->lock);
	if (n->access)
		err = vy_xattrs_set(&in->xattrs, VY_ACL_ACCESS, n->access, n->access_size, 0);
	if (!err && n->dflt)
		err = vy_xattrs_set(&in->xattrs, VY_ACL_DEFAULT, n->dflt, n->dflt_size, 0);
	pthread_rwlock_unlock(&in->lock);
	return err;
}

void vy_acl_new_free(vy_acl_new *n)
{
	free(n->access);
	free(n->dflt);
	memset(n, 0, sizeof(*n));
}
