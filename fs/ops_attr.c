/* FUSE operations on attributes: getattr and setattr, xattrs (with ACLs
 * and user.vyre.*), chattr's flags (ioctl) and statfs. */
#include "fs/op.h"
#include "persist/writer.h"
#include "ns/acl.h"
#include "ns/acl_inode.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "fs/atime.h"
#include "fs/backed.h"
#include "fs/devices_xattr.h"
#include "fs/file.h"
#include "fs/kind.h"
#include "fs/space.h"
#include "fs/statx.h"
#include "proto/tier_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#define VYRE_XATTR_PREFIX "user.vyre."

void vy_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)fi;
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct stat st;
	pthread_rwlock_rdlock(&in->lock);
	vy_op_stat(fs, in, &st);
	pthread_rwlock_unlock(&in->lock);
	vy_statx_of(&in->btime, vy_inode_attr_flags(in)); /* for a statx asking for it (statx.h) */
	fuse_reply_attr(req, &st, vy_op_attr_timeout(in));
}

static void set_time(struct timespec *t, const struct timespec *given, bool now)
{
	if (now)
		vy_now(t);
	else
		*t = *given;
}

void vy_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
{
	(void)fi;
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* Nothing to set is a chown(-1, -1) (or a kill the kernel left to
	 * us): ctime only, as on tmpfs. */
	bool ctime_only = to_set == 0;
	const vy_kind_ops *ko = vy_kind_ops_of(in);
	bool resized = false; /* truncate(2) to the size it has changes no time */
	if (in->fixed && in->ino != FUSE_ROOT_ID) {
		/* No change, but a size its kind lets pass as nothing
		 * (`echo ... > .vyre/ctl`: kind.h, resize). */
		if (to_set != FUSE_SET_ATTR_SIZE || !ko->resize) {
			fuse_reply_err(req, EPERM);
			return;
		}
		if (!ko->resize(req, fs, in, attr->st_size, &resized))
			return;
		to_set = 0;
		ctime_only = false;
	}
	{
		/* chattr +i: nothing changes; +a: no size, mode, owner or
		 * given times (touching to now is an append's right). */
		pthread_mutex_lock(&in->meta);
		unsigned f = in->attr_flags;
		pthread_mutex_unlock(&in->meta);
		int kill = FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID;
		bool given_times = ((to_set & FUSE_SET_ATTR_ATIME) && !(to_set & FUSE_SET_ATTR_ATIME_NOW)) ||
				   ((to_set & FUSE_SET_ATTR_MTIME) && !(to_set & FUSE_SET_ATTR_MTIME_NOW));
		int changes = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE;
		if (((f & FS_IMMUTABLE_FL) && (to_set & ~kill)) ||
		    ((f & FS_APPEND_FL) && ((to_set & changes) || given_times))) {
			fuse_reply_err(req, EPERM);
			return;
		}
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && !ko->resize) {
		fuse_reply_err(req, ko->no_data);
		return;
	}
	/* backing=DIR: mode, owner and given times reach DIR first; its
	 * refusal (an NFS server's EPERM) leaves everything as it was. */
	int derr = fs->tier ? vy_backed_setattr(fs, in, to_set, attr) : 0;
	if (derr) {
		fuse_reply_err(req, derr);
		return;
	}
	if ((to_set & FUSE_SET_ATTR_SIZE) && !ko->resize(req, fs, in, attr->st_size, &resized))
		return;
	if ((to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) && !ko->keeps_caps) {
		pthread_rwlock_wrlock(&in->lock);
		vy_op_kill_caps(fs, in);
		pthread_rwlock_unlock(&in->lock);
	}
	if ((to_set & FUSE_SET_ATTR_MODE) && fs->acl) {
		/* The access ACL follows a chmod (the kernel forgets its copy). */
		pthread_rwlock_wrlock(&in->lock);
		vy_acl_inode_chmod(in, attr->st_mode);
		vy_persist_xattrs(fs, in);
		pthread_rwlock_unlock(&in->lock);
	}
	pthread_mutex_lock(&in->meta);
	mode_t was = in->mode;
	/* suid/sgid dropped as the kernel leaves to us; the reply carries it.
	 * A chown decides by the group the file had. */
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (resized)
			vy_now(&in->mtime);
		in->mode = vy_session_kill_suid(req, in->mode, in->gid, false);
	}
	if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
		in->mode = vy_session_kill_suid(req, in->mode, in->gid, true);
	if (to_set & FUSE_SET_ATTR_MODE)
		in->mode = (in->mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		in->uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		in->gid = attr->st_gid;
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW))
		set_time(&in->atime, &attr->st_atim, to_set & FUSE_SET_ATTR_ATIME_NOW);
	if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW))
		set_time(&in->mtime, &attr->st_mtim, to_set & FUSE_SET_ATTR_MTIME_NOW);
	const int size_only = FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID;
	if (to_set & FUSE_SET_ATTR_CTIME)
		in->ctime = attr->st_ctim;
	else if ((to_set & ~size_only) || resized || ctime_only || in->mode != was)
		vy_now(&in->ctime);
	pthread_mutex_unlock(&in->meta);
	vy_backed_times(fs, in); /* backing=DIR: its times are DIR's */
	vy_persist_inode(fs, in);
	struct stat st;
	pthread_rwlock_rdlock(&in->lock);
	vy_op_stat(fs, in, &st);
	pthread_rwlock_unlock(&in->lock);
	fuse_reply_attr(req, &st, vy_op_attr_timeout(in));
}

void vy_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	vy_fs *fs = fs_of(req);
	vy_atime_refresh(fs); /* a remount's flags (daemon/remount.c ends with a statfs) */
	struct statvfs sv;
	if (fs->tier) {
		/* Files live in DIR: df says its size and room (the device's
		 * budget is in .vyre/stats). */
		int err = vy_backed_statfs(fs, &sv);
		if (err)
			fuse_reply_err(req, err);
		else
			fuse_reply_statfs(req, &sv);
		return;
	}
	vy_space sp; /* fs/space.h: available is what a new file can get */
	vy_space_get(fs, &sp);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = sp.total / 4096;
	sv.f_bfree = sp.free / 4096;
	sv.f_bavail = sp.avail / 4096;
	pthread_mutex_lock(&fs->ns);
	sv.f_files = fs->cfg.max_inodes;
	uint64_t used = fs->inodes.count + fs->extra_links;
	sv.f_ffree = sv.f_favail = fs->cfg.max_inodes > used ? fs->cfg.max_inodes - used : 0;
	pthread_mutex_unlock(&fs->ns);
	sv.f_namemax = NAME_MAX_LEN;
	fuse_reply_statfs(req, &sv);
}

static int xattr_name_ok(const vy_fs *fs, const char *name)
{
	if (!strncmp(name, VYRE_XATTR_PREFIX, strlen(VYRE_XATTR_PREFIX)))
		return EPERM; /* vyrefs's own, read-only */
	/* As tmpfs: user., trusted. (the kernel lets only CAP_SYS_ADMIN at
	 * them; overlayfs keeps its own there), security. (file
	 * capabilities, LSM labels), and the two POSIX ACLs of system. when
	 * the kernel enforces them (FUSE_CAP_POSIX_ACL); stored without it,
	 * they would look enforced and not be. */
	if (fs->acl && vy_acl_name(name))
		return 0;
	if (strncmp(name, "user.", 5) != 0 && strncmp(name, "trusted.", 8) != 0 && strncmp(name, "security.", 9) != 0)
		return EOPNOTSUPP;
	return 0;
}

/* Whether the caller of `req` is in group `gid` (for ns/acl_inode.h). */
static bool req_in_group(void *req, gid_t gid)
{
	return vy_session_in_group(req, gid);
}

/* An inode's xattrs and attributes changed: kept for a successor. */
static void kept_xattrs(vy_fs *fs, vy_inode *in)
{
	pthread_rwlock_rdlock(&in->lock);
	vy_persist_xattrs(fs, in);
	pthread_rwlock_unlock(&in->lock);
	vy_persist_inode(fs, in);
}

/* survive=on: whether the inode's xattrs with this one set can be kept
 * (persist/writer.h); past that, the set is ENOSPC before anything
 * changes. `locked`: the caller holds the inode's lock. */
static bool xattr_fits(vy_fs *fs, vy_inode *in, const char *name, size_t size, bool locked)
{
	if (!locked)
		pthread_rwlock_rdlock(&in->lock);
	bool fits = vy_persist_xattr_fits(fs, in, name, size);
	if (!locked)
		pthread_rwlock_unlock(&in->lock);
	if (!fits)
		vy_log(LOG_NOTICE, "setxattr %s (inode %" PRIu64 ", %zu bytes): refused (ENOSPC): the inode's xattrs would "
				   "not fit a record of the kept state's log (Fix: keep fewer or smaller xattrs, or mount "
				   "with a larger survive_log)", name, in->ino, size);
	return fits;
}

void vy_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			int flags)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	int err = in ? xattr_name_ok(fs, name) : ENOENT;
	if (!err && in->fixed && in->ino != FUSE_ROOT_ID)
		err = EPERM;
	if (!err && vy_op_frozen(in, true))
		err = EPERM; /* chattr +i or +a */
	bool mode_changed = false;
	if (err == EPERM && in && !strcmp(name, VY_DEVICE_XATTR) && !(in->fixed && in->ino != FUSE_ROOT_ID) &&
	    !vy_op_frozen(in, true))
		err = vy_devices_set(fs, in, value, size, flags); /* a move, or a directory's placement */
	else if (err == EPERM && in && !strcmp(name, VY_PIN_XATTR))
		err = vy_backed_pin(fs, in, true); /* backing=DIR: never evicted */
	else if (!err && vy_acl_name(name)) {
		vy_acl_caller caller = {.uid = vy_session_caller_uid(req), .in_group = req_in_group, .ctx = req};
		err = vy_acl_valid(value, size);
		if (err) {
			/* The kernel checks ACLs before they come here: only a client
			 * speaking FUSE another way gets this far. */
			vy_log(LOG_WARNING, "setxattr %s (inode %" PRIu64 "): not a valid POSIX ACL of %zu bytes (Fix: set ACLs "
					    "with setfacl, which writes the kernel's form: version 2, whole 8-byte entries in tag order, "
					    "a mask where named entries are)", name, in->ino, size);
		} else if (!xattr_fits(fs, in, name, size, false)) {
			err = ENOSPC;
		} else if ((err = vy_backed_setxattr(fs, in, name, value, size, flags)) == 0) { /* DIR's first */
			err = vy_acl_inode_set(in, name, value, size, flags, &caller, &mode_changed);
		}
		if (!err && mode_changed) /* the kernel's cached mode goes */
			fuse_lowlevel_notify_inval_inode(fs->se, in->ino, -1, 0);
	} else if (!err && (err = vy_backed_setxattr(fs, in, name, value, size, flags)) == 0) { /* DIR's first */
		pthread_rwlock_wrlock(&in->lock);
		err = xattr_fits(fs, in, name, size, true) ? vy_xattrs_set(&in->xattrs, name, value, size, flags) : ENOSPC;
		pthread_rwlock_unlock(&in->lock);
		if (!err)
			vy_inode_touch(in, false);
		if (!err)
			vy_backed_times(fs, in); /* backing=DIR: as DIR stamped it */
	}
	if (!err)
		kept_xattrs(fs, in);
	fuse_reply_err(req, err);
}

static void reply_sized(fuse_req_t req, const void *data, size_t len, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (len > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, data, len);
}

void vy_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	char small[32];
	if (!strcmp(name, VY_DEVICE_XATTR)) {
		int err = vy_devices_get(fs, in, small, sizeof(small));
		if (err)
			fuse_reply_err(req, err);
		else
			reply_sized(req, small, strlen(small), size);
		return;
	}
	pthread_mutex_lock(&in->meta);
	bool may_write = vy_session_may_write(req, in->mode, in->uid, in->gid);
	pthread_mutex_unlock(&in->meta);
	const vy_kind_ops *ko = vy_kind_ops_of(in);
	pthread_rwlock_rdlock(&in->lock);
	if (ko->xattr && ko->xattr(fs, in, name, may_write, small, sizeof(small))) {
		pthread_rwlock_unlock(&in->lock);
		reply_sized(req, small, strlen(small), size);
		return;
	}
	/* Copy, unlock, then reply: after the reply the inode may go. */
	const vy_xattr *a = vy_xattrs_get(&in->xattrs, name);
	size_t len = a ? a->size : 0;
	void *copy = a ? malloc(len ? len : 1) : NULL;
	if (copy)
		memcpy(copy, a->value, len);
	pthread_rwlock_unlock(&in->lock);
	if (!a)
		fuse_reply_err(req, ENODATA);
	else if (!copy)
		fuse_reply_err(req, ENOMEM);
	else
		reply_sized(req, copy, len, size);
	free(copy);
}

void vy_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* user.vyre.* are read by name and not listed: listed, cp -a,
	 * rsync -X and tar --xattrs would try to copy them and fail. */
	pthread_rwlock_rdlock(&in->lock);
	size_t len = vy_xattrs_list(&in->xattrs, NULL, 0);
	char *buf = malloc(len + 1);
	if (!buf) {
		pthread_rwlock_unlock(&in->lock);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	vy_xattrs_list(&in->xattrs, buf, len);
	pthread_rwlock_unlock(&in->lock);
	reply_sized(req, buf, len, size);
	free(buf);
}

void vy_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	int err = in ? xattr_name_ok(fs, name) : ENOENT;
	if (!err && in->fixed && in->ino != FUSE_ROOT_ID)
		err = EPERM;
	if (!err && vy_op_frozen(in, true))
		err = EPERM; /* chattr +i or +a */
	if (err == EPERM && in && !strcmp(name, VY_DEVICE_XATTR) && !(in->fixed && in->ino != FUSE_ROOT_ID) &&
	    !vy_op_frozen(in, true))
		err = vy_devices_remove(fs, in);
	else if (err == EPERM && in && !strcmp(name, VY_PIN_XATTR))
		err = vy_backed_pin(fs, in, false);
	else if (!err && (err = vy_backed_setxattr(fs, in, name, NULL, 0, 0)) == 0) { /* DIR's first */
		pthread_rwlock_wrlock(&in->lock);
		err = vy_xattrs_remove(&in->xattrs, name);
		pthread_rwlock_unlock(&in->lock);
		if (!err)
			vy_inode_touch(in, false);
	}
	if (!err)
		kept_xattrs(fs, in);
	fuse_reply_err(req, err);
}

/* chattr and lsattr (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS; the kernel checks
 * CAP_LINUX_IMMUTABLE for i and a). Flags tmpfs does not keep are refused
 * with EOPNOTSUPP, as tmpfs refuses them. */
void vy_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi, unsigned flags,
		     const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	(void)arg;
	(void)fi;
	(void)flags;
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* The kernel reads the old flags as an fsxattr before setting. */
	static const struct {
		unsigned flag, xflag;
	} xmap[] = {{FS_IMMUTABLE_FL, FS_XFLAG_IMMUTABLE},
		    {FS_APPEND_FL, FS_XFLAG_APPEND},
		    {FS_NODUMP_FL, FS_XFLAG_NODUMP},
		    {FS_NOATIME_FL, FS_XFLAG_NOATIME}};
	unsigned cur, want;
	struct fsxattr fx;
	vy_error e;
	switch (cmd) {
	case VY_IOC_PREFETCH: /* backing=DIR: vyrefs prefetch */
		if (!in->tier || in->kind != VY_FILE)
			fuse_reply_err(req, EINVAL);
		else if (vy_backed_prepare(fs, in) != 0 || vy_backed_load_room(fs, in, 0, in->size, &e) != VY_OK)
			fuse_reply_err(req, vy_backed_prepare(fs, in) ? ENOENT : vy_err_errno(e.code));
		else
			fuse_reply_ioctl(req, 0, NULL, 0);
		return;
	case VY_IOC_EVICT: /* backing=DIR: vyrefs evict */
		cur = (unsigned)vy_backed_evict_one(fs, in);
		if (cur)
			fuse_reply_err(req, (int)cur);
		else
			fuse_reply_ioctl(req, 0, NULL, 0);
		return;
	case FS_IOC_FSGETXATTR:
		if (out_bufsz < sizeof(fx)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		memset(&fx, 0, sizeof(fx));
		pthread_mutex_lock(&in->meta);
		cur = in->attr_flags;
		pthread_mutex_unlock(&in->meta);
		for (size_t i = 0; i < sizeof(xmap) / sizeof(xmap[0]); i++)
			if (cur & xmap[i].flag)
				fx.fsx_xflags |= xmap[i].xflag;
		fuse_reply_ioctl(req, 0, &fx, sizeof(fx));
		return;
	case FS_IOC_FSSETXATTR:
		if (in_bufsz < sizeof(fx)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		memcpy(&fx, in_buf, sizeof(fx));
		want = 0;
		for (size_t i = 0; i < sizeof(xmap) / sizeof(xmap[0]); i++)
			if (fx.fsx_xflags & xmap[i].xflag) {
				want |= xmap[i].flag;
				fx.fsx_xflags &= ~xmap[i].xflag;
			}
		if (fx.fsx_xflags || fx.fsx_extsize || fx.fsx_projid || fx.fsx_cowextsize) {
			fuse_reply_err(req, EOPNOTSUPP);
			return;
		}
		break;
	case FS_IOC_GETFLAGS:
	case FS_IOC32_GETFLAGS:
		if (out_bufsz < sizeof(cur)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		pthread_mutex_lock(&in->meta);
		cur = in->attr_flags;
		pthread_mutex_unlock(&in->meta);
		fuse_reply_ioctl(req, 0, &cur, sizeof(cur));
		return;
	case FS_IOC_SETFLAGS:
	case FS_IOC32_SETFLAGS:
		if (in_bufsz < sizeof(want)) {
			fuse_reply_err(req, EINVAL);
			return;
		}
		memcpy(&want, in_buf, sizeof(want));
		if (want & ~VY_ATTR_FLAGS) {
			fuse_reply_err(req, EOPNOTSUPP);
			return;
		}
		break;
	default:
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (in->fixed && in->ino != FUSE_ROOT_ID) {
		fuse_reply_err(req, EPERM);
		return;
	}
	pthread_mutex_lock(&in->meta);
	in->attr_flags = want;
	vy_now(&in->ctime);
	pthread_mutex_unlock(&in->meta);
	vy_persist_inode(fs, in);
	fuse_lowlevel_notify_inval_inode(fs->se, in->ino, -1, 0); /* its cached ctime goes, +A too */
	fuse_reply_ioctl(req, 0, NULL, 0);
}
