/* FUSE low-level operations: namespace, attributes, data, xattrs, statfs.
 * Core errors become errnos here (vy_err_errno); the full message of a
 * failure the user must act on (ENOSPC, device errors) goes to the log. */
#include "fs/ops.h"
#include "fs/acl.h"
#include "fs/acl_inode.h"
#include "fs/session.h"
#include "fs/statx.h"
#include "fs/ctl_file.h"
#include "fs/moddir.h"
#include "core/transfer.h"
#include "fs/devices.h"
#include "fs/file.h"
#include "fs/log.h"
#include "fs/space.h"
#include "fs/vyre.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#define NAME_MAX_LEN 255
#define VYRE_XATTR_PREFIX "user.vyre."

static vy_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static vy_open *handle_of(struct fuse_file_info *fi)
{
	return (vy_open *)(uintptr_t)fi->fh;
}

/* Reply with a core error; say why in the log when the user must act.
 * A size no budget could hold is EFBIG (the file is too large for this
 * filesystem); ENOSPC means no room now. */
static void reply_vy(fuse_req_t req, vy_err rc, const vy_error *e, uint64_t ino, const char *what)
{
	if (rc == VY_ENOSPC || rc == VY_EOVERFLOW)
		vy_log(LOG_WARNING, "%s (inode %" PRIu64 "): %s", what, ino, e->msg);
	else if (rc == VY_EDEVICE || rc == VY_EINTERNAL || rc == VY_ENOMEM)
		vy_log(LOG_ERR, "%s (inode %" PRIu64 "): %s", what, ino, e->msg);
	fuse_reply_err(req, rc == VY_EOVERFLOW ? EFBIG : vy_err_errno(rc));
}

static double attr_timeout(const vy_inode *in)
{
	return in->kind == VY_VIRTUAL ? 0.0 : VY_ATTR_TIMEOUT; /* virtual sizes change */
}

/* A directory that may gain or lose entries, or the errno why not. ns held. */
static int writable_dir(vy_fs *fs, vy_inode *dir)
{
	if (!dir)
		return ENOENT;
	if (dir->kind != VY_DIR)
		return ENOTDIR;
	if (dir->ino == fs->vyre_ino)
		return EPERM;
	return 0; /* modules/ takes module files only: make_node checks */
}

/* Reply with an entry for `in`, counting the kernel's new reference. ns held. */
static void reply_entry(fuse_req_t req, vy_fs *fs, vy_inode *in)
{
	struct fuse_entry_param ep;
	memset(&ep, 0, sizeof(ep));
	in->nlookup++;
	pthread_rwlock_rdlock(&in->lock);
	vy_inode_stat(fs, in, &ep.attr);
	pthread_rwlock_unlock(&in->lock);
	ep.ino = in->ino;
	ep.generation = fs->generation;
	ep.attr_timeout = attr_timeout(in);
	ep.entry_timeout = VY_ATTR_TIMEOUT;
	if (fuse_reply_entry(req, &ep) != 0)
		in->nlookup--; /* the kernel did not take it */
}

/* After a write, truncate or copy into a file: times, and suid/sgid dropped
 * (the kernel leaves that to us); its cached mode goes before the reply, so
 * no stale set-user-ID survives the write. */
static void wrote(fuse_req_t req, vy_inode *in)
{
	if (vy_inode_wrote(in, req))
		fuse_lowlevel_notify_inval_inode(fs_of(req)->se, in->ino, -1, 0);
}

/* A file's capabilities go with a change of its bytes or owner, whoever
 * makes it (the kernel's killpriv rule, left to us with
 * FUSE_HANDLE_KILLPRIV_V2). The inode's write lock is held. */
static void kill_caps(vy_inode *in)
{
	vy_xattrs_remove(&in->xattrs, "security.capability");
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	vy_fs *fs = userdata;
	vy_session_conn(conn, fs->cfg.max_write);
	/* File handles (name_to_handle_at, the kernel NFS server): the kernel
	 * looks up "." of a node id it has forgotten, ".." of a directory. */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* POSIX ACLs, as tmpfs: the kernel enforces them from the
	 * system.posix_acl_* xattrs and leaves keeping them, the mode in step
	 * and inheritance to us (fs/acl_inode.c). With a default ACL the umask
	 * does not apply, so the kernel must leave it to us too (DONT_MASK). */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK)) {
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		fs->acl = true;
	}
}

/* Names over NAME_MAX_LEN bytes: ENAMETOOLONG in every operation that takes
 * one, lookup included, as every Linux filesystem answers. */
static bool name_too_long(fuse_req_t req, const char *name)
{
	if (strlen(name) <= NAME_MAX_LEN)
		return false;
	fuse_reply_err(req, ENAMETOOLONG);
	return true;
}

/* chattr's flags vyrefs keeps, as tmpfs keeps them. */
#define VY_ATTR_FLAGS (FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL)

/* Whether `in` is immutable (chattr +i), or append-only too when `append`. */
static bool frozen(vy_inode *in, bool append)
{
	pthread_mutex_lock(&in->meta);
	unsigned f = in->attr_flags;
	pthread_mutex_unlock(&in->meta);
	return (f & FS_IMMUTABLE_FL) || (append && (f & FS_APPEND_FL));
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	vy_fs *fs = fs_of(req);
	if (name_too_long(req, name))
		return;
	pthread_mutex_lock(&fs->ns);
	vy_inode *p = vy_u64map_get(&fs->inodes, parent), *in = NULL;
	if (p && !strcmp(name, ".")) {
		in = p; /* a file handle's node id, of any type */
	} else if (p && p->kind == VY_DIR) {
		if (!strcmp(name, ".."))
			in = vy_u64map_get(&fs->inodes, p->parent);
		else {
			vy_dirent *d = vy_dir_find(&p->dir, name);
			in = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
		}
	}
	if (in)
		reply_entry(req, fs, in);
	else
		fuse_reply_err(req, !p ? ENOENT : p->kind != VY_DIR ? ENOTDIR : ENOENT);
	pthread_mutex_unlock(&fs->ns);
}

static void forget_one(vy_fs *fs, fuse_ino_t ino, uint64_t n)
{
	vy_inode *in = vy_u64map_get(&fs->inodes, ino);
	if (!in)
		return;
	in->nlookup = n > in->nlookup ? 0 : in->nlookup - n;
	vy_inode_reap(fs, in);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	vy_fs *fs = fs_of(req);
	pthread_mutex_lock(&fs->ns);
	forget_one(fs, ino, nlookup);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	vy_fs *fs = fs_of(req);
	pthread_mutex_lock(&fs->ns);
	for (size_t i = 0; i < count; i++)
		forget_one(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
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
	vy_inode_stat(fs, in, &st);
	pthread_rwlock_unlock(&in->lock);
	vy_statx_of(&in->btime, vy_inode_attr_flags(in)); /* for a statx asking for it (statx.h) */
	fuse_reply_attr(req, &st, attr_timeout(in));
}

static void set_time(struct timespec *t, const struct timespec *given, bool now)
{
	if (now)
		vy_now(t);
	else
		*t = *given;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi)
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
	if (in->fixed && in->ino != FUSE_ROOT_ID) {
		/* `echo ... > .vyre/ctl` may truncate it: nothing to do. */
		bool ctl_trunc = in->virt == VY_V_CTL && to_set == FUSE_SET_ATTR_SIZE && attr->st_size == 0;
		if (!ctl_trunc) {
			fuse_reply_err(req, EPERM);
			return;
		}
		to_set = 0;
		ctime_only = false;
	}
	bool resized = false; /* truncate(2) to the size it has changes no time */
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
	if ((to_set & FUSE_SET_ATTR_SIZE) && in->kind == VY_MODULE) {
		int err = attr->st_size < 0 ? EINVAL : vy_moddir_truncate(in, (uint64_t)attr->st_size);
		if (err) {
			fuse_reply_err(req, err);
			return;
		}
	} else if ((to_set & FUSE_SET_ATTR_SIZE) && in->kind != VY_FILE) {
		fuse_reply_err(req, in->kind == VY_DIR ? EISDIR : EINVAL);
		return;
	} else if (to_set & FUSE_SET_ATTR_SIZE) {
		vy_error e;
		pthread_rwlock_wrlock(&in->lock);
		resized = attr->st_size >= 0 && (uint64_t)attr->st_size != in->size;
		vy_err rc = attr->st_size < 0 ? vy_fail(&e, VY_EINVAL, "give a size of 0 or more", "negative size")
					      : vy_file_truncate(fs, in, (uint64_t)attr->st_size, &e);
		if (rc == VY_OK)
			kill_caps(in);
		pthread_rwlock_unlock(&in->lock);
		if (rc != VY_OK) {
			reply_vy(req, rc, &e, ino, "truncate");
			return;
		}
	}
	if ((to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) && in->kind != VY_DIR) {
		pthread_rwlock_wrlock(&in->lock);
		kill_caps(in);
		pthread_rwlock_unlock(&in->lock);
	}
	if ((to_set & FUSE_SET_ATTR_MODE) && fs->acl) {
		/* The access ACL follows a chmod (the kernel forgets its copy). */
		pthread_rwlock_wrlock(&in->lock);
		vy_acl_inode_chmod(in, attr->st_mode);
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
	struct stat st;
	pthread_rwlock_rdlock(&in->lock);
	vy_inode_stat(fs, in, &st);
	pthread_rwlock_unlock(&in->lock);
	fuse_reply_attr(req, &st, attr_timeout(in));
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	vy_inode *in = vy_fs_inode(fs_of(req), ino);
	if (!in || in->kind != VY_SYMLINK) {
		fuse_reply_err(req, in ? EINVAL : ENOENT);
		return;
	}
	/* Reply from memory of our own: once the reply is out, the inode
	 * may be forgotten and freed. */
	char *target = strdup(in->target);
	if (!target) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fuse_reply_readlink(req, target);
	free(target);
}

/* Make a named inode in `parent`; on success the entry is replied (or, with
 * `fi`, the entry and an open handle). */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, vy_kind kind, mode_t mode,
		      const char *target, struct fuse_file_info *fi, dev_t rdev)
{
	vy_fs *fs = fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (name_too_long(req, name))
		return;
	/* O_TMPFILE (session.h): a file without a name, until linkat. */
	bool tmpfile = fi && !strcmp(name, VY_SESSION_TMPFILE_NAME);
	char *copy = target ? strdup(target) : NULL;
	vy_open *h = fi ? vy_open_new(NULL) : NULL;
	if ((target && !copy) || (fi && !h)) {
		free(copy);
		free(h);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&fs->ns);
	vy_inode *p = vy_u64map_get(&fs->inodes, parent), *in = NULL;
	int err = writable_dir(fs, p);
	char *module = NULL;
	if (!err && p->ino == fs->modules_ino) {
		err = tmpfile ? EOPNOTSUPP : kind == VY_FILE ? vy_moddir_name(name, &module) : EPERM;
		kind = VY_MODULE;
	}
	if (!err && vy_dir_find(&p->dir, name))
		err = EEXIST;
	if (!err && frozen(p, false))
		err = EPERM; /* an immutable directory takes no new entry */
	if (!err && fs->inodes.count >= fs->cfg.max_inodes)
		err = ENOSPC;
	gid_t gid = ctx->gid;
	if (!err) {
		pthread_mutex_lock(&p->meta);
		if (p->mode & S_ISGID) {
			gid = p->gid; /* BSD group semantics in a setgid directory */
			if (kind == VY_DIR)
				mode |= S_ISGID;
		}
		pthread_mutex_unlock(&p->meta);
	}
	/* The directory's default ACL, or the umask (the kernel leaves both
	 * to us with ACLs on); a symlink's mode is always 0777. */
	vy_acl_new acls = {0};
	if (!err && fs->acl && kind != VY_SYMLINK)
		err = vy_acl_inode_inherit(p, ctx->umask, &mode, &acls);
	if (!err && !(in = vy_inode_new(fs, kind, mode, ctx->uid, gid)))
		err = ENOMEM;
	if (!err && (acls.access || acls.dflt))
		err = vy_acl_inode_give(in, &acls); /* ENOSPC past xattr_budget */
	vy_acl_new_free(&acls);
	if (!err && !tmpfile && !vy_dir_add(&p->dir, name, in->ino))
		err = ENOMEM; /* the nameless inode is reaped below */
	if (err) {
		if (in) {
			in->nlink = 0;
			vy_inode_reap(fs, in);
		}
		pthread_mutex_unlock(&fs->ns);
		free(copy);
		free(module);
		free(h);
		fuse_reply_err(req, err);
		return;
	}
	in->target = module ? module : copy;
	in->rdev = rdev;
	vy_devices_place(fs, p, in);
	if (kind == VY_DIR) {
		in->nlink = 2;
		in->parent = p->ino;
		p->nlink++;
	} else {
		in->nlink = tmpfile ? 0 : 1;
		in->linkable = tmpfile && !(fi->flags & O_EXCL); /* O_EXCL: never named */
	}
	if (!tmpfile)
		vy_inode_touch(p, true);
	if (fi) {
		h->in = in;
		in->opens++;
		vy_open_add(fs, h);
		fi->fh = (uint64_t)(uintptr_t)h;
		fi->keep_cache = fs->cfg.page_cache;
		struct fuse_entry_param ep;
		memset(&ep, 0, sizeof(ep));
		in->nlookup++;
		vy_inode_stat(fs, in, &ep.attr);
		if (tmpfile)
			ep.attr.st_nlink = 1; /* the kernel's d_tmpfile takes it to 0 */
		ep.ino = in->ino;
		ep.generation = fs->generation;
		ep.attr_timeout = ep.entry_timeout = VY_ATTR_TIMEOUT;
		if (fuse_reply_create(req, &ep, fi) != 0) {
			in->nlookup--;
			in->opens--;
			vy_open_free(fs, h);
		}
	} else {
		reply_entry(req, fs, in);
	}
	pthread_mutex_unlock(&fs->ns);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	/* FIFOs, devices and sockets hold no bytes of ours: the kernel gives
	 * them their behaviour (a pipe, the device's driver, the socket). */
	mode_t type = mode & S_IFMT;
	switch (type) {
	case S_IFREG:
		make_node(req, parent, name, VY_FILE, type | (mode & 07777), NULL, NULL, 0);
		return;
	case S_IFIFO:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFSOCK:
		make_node(req, parent, name, VY_SPECIAL, type | (mode & 07777), NULL, NULL,
			  type == S_IFCHR || type == S_IFBLK ? rdev : 0);
		return;
	default:
		fuse_reply_err(req, EINVAL); /* as mknod(2) for an unknown type */
		return;
	}
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_node(req, parent, name, VY_DIR, S_IFDIR | (mode & 07777), NULL, NULL, 0);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_node(req, parent, name, VY_SYMLINK, S_IFLNK | 0777, link, NULL, 0);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	make_node(req, parent, name, VY_FILE, S_IFREG | (mode & 07777), NULL, fi, 0);
}

/* Remove `name` from `parent` (a file with unlink, a directory with rmdir). */
static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	vy_fs *fs = fs_of(req);
	if (name_too_long(req, name))
		return;
	pthread_mutex_lock(&fs->ns);
	vy_inode *p = vy_u64map_get(&fs->inodes, parent);
	vy_dirent *d = p && p->kind == VY_DIR ? vy_dir_find(&p->dir, name) : NULL;
	vy_inode *in = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
	int err = 0;
	if (!p)
		err = ENOENT;
	else if (p->kind != VY_DIR)
		err = ENOTDIR;
	else if (!in)
		err = ENOENT;
	else if (in->fixed || frozen(in, true) || frozen(p, true))
		err = EPERM; /* chattr +i or +a on the entry or its directory */
	else if (dir && in->kind != VY_DIR)
		err = ENOTDIR;
	else if (!dir && in->kind == VY_DIR)
		err = EISDIR;
	else if (dir && in->dir.count > 0)
		err = ENOTEMPTY;
	else if (in->virt == VY_V_MODLOG)
		err = EPERM; /* goes with its module */
	else if (in->kind == VY_MODULE)
		err = vy_moddir_forget(fs, p, in); /* EBUSY while a sequence uses it */
	if (!err) {
		vy_dir_remove(&p->dir, name);
		if (dir) {
			in->nlink = 0;
			p->nlink--;
		} else {
			in->nlink--;
		}
		vy_inode_touch(p, true);
		vy_inode_touch(in, false);
		vy_inode_reap(fs, in);
	}
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_err(req, err);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, true);
}

/* Whether directory `dir` is `anc` or lies under it. ns held. */
static bool under(vy_fs *fs, vy_inode *dir, vy_inode *anc)
{
	for (vy_inode *at = dir;;) {
		if (at == anc)
			return true;
		if (at->ino == FUSE_ROOT_ID)
			return false;
		at = vy_u64map_get(&fs->inodes, at->parent);
		if (!at)
			return false;
	}
}

/* A directory moves from `from` to `to`: its ".." and the link counts. */
static void reparent(vy_inode *in, vy_inode *from, vy_inode *to)
{
	if (in->kind != VY_DIR || from == to)
		return;
	in->parent = to->ino;
	from->nlink--;
	to->nlink++;
}

/* A whiteout (what overlayfs leaves over a lower file): a character device
 * 0:0 of mode 0, the caller's (a setgid directory's group), with the ACL a
 * default ACL of the directory gives it, as tmpfs makes it (a mknod). 0 or
 * an errno (ENOMEM, ENOSPC past xattr_budget). ns held. */
static int whiteout(vy_fs *fs, vy_inode *dir, const struct fuse_ctx *ctx, vy_inode **out)
{
	pthread_mutex_lock(&dir->meta);
	gid_t gid = dir->mode & S_ISGID ? dir->gid : ctx->gid;
	pthread_mutex_unlock(&dir->meta);
	mode_t mode = S_IFCHR;
	vy_acl_new acls = {0};
	int err = fs->acl ? vy_acl_inode_inherit(dir, 0, &mode, &acls) : 0;
	vy_inode *wh = err ? NULL : vy_inode_new(fs, VY_SPECIAL, mode, ctx->uid, gid);
	if (!err && !wh)
		err = ENOMEM;
	if (!err && (acls.access || acls.dflt))
		err = vy_acl_inode_give(wh, &acls);
	vy_acl_new_free(&acls);
	if (err && wh)
		vy_inode_reap(fs, wh); /* no name, no reference: freed */
	if (err)
		return err;
	wh->rdev = makedev(0, 0);
	*out = wh;
	return 0;
}

static int do_rename(vy_fs *fs, const struct fuse_ctx *ctx, fuse_ino_t parent, const char *name,
		     fuse_ino_t newparent, const char *newname, unsigned flags, vy_inode **gone)
{
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT) ||
	    (flags & RENAME_EXCHANGE && flags & (RENAME_NOREPLACE | RENAME_WHITEOUT)))
		return EINVAL;
	if (strlen(name) > NAME_MAX_LEN || strlen(newname) > NAME_MAX_LEN)
		return ENAMETOOLONG;
	vy_inode *p = vy_u64map_get(&fs->inodes, parent), *np = vy_u64map_get(&fs->inodes, newparent);
	int err = writable_dir(fs, p);
	if (!err)
		err = writable_dir(fs, np);
	if (err)
		return err;
	if (p->ino == fs->modules_ino || np->ino == fs->modules_ino)
		return EPERM; /* a module's name is what launches use: copy anew */
	vy_dirent *d = vy_dir_find(&p->dir, name), *nd = vy_dir_find(&np->dir, newname);
	vy_inode *in = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
	vy_inode *target = nd ? vy_u64map_get(&fs->inodes, nd->ino) : NULL;
	if (!in)
		return ENOENT;
	if (in->fixed || (target && target->fixed))
		return EPERM;
	if (frozen(in, true) || (target && frozen(target, true)) || frozen(p, true) || frozen(np, true))
		return EPERM; /* chattr +i or +a */
	if (in->kind == VY_DIR && under(fs, np, in))
		return EINVAL; /* into itself */
	if (flags & RENAME_EXCHANGE) {
		if (!target)
			return ENOENT;
		if (target->kind == VY_DIR && under(fs, p, target))
			return EINVAL;
		d->ino = target->ino;
		nd->ino = in->ino;
		reparent(in, p, np);
		reparent(target, np, p);
		vy_inode_touch(target, false);
	} else {
		if (target && (flags & RENAME_NOREPLACE))
			return EEXIST;
		if (target == in)
			return 0; /* two names of one file: POSIX says do nothing */
		if (target && (in->kind == VY_DIR) != (target->kind == VY_DIR))
			return in->kind == VY_DIR ? ENOTDIR : EISDIR;
		if (target && target->kind == VY_DIR && target->dir.count > 0)
			return ENOTEMPTY;
		/* The whiteout is made first: past the entry's move, nothing
		 * may fail. */
		vy_inode *wh = NULL;
		if ((flags & RENAME_WHITEOUT) && fs->inodes.count >= fs->cfg.max_inodes)
			return ENOSPC;
		if (flags & RENAME_WHITEOUT) {
			int werr = whiteout(fs, p, ctx, &wh);
			if (werr)
				return werr;
		}
		if (target) {
			/* Take over the target's entry: no allocation, so
			 * nothing can fail past this point. */
			nd->ino = in->ino;
			if (target->kind == VY_DIR) {
				target->nlink = 0;
				np->nlink--;
			} else {
				target->nlink--;
			}
			vy_inode_touch(target, false);
			*gone = target;
		} else if (!vy_dir_add(&np->dir, newname, in->ino)) {
			if (wh)
				vy_inode_reap(fs, wh); /* no name, no reference: freed */
			return ENOMEM;
		}
		if (wh) {
			d->ino = wh->ino; /* the old name, now the whiteout's */
			wh->nlink = 1;
			vy_inode_touch(wh, false);
		} else {
			vy_dir_remove(&p->dir, name);
		}
		reparent(in, p, np);
	}
	vy_inode_touch(in, false);
	vy_inode_touch(p, true);
	if (np != p)
		vy_inode_touch(np, true);
	return 0;
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	vy_fs *fs = fs_of(req);
	vy_inode *gone = NULL;
	pthread_mutex_lock(&fs->ns);
	int err = do_rename(fs, fuse_req_ctx(req), parent, name, newparent, newname, flags, &gone);
	if (gone)
		vy_inode_reap(fs, gone);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_err(req, err);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	vy_fs *fs = fs_of(req);
	if (name_too_long(req, newname))
		return;
	pthread_mutex_lock(&fs->ns);
	vy_inode *in = vy_u64map_get(&fs->inodes, ino), *np = vy_u64map_get(&fs->inodes, newparent);
	int err = writable_dir(fs, np);
	if (!err && (!in || (in->nlink == 0 && !in->linkable)))
		err = ENOENT; /* gone, or an O_TMPFILE made with O_EXCL */
	else if (!err && (in->kind == VY_DIR || in->fixed || in->kind == VY_MODULE || in->kind == VY_VIRTUAL ||
			  np->ino == fs->modules_ino))
		err = EPERM;
	else if (!err && vy_dir_find(&np->dir, newname))
		err = EEXIST;
	else if (!err && (frozen(in, true) || frozen(np, false)))
		err = EPERM; /* chattr +i or +a */
	else if (!err && in->nlink == UINT32_MAX)
		err = EMLINK;
	else if (!err && !vy_dir_add(&np->dir, newname, in->ino))
		err = ENOMEM;
	if (err) {
		fuse_reply_err(req, err);
	} else {
		in->nlink++;
		vy_inode_touch(in, false);
		vy_inode_touch(np, true);
		reply_entry(req, fs, in);
	}
	pthread_mutex_unlock(&fs->ns);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (in->kind == VY_DIR || in->kind == VY_SPECIAL) {
		/* The kernel opens FIFOs, devices and sockets itself. */
		fuse_reply_err(req, in->kind == VY_DIR ? EISDIR : ENXIO);
		return;
	}
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	if ((writing || (fi->flags & O_TRUNC)) &&
	    (frozen(in, false) || (frozen(in, true) && (!(fi->flags & O_APPEND) || (fi->flags & O_TRUNC))))) {
		fuse_reply_err(req, EPERM); /* chattr +i: no writer; +a: appends only */
		return;
	}
	if (in->kind == VY_VIRTUAL && writing && in->virt != VY_V_CTL) {
		fuse_reply_err(req, EPERM); /* .vyre's files are vyrefs's to write */
		return;
	}
	if (in->kind == VY_MODULE && writing && (fi->flags & O_TRUNC) && vy_moddir_truncate(in, 0) != 0) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (in->kind == VY_FILE && writing && (fi->flags & O_TRUNC)) {
		/* libfuse asks the kernel for atomic O_TRUNC: no SETATTR
		 * follows, the open itself truncates. */
		vy_error e;
		pthread_rwlock_wrlock(&in->lock);
		vy_err rc = in->size ? vy_file_truncate(fs, in, 0, &e) : VY_OK;
		if (rc == VY_OK)
			kill_caps(in);
		pthread_rwlock_unlock(&in->lock);
		if (rc != VY_OK) {
			reply_vy(req, rc, &e, ino, "truncate at open");
			return;
		}
		wrote(req, in);
	}
	vy_open *h = vy_open_new(in);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (in->kind == VY_VIRTUAL) {
		h->text = vy_vyre_render(fs, in, &h->len);
		if (!h->text) {
			free(h);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fi->direct_io = 1; /* made anew at each open: never cached */
	} else {
		fi->keep_cache = fs->cfg.page_cache;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	pthread_mutex_lock(&fs->ns);
	in->opens++;
	vy_open_add(fs, h);
	pthread_mutex_unlock(&fs->ns);
	if (fuse_reply_open(req, fi) != 0) {
		pthread_mutex_lock(&fs->ns);
		in->opens--;
		vy_open_free(fs, h);
		vy_inode_reap(fs, in);
		pthread_mutex_unlock(&fs->ns);
	}
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_open *h = handle_of(fi);
	vy_inode *in = h->in;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (in->virt == VY_V_CTL) {
		/* The reply of this file's last sequence, once; not by offset. */
		char reply[4096];
		fuse_reply_buf(req, reply, vy_ctlfile_read(h, reply, size < sizeof(reply) ? size : sizeof(reply)));
		return;
	}
	if (in->kind == VY_VIRTUAL) {
		/* A copy: the handle may be released the moment the reply is in. */
		size_t at = (uint64_t)off < h->len ? (size_t)off : h->len;
		size_t n = h->len - at < size ? h->len - at : size;
		char *copy = malloc(n ? n : 1);
		if (!copy) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(copy, h->text + at, n);
		fuse_reply_buf(req, copy, n);
		free(copy);
		return;
	}
	if (in->kind != VY_FILE && in->kind != VY_MODULE) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (in->kind == VY_MODULE) {
		char *buf = malloc(size ? size : 1);
		if (buf)
			fuse_reply_buf(req, buf, vy_moddir_read(in, (uint64_t)off, buf, size));
		else
			fuse_reply_err(req, ENOMEM);
		free(buf);
		return;
	}
	/* The reply is made from readahead memory or from the pinned buffer
	 * the device copied into: no host copy of ours. Under the read lock:
	 * the readahead chunk stays until the reply is out. */
	vy_error e;
	vy_ra_hit hit = {0};
	vy_staging_buf buf = {0};
	size_t got = 0;
	pthread_rwlock_rdlock(&in->lock);
	vy_core *core = vy_fs_core(fs, in); /* whose staging buf comes from */
	vy_err rc = vy_file_read(fs, in, (uint64_t)off, size, &hit, &buf, &got, &e);
	if (rc == VY_OK)
		fuse_reply_buf(req, hit.chunk ? hit.data : buf.ptr, got);
	else
		reply_vy(req, rc, &e, ino, "read");
	if (hit.chunk)
		vy_readahead_put(fs, in, &hit);
	pthread_rwlock_unlock(&in->lock);
	vy_staging_release(core->staging, &buf);
}

static void on_interrupt(fuse_req_t req, void *data)
{
	(void)req;
	atomic_store((_Atomic uint32_t *)data, 1);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = handle_of(fi)->in;
	if (in->kind == VY_VIRTUAL) {
		/* A signal to the writer (FUSE sends INTERRUPT) stops its
		 * sequence at the next step; the write then fails with EINTR. */
		_Atomic uint32_t stop = 0;
		fuse_req_interrupt_func(req, on_interrupt, &stop);
		int err = vy_ctlfile_write(fs, handle_of(fi), buf, size, fuse_req_ctx(req)->pid, &stop);
		fuse_req_interrupt_func(req, NULL, NULL);
		if (err)
			fuse_reply_err(req, err);
		else
			fuse_reply_write(req, size);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (in->kind == VY_MODULE) {
		int err = vy_moddir_write(in, (uint64_t)off, buf, size);
		if (!err) {
			handle_of(fi)->written = true;
			vy_inode_touch(in, true);
		}
		if (err)
			fuse_reply_err(req, err);
		else
			fuse_reply_write(req, size);
		return;
	}
	if (frozen(in, false)) {
		fuse_reply_err(req, EPERM); /* made immutable while open */
		return;
	}
	vy_error e;
	pthread_rwlock_wrlock(&in->lock);
	vy_err rc = vy_file_write(fs, in, (uint64_t)off, buf, size, &e);
	if (rc == VY_OK)
		kill_caps(in);
	pthread_rwlock_unlock(&in->lock);
	if (rc == VY_OK)
		wrote(req, in);
	if (rc == VY_OK && fs->cfg.page_cache && (fi->flags & O_DIRECT)) {
		/* A direct write passes the page cache by, and the kernel drops
		 * the range only around a synchronous one: pages that buffered
		 * readers refilled while an AIO write ran would stay, across
		 * opens too (keep_cache). Drop them here, before the reply: a
		 * page still being read waits for its read, then goes. */
		fuse_lowlevel_notify_inval_inode(fs->se, in->ino, off, (off_t)size);
	}
	if (rc == VY_OK)
		fuse_reply_write(req, size);
	else
		reply_vy(req, rc, &e, ino, "write");
}

/* A regular file's gathered writes on the device (write-behind), and the
 * reply: 0, or the error that lost some of them. */
static void settle_and_reply(fuse_req_t req, fuse_ino_t ino, vy_inode *in, const char *what)
{
	vy_error e;
	pthread_rwlock_rdlock(&in->lock);
	vy_err rc = vy_file_settle(fs_of(req), in, &e);
	pthread_rwlock_unlock(&in->lock);
	if (rc == VY_OK)
		fuse_reply_err(req, 0);
	else
		reply_vy(req, rc, &e, ino, what);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_open *h = handle_of(fi);
	/* Writes gathered behind are copied now, so close reports a failure;
	 * the control file may hold an unfinished statement, an error too. */
	if (h->in->kind == VY_FILE) {
		settle_and_reply(req, ino, h->in, "close");
		return;
	}
	int err = 0;
	if (h->in->virt == VY_V_CTL) {
		err = vy_ctlfile_flush(fs_of(req), h, fuse_req_ctx(req)->pid);
	} else if (h->in->kind == VY_MODULE && h->written) {
		h->written = false;
		err = vy_moddir_load(fs_of(req), h->in); /* a module that does not load fails the close */
	}
	fuse_reply_err(req, err);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	vy_fs *fs = fs_of(req);
	vy_open *h = handle_of(fi);
	vy_inode *in = h->in;
	pthread_mutex_lock(&fs->ns);
	bool last = --in->opens == 0, named = in->nlink > 0;
	pthread_mutex_unlock(&fs->ns);
	if (last && named && in->kind == VY_MODULE)
		vy_moddir_closed(fs, in);
	if (last && named && in->kind == VY_FILE) {
		/* Outside ns: fitting copies the file on the device. */
		pthread_rwlock_wrlock(&in->lock);
		vy_file_closed(fs, in);
		pthread_rwlock_unlock(&in->lock);
	}
	pthread_mutex_lock(&fs->ns);
	vy_open_free(fs, h);
	vy_inode_reap(fs, in);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	vy_inode *in = handle_of(fi)->in;
	if (in->kind == VY_FILE)
		settle_and_reply(req, ino, in, "fsync");
	else
		fuse_reply_err(req, 0);
}

/* An open directory: readdir shows the entries made before `limit` (a
 * cookie), fixed at opendir and at each rewind. An entry created, or
 * renamed (a rename makes a new entry), after that need not appear, as
 * tmpfs answers: a reader that renames each entry it reads ends, and sees
 * each original name once. */
typedef struct vy_opendir {
	uint64_t limit; /* ns */
} vy_opendir;

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_opendir *od = malloc(sizeof(*od));
	if (!od) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&fs->ns);
	vy_inode *in = vy_u64map_get(&fs->inodes, ino);
	int err = !in ? ENOENT : in->kind != VY_DIR ? ENOTDIR : 0;
	if (!err)
		od->limit = in->dir.next_cookie;
	pthread_mutex_unlock(&fs->ns);
	if (err) {
		free(od);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)od;
	if (fuse_reply_open(req, fi) != 0)
		free(od);
}

/* Add one entry to a readdir reply; false once the buffer is full. */
static bool add_dirent(fuse_req_t req, char *buf, size_t size, size_t *used, const char *name, uint64_t ino,
		       mode_t type, off_t next)
{
	struct stat st;
	memset(&st, 0, sizeof(st));
	st.st_ino = ino;
	st.st_mode = type;
	size_t n = fuse_add_direntry(req, buf + *used, size - *used, name, &st, next);
	if (n > size - *used)
		return false;
	*used += n;
	return true;
}

/* readdir offsets: 1 after ".", 2 after "..", 2 + cookie after an entry. */
static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_opendir *od = (vy_opendir *)(uintptr_t)fi->fh;
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	pthread_mutex_lock(&fs->ns);
	vy_inode *d = vy_u64map_get(&fs->inodes, ino);
	if (!d || d->kind != VY_DIR) {
		pthread_mutex_unlock(&fs->ns);
		free(buf);
		fuse_reply_err(req, d ? ENOTDIR : ENOENT);
		return;
	}
	if (off <= 0)
		od->limit = d->dir.next_cookie; /* a rewind sees the directory anew */
	bool room = true;
	if (off < 1)
		room = add_dirent(req, buf, size, &used, ".", d->ino, S_IFDIR, 1);
	if (room && off < 2)
		room = add_dirent(req, buf, size, &used, "..", d->parent, S_IFDIR, 2);
	for (const vy_dirent *e = vy_dir_next(&d->dir, off < 2 ? 0 : (uint64_t)off - 2); room && e && e->cookie < od->limit;
	     e = vy_dir_next(&d->dir, e->cookie)) {
		if (!vy_vyre_listed(fs, d->ino, e->ino))
			continue;
		vy_inode *in = vy_u64map_get(&fs->inodes, e->ino);
		room = add_dirent(req, buf, size, &used, e->name, e->ino, in ? vy_inode_type(in) : 0,
				  (off_t)(e->cookie + 2));
	}
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	free((vy_opendir *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	(void)ino;
	vy_fs *fs = fs_of(req);
	vy_space sp; /* fs/space.h: available is what a new file can get */
	vy_space_get(fs, &sp);
	struct statvfs sv;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = sp.total / 4096;
	sv.f_bfree = sp.free / 4096;
	sv.f_bavail = sp.avail / 4096;
	pthread_mutex_lock(&fs->ns);
	sv.f_files = fs->cfg.max_inodes;
	sv.f_ffree = sv.f_favail = fs->cfg.max_inodes > fs->inodes.count ? fs->cfg.max_inodes - fs->inodes.count : 0;
	pthread_mutex_unlock(&fs->ns);
	sv.f_namemax = NAME_MAX_LEN;
	fuse_reply_statfs(req, &sv);
}

/* user.vyre.* read-only attributes of a file with a buffer. */
static const char *const vyre_xattrs[] = {"user.vyre.handle", "user.vyre.capacity", "user.vyre.device_ptr"};

/* user.vyre.device_ptr says where the daemon's context maps the buffer:
 * only for callers that may write the file, and only on a GPU (on the host
 * backend it would be an address of the daemon's heap). */
static bool vyre_xattr(const vy_fs *fs, const vy_inode *in, const char *name, bool may_write, char *out, size_t cap)
{
	if (in->kind != VY_FILE || !in->buf)
		return false;
	vy_buffer_view v;
	if (!strcmp(name, vyre_xattrs[0]))
		snprintf(out, cap, "%" PRIu64, in->buf);
	else if (!strcmp(name, vyre_xattrs[1]))
		snprintf(out, cap, "%" PRIu64, in->cap);
	else if (!strcmp(name, vyre_xattrs[2]) && may_write && !strcmp(vy_fs_core(fs, in)->dev->info.backend, "cuda") &&
		 vy_store_view(vy_fs_core(fs, in)->store, in->buf, &v, NULL) == VY_OK)
		snprintf(out, cap, "0x%" PRIx64, v.ptr);
	else
		return false;
	return true;
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

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			int flags)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	int err = in ? xattr_name_ok(fs, name) : ENOENT;
	if (!err && in->fixed && in->ino != FUSE_ROOT_ID)
		err = EPERM;
	if (!err && frozen(in, true))
		err = EPERM; /* chattr +i or +a */
	bool mode_changed = false;
	if (err == EPERM && in && !strcmp(name, VY_DEVICE_XATTR) && !(in->fixed && in->ino != FUSE_ROOT_ID) &&
	    !frozen(in, true))
		err = vy_devices_set(fs, in, value, size, flags); /* a move, or a directory's placement */
	else if (!err && vy_acl_name(name)) {
		err = vy_acl_inode_set(req, in, name, value, size, flags, &mode_changed);
		if (!err && mode_changed) /* the kernel's cached mode goes */
			fuse_lowlevel_notify_inval_inode(fs->se, in->ino, -1, 0);
	} else if (!err) {
		pthread_rwlock_wrlock(&in->lock);
		err = vy_xattrs_set(&in->xattrs, name, value, size, flags);
		pthread_rwlock_unlock(&in->lock);
		if (!err)
			vy_inode_touch(in, false);
	}
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

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
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
	pthread_rwlock_rdlock(&in->lock);
	if (vyre_xattr(fs, in, name, may_write, small, sizeof(small))) {
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

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
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

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	int err = in ? xattr_name_ok(fs, name) : ENOENT;
	if (!err && in->fixed && in->ino != FUSE_ROOT_ID)
		err = EPERM;
	if (!err && frozen(in, true))
		err = EPERM; /* chattr +i or +a */
	if (err == EPERM && in && !strcmp(name, VY_DEVICE_XATTR) && !(in->fixed && in->ino != FUSE_ROOT_ID) &&
	    !frozen(in, true))
		err = vy_devices_remove(fs, in);
	else if (!err) {
		pthread_rwlock_wrlock(&in->lock);
		err = vy_xattrs_remove(&in->xattrs, name);
		pthread_rwlock_unlock(&in->lock);
		if (!err)
			vy_inode_touch(in, false);
	}
	fuse_reply_err(req, err);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = handle_of(fi)->in;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) {
		fuse_reply_err(req, EOPNOTSUPP); /* zero, collapse, insert range: as tmpfs */
		return;
	}
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EINVAL); /* as fallocate(2): a hole keeps the size */
		return;
	}
	if (in->kind != VY_FILE) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (frozen(in, false) || (frozen(in, true) && (mode & ~FALLOC_FL_KEEP_SIZE))) {
		fuse_reply_err(req, EPERM); /* as vfs_fallocate for chattr +i, +a */
		return;
	}
	vy_error e;
	pthread_rwlock_wrlock(&in->lock);
	vy_err rc = mode & FALLOC_FL_PUNCH_HOLE
			    ? vy_file_punch(fs, in, (uint64_t)off, (uint64_t)len, &e)
			    : vy_file_allocate(fs, in, (uint64_t)off, (uint64_t)len, mode & FALLOC_FL_KEEP_SIZE, &e);
	if (rc == VY_OK)
		kill_caps(in);
	pthread_rwlock_unlock(&in->lock);
	if (rc == VY_OK)
		wrote(req, in); /* times and suid/sgid, KEEP_SIZE too, as tmpfs */
	if (rc == VY_OK)
		fuse_reply_err(req, 0);
	else
		reply_vy(req, rc, &e, ino, "fallocate");
}

/* SEEK_DATA and SEEK_HOLE, from the file's holes (docs/fs.md, "Sparse
 * files"); the kernel answers SEEK_SET, SEEK_CUR and SEEK_END itself. */
static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	(void)ino;
	vy_fs *fs = fs_of(req);
	vy_inode *in = handle_of(fi)->in;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	pthread_rwlock_rdlock(&in->lock);
	uint64_t at = 0;
	int err = in->kind == VY_FILE ? vy_file_seek(fs, in, (uint64_t)off, whence == SEEK_DATA, &at) : ENXIO;
	pthread_rwlock_unlock(&in->lock);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_lseek(req, (off_t)at);
}

static void op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
			       fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags)
{
	vy_fs *fs = fs_of(req);
	vy_inode *src = handle_of(fi_in)->in, *dst = handle_of(fi_out)->in;
	if (flags != 0 || off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (src->kind != VY_FILE || dst->kind != VY_FILE) {
		fuse_reply_err(req, EOPNOTSUPP); /* the kernel falls back to read and write */
		return;
	}
	if (frozen(dst, false)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* The reply's count is 32 bits wide: copy at most that, in pages. */
	if (len > (UINT32_MAX & ~(size_t)4095))
		len = UINT32_MAX & ~(size_t)4095;
	/* Two inodes lock in ino order; one inode once. */
	if (src == dst) {
		pthread_rwlock_wrlock(&dst->lock);
	} else if (src->ino < dst->ino) {
		pthread_rwlock_rdlock(&src->lock);
		pthread_rwlock_wrlock(&dst->lock);
	} else {
		pthread_rwlock_wrlock(&dst->lock);
		pthread_rwlock_rdlock(&src->lock);
	}
	vy_error e;
	uint64_t copied = 0;
	vy_err rc = vy_file_copy(fs, src, (uint64_t)off_in, dst, (uint64_t)off_out, len, &copied, &e);
	if (rc == VY_OK && copied)
		kill_caps(dst);
	if (src != dst)
		pthread_rwlock_unlock(&src->lock);
	pthread_rwlock_unlock(&dst->lock);
	if (rc == VY_OK && copied)
		wrote(req, dst);
	(void)ino_in;
	if (rc == VY_OK)
		fuse_reply_write(req, (size_t)copied);
	else
		reply_vy(req, rc, &e, ino_out, "copy_file_range");
}

/* chattr and lsattr (FS_IOC_GETFLAGS, FS_IOC_SETFLAGS; the kernel checks
 * CAP_LINUX_IMMUTABLE for i and a). Flags tmpfs does not keep are refused
 * with EOPNOTSUPP, as tmpfs refuses them. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi, unsigned flags,
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
	switch (cmd) {
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
	fuse_lowlevel_notify_inval_inode(fs->se, in->ino, -1, 0); /* its cached ctime goes, +A too */
	fuse_reply_ioctl(req, 0, NULL, 0);
}

const struct fuse_lowlevel_ops vy_fs_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.create = op_create,
	.fallocate = op_fallocate,
	.copy_file_range = op_copy_file_range,
	.lseek = op_lseek,
	.ioctl = op_ioctl,
};
