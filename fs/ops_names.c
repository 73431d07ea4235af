/* FUSE operations on names: lookup and forget, making and removing
 * entries, rename and link, readlink, and reading directories. */
#include "fs/op.h"
#include "ns/acl_inode.h"
#include "daemon/session.h"
#include "fs/atime.h"
#include "fs/backed.h"
#include "daemon/log.h"
#include "fs/devices.h"
#include "fs/file.h"
#include "fs/kind.h"
#include "fs/vyre.h"
#include "fs/moddir.h"
#include "persist/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

void vy_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	vy_fs *fs = fs_of(req);
	if (vy_op_name_too_long(req, name))
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
			if (!in && fs->tier)
				in = vy_backed_lookup(fs, p, name); /* DIR's, not yet in the namespace */
		}
	}
	if (in)
		vy_op_reply_entry(req, fs, in);
	else
		fuse_reply_err(req, !p ? ENOENT : p->kind != VY_DIR ? ENOTDIR : ENOENT);
	pthread_mutex_unlock(&fs->ns);
}

static void forget_one(vy_fs *fs, fuse_ino_t ino, uint64_t n)
{
	vy_inode *in = vy_ns_forget(vy_fs_ns(fs), ino, n);
	if (in) {
		vy_persist_lookup(fs, in);
		vy_inode_reap(fs, in);
	}
}

void vy_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	vy_fs *fs = fs_of(req);
	pthread_mutex_lock(&fs->ns);
	forget_one(fs, ino, nlookup);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_none(req);
}

void vy_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	vy_fs *fs = fs_of(req);
	pthread_mutex_lock(&fs->ns);
	for (size_t i = 0; i < count; i++)
		forget_one(fs, forgets[i].ino, forgets[i].nlookup);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_none(req);
}

void vy_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	vy_inode *in = vy_fs_inode(fs_of(req), ino);
	const vy_kind_ops *ko = in ? vy_kind_ops_of(in) : NULL;
	if (!ko || !ko->readlink) {
		fuse_reply_err(req, in ? EINVAL : ENOENT);
		return;
	}
	vy_atime_read(fs_of(req), in, false); /* the kernel drops its atime after a readlink */
	ko->readlink(req, in);
}

/* Make a named inode in `parent`; on success the entry is replied (or, with
 * `fi`, the entry and an open handle). */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, vy_kind kind, mode_t mode,
		      const char *target, struct fuse_file_info *fi, dev_t rdev)
{
	vy_fs *fs = fs_of(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	if (vy_op_name_too_long(req, name))
		return;
	/* O_TMPFILE (session.h): a file without a name, until linkat. */
	bool tmpfile = fi && !strcmp(name, VY_SESSION_TMPFILE_NAME);
	char *copy = target ? strdup(target) : NULL;
	vy_open *h = fi ? vy_open_new(NULL) : NULL;
	if ((target && !copy) || (fi && !h)) {
		free(copy);
		if (h)
			vy_open_discard(h);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&fs->ns);
	vy_inode *p = vy_u64map_get(&fs->inodes, parent), *in = NULL;
	int err = vy_op_writable_dir(fs, p);
	char *module = NULL;
	if (!err && p->ino == fs->modules_ino) {
		err = tmpfile ? EOPNOTSUPP : kind == VY_FILE ? vy_moddir_name(name, &module) : EPERM;
		kind = VY_MODULE;
	}
	/* backing=DIR: a resent make may find its own half in DIR. */
	if (!err && fs->tier && p->tier && !tmpfile && vy_session_resent() && !vy_dir_find(&p->dir, name))
		vy_backed_unmake(fs, p, name, mode, ctx->uid, target, rdev);
	if (!err && fs->tier && p->tier)
		err = tmpfile ? EOPNOTSUPP : vy_backed_list(fs, p, false); /* DIR's names first: EEXIST is DIR's too */
	if (!err && vy_dir_find(&p->dir, name))
		err = EEXIST;
	if (!err && vy_op_frozen(p, false))
		err = EPERM; /* an immutable directory takes no new entry */
	if (!err && fs->inodes.count + fs->extra_links >= fs->cfg.max_inodes)
		err = ENOSPC;
	/* A target is the daemon's memory: it counts in the xattr budget. */
	bool charged = !err && kind == VY_SYMLINK && vy_xattr_budget_take(&fs->xattr_budget, strlen(copy) + 1);
	if (!err && kind == VY_SYMLINK && !charged)
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
	/* backing=DIR: made in DIR first, as its maker; a refusal of DIR's
	 * changes nothing here. */
	struct stat made;
	bool in_dir = false;
	if (!err && fs->tier && p->tier) {
		err = vy_backed_make(fs, p, name, mode, ctx->uid, gid, copy, rdev, &made);
		in_dir = !err;
	}
	if (!err && !(in = vy_inode_new(vy_fs_ns(fs), kind, mode, ctx->uid, gid)))
		err = ENOMEM;
	if (!err && in_dir)
		err = vy_backed_made(fs, p, name, in, &made);
	bool no_handle = false; /* the handle table's error, said in the log */
	if (!err && fi) {
		h->in = in; /* before its id is live: lookups take no lock */
		err = vy_open_add(vy_fs_ns(fs), h);
		no_handle = err != 0;
	}
	if (!err && (acls.access || acls.dflt))
		err = vy_acl_inode_give(in, &acls); /* ENOSPC past xattr_budget */
	vy_acl_new_free(&acls);
	if (!err && !tmpfile && !vy_dir_add(&p->dir, name, in->ino))
		err = ENOMEM; /* the nameless inode is reaped below */
	if (err) {
		if (in_dir && vy_backed_remove(fs, p, name, in, kind == VY_DIR) != 0)
			vy_log(LOG_WARNING, "backing directory: %s stays there after a failed create", name);
		if (h)
			vy_open_free(vy_fs_ns(fs), h); /* its id too, if it had one */
		if (in) {
			in->nlink = 0;
			vy_inode_reap(fs, in);
		}
		if (charged)
			vy_xattr_budget_give(&fs->xattr_budget, strlen(copy) + 1);
		pthread_mutex_unlock(&fs->ns);
		free(copy);
		free(module);
		if (no_handle)
			vy_op_no_handle(req, err);
		else
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
	if (in_dir)
		vy_backed_dir_times(fs, p); /* backing=DIR: as DIR stamped it */
	vy_persist_inode(fs, in);
	if (in->xattrs.n)
		vy_persist_xattrs(fs, in); /* ACLs from the directory's default */
	if (!tmpfile) {
		vy_persist_name(fs, p, name);
		vy_persist_inode(fs, p);
	}
	if (fi) {
		in->opens++;
		fi->fh = h->fh;
		fi->keep_cache = fs->cfg.page_cache;
		struct fuse_entry_param ep;
		memset(&ep, 0, sizeof(ep));
		vy_ns_looked_up(vy_fs_ns(fs), in);
		vy_persist_lookup(fs, in);
		if (in->kind != VY_MODULE) /* a module's writer is not kept (vy_op_open) */
			vy_persist_handle(fs, h->fh, in, VY_HANDLE_FILE, 0);
		vy_op_stat(fs, in, &ep.attr);
		if (tmpfile)
			ep.attr.st_nlink = 1; /* the kernel's d_tmpfile takes it to 0 */
		ep.ino = in->ino;
		ep.generation = fs->generation;
		ep.attr_timeout = ep.entry_timeout = VY_ATTR_TIMEOUT;
		if (fuse_reply_create(req, &ep, fi) != 0) {
			vy_ns_not_looked_up(vy_fs_ns(fs), in);
			vy_persist_lookup(fs, in);
			in->opens--;
			vy_persist_handle(fs, h->fh, NULL, VY_HANDLE_FILE, 0);
			vy_open_free(vy_fs_ns(fs), h);
			vy_inode_reap(fs, in); /* an O_TMPFILE's: nothing names it */
		}
	} else {
		vy_op_reply_entry(req, fs, in);
	}
	pthread_mutex_unlock(&fs->ns);
}

void vy_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
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

void vy_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_node(req, parent, name, VY_DIR, S_IFDIR | (mode & 07777), NULL, NULL, 0);
}

void vy_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_node(req, parent, name, VY_SYMLINK, S_IFLNK | 0777, link, NULL, 0);
}

void vy_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi)
{
	make_node(req, parent, name, VY_FILE, S_IFREG | (mode & 07777), NULL, fi, 0);
}

/* Remove `name` from `parent` (a file with unlink, a directory with rmdir). */
static void remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, bool dir)
{
	vy_fs *fs = fs_of(req);
	if (vy_op_name_too_long(req, name))
		return;
	pthread_mutex_lock(&fs->ns);
	vy_inode *p = vy_u64map_get(&fs->inodes, parent);
	if (p && fs->tier)
		vy_backed_list(fs, p, false); /* DIR's names are the directory's */
	vy_dirent *d = p && p->kind == VY_DIR ? vy_dir_find(&p->dir, name) : NULL;
	vy_inode *in = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
	if (in && dir && fs->tier)
		vy_backed_list(fs, in, false); /* ENOTEMPTY where DIR has entries */
	int err = 0;
	if (!p)
		err = ENOENT;
	else if (p->kind != VY_DIR)
		err = ENOTDIR;
	else if (!in)
		err = ENOENT;
	else if (in->fixed || vy_op_frozen(in, true) || vy_op_frozen(p, true))
		err = EPERM; /* chattr +i or +a on the entry or its directory */
	else if (dir && in->kind != VY_DIR)
		err = ENOTDIR;
	else if (!dir && in->kind == VY_DIR)
		err = EISDIR;
	else if (dir && in->dir.count > 0)
		err = ENOTEMPTY;
	else if (vy_kind_ops_of(in)->unlink)
		err = vy_kind_ops_of(in)->unlink(fs, p, in); /* a module's log goes with it */
	if (!err && fs->tier)
		err = vy_backed_remove(fs, p, name, in, dir);
	if (!err) {
		vy_dir_remove(&p->dir, name);
		if (dir) {
			in->nlink = 0;
			p->nlink--;
		} else {
			fs->extra_links -= in->nlink > 1;
			in->nlink--;
		}
		vy_inode_touch(p, true);
		vy_inode_touch(in, false);
		if (fs->tier) {
			vy_backed_dir_times(fs, p);
			if (in->kind == VY_FILE && in->nlink > 0)
				vy_backed_times_locked(fs, in);
		}
		vy_persist_name(fs, p, name);
		vy_persist_inode(fs, p);
		vy_persist_inode(fs, in);
		vy_inode_reap(fs, in);
	}
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_err(req, err);
}

void vy_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_name(req, parent, name, false);
}

void vy_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
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
	vy_inode *wh = err ? NULL : vy_inode_new(vy_fs_ns(fs), VY_SPECIAL, mode, ctx->uid, gid);
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

/* A rename's changes, kept for a successor: both names, the inodes they
 * name now (a whiteout too) and the one the new name held. ns held. */
static void kept_rename(vy_fs *fs, vy_inode *p, const char *name, vy_inode *np, const char *newname, vy_inode *in,
			vy_inode *target)
{
	vy_dirent *d = vy_dir_find(&p->dir, name);
	vy_inode *now = d && d->ino != in->ino ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
	if (now && now != target) {
		vy_persist_inode(fs, now); /* the whiteout */
		if (now->xattrs.n)
			vy_persist_xattrs(fs, now);
	}
	vy_persist_name(fs, p, name);
	vy_persist_name(fs, np, newname);
	vy_persist_inode(fs, in);
	if (target)
		vy_persist_inode(fs, target);
	vy_persist_inode(fs, p);
	if (np != p)
		vy_persist_inode(fs, np);
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
	int err = vy_op_writable_dir(fs, p);
	if (!err)
		err = vy_op_writable_dir(fs, np);
	if (err)
		return err;
	if (fs->tier) { /* DIR's names first: what a rename replaces or finds is DIR's too */
		vy_backed_list(fs, p, false);
		vy_backed_list(fs, np, false);
		vy_dirent *t = vy_dir_find(&np->dir, newname);
		vy_inode *tin = t ? vy_u64map_get(&fs->inodes, t->ino) : NULL;
		if (tin)
			vy_backed_list(fs, tin, false);
	}
	if (p->ino == fs->modules_ino || np->ino == fs->modules_ino)
		return EPERM; /* a module's name is what launches use: copy anew */
	vy_dirent *d = vy_dir_find(&p->dir, name), *nd = vy_dir_find(&np->dir, newname);
	vy_inode *in = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
	vy_inode *target = nd ? vy_u64map_get(&fs->inodes, nd->ino) : NULL;
	if (!in)
		return ENOENT;
	if (in->fixed || (target && target->fixed))
		return EPERM;
	if (vy_op_frozen(in, true) || (target && vy_op_frozen(target, true)) || vy_op_frozen(p, true) || vy_op_frozen(np, true))
		return EPERM; /* chattr +i or +a */
	if (in->kind == VY_DIR && under(fs, np, in))
		return EINVAL; /* into itself */
	if (flags & RENAME_EXCHANGE) {
		if (!target)
			return ENOENT;
		if (target->kind == VY_DIR && under(fs, p, target))
			return EINVAL;
		if ((err = vy_backed_rename(fs, p, name, np, newname, flags)) != 0)
			return err;
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
		if ((flags & RENAME_WHITEOUT) && fs->inodes.count + fs->extra_links >= fs->cfg.max_inodes)
			return ENOSPC;
		if ((err = vy_backed_rename(fs, p, name, np, newname, flags)) != 0)
			return err; /* DIR refused: nothing moved */
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
				fs->extra_links -= target->nlink > 1;
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
	vy_backed_renamed(fs, p, name, np, newname, in, target, flags);
	if (fs->tier) {
		vy_backed_dir_times(fs, p);
		vy_backed_dir_times(fs, np);
		vy_backed_times_locked(fs, in);
		if (target && target->nlink > 0 && !(flags & RENAME_EXCHANGE))
			vy_backed_times_locked(fs, target);
		if (target && (flags & RENAME_EXCHANGE))
			vy_backed_times_locked(fs, target);
	}
	kept_rename(fs, p, name, np, newname, in, target);
	return 0;
}

void vy_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	vy_fs *fs = fs_of(req);
	vy_inode *gone = NULL;
	/* A whiteout is the caller's: a rename names no caller where the
	 * kernel takes idmapped mounts (session.h), so ask /proc, before the
	 * lock. Nobody known: no whiteout of nobody's. */
	struct fuse_ctx who = *fuse_req_ctx(req);
	if (flags & RENAME_WHITEOUT) {
		who.uid = vy_session_caller_uid(req);
		who.gid = vy_session_caller_gid(req);
		if (who.uid == (uid_t)-1 || who.gid == (gid_t)-1) {
			fuse_reply_err(req, EPERM);
			return;
		}
	}
	pthread_mutex_lock(&fs->ns);
	int err = do_rename(fs, &who, parent, name, newparent, newname, flags, &gone);
	if (gone)
		vy_inode_reap(fs, gone);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_err(req, err);
}

/* backing=DIR: a resent link whose daemon died after DIR's link, the new
 * name since taken from DIR's listing as this very file: done. */
static bool linked_before(vy_fs *fs, vy_inode *in, vy_inode *np, const char *newname)
{
	const vy_dirent *d = fs->tier && vy_session_resent() ? vy_dir_find(&np->dir, newname) : NULL;
	return d && d->ino == in->ino;
}

void vy_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	vy_fs *fs = fs_of(req);
	if (vy_op_name_too_long(req, newname))
		return;
	pthread_mutex_lock(&fs->ns);
	vy_inode *in = vy_u64map_get(&fs->inodes, ino), *np = vy_u64map_get(&fs->inodes, newparent);
	if (np && fs->tier)
		vy_backed_list(fs, np, false);
	int err = vy_op_writable_dir(fs, np);
	if (!err && in && linked_before(fs, in, np, newname)) {
		vy_op_reply_entry(req, fs, in);
		pthread_mutex_unlock(&fs->ns);
		return;
	}
	if (!err && (!in || (in->nlink == 0 && !in->linkable)))
		err = ENOENT; /* gone, or an O_TMPFILE made with O_EXCL */
	else if (!err && (!vy_kind_ops_of(in)->hard_links || in->fixed || np->ino == fs->modules_ino))
		err = EPERM;
	else if (!err && vy_dir_find(&np->dir, newname))
		err = EEXIST;
	else if (!err && (vy_op_frozen(in, true) || vy_op_frozen(np, false)))
		err = EPERM; /* chattr +i or +a */
	else if (!err && in->nlink == UINT32_MAX)
		err = EMLINK;
	else if (!err && fs->inodes.count + fs->extra_links >= fs->cfg.max_inodes)
		err = ENOSPC; /* a link takes an inode's worth, as on tmpfs */
	else if (!err && fs->tier && (err = vy_backed_link(fs, in, np, newname)) != 0)
		; /* DIR refused it */
	else if (!err && !vy_dir_add(&np->dir, newname, in->ino))
		err = ENOMEM;
	if (err) {
		fuse_reply_err(req, err);
	} else {
		fs->extra_links += in->nlink > 0;
		in->nlink++;
		vy_inode_touch(in, false);
		vy_inode_touch(np, true);
		if (fs->tier) {
			vy_backed_dir_times(fs, np);
			vy_backed_times_locked(fs, in);
		}
		vy_persist_name(fs, np, newname);
		vy_persist_inode(fs, in);
		vy_persist_inode(fs, np);
		vy_op_reply_entry(req, fs, in);
	}
	pthread_mutex_unlock(&fs->ns);
}

/* An open directory (ns/handles.h: {inode, limit}): readdir shows the
 * entries made before `limit` (a cookie), fixed at opendir and at each
 * rewind. An entry created, or renamed (a rename makes a new entry), after
 * that need not appear, as tmpfs answers: a reader that renames each entry
 * it reads ends, and sees each original name once. */
void vy_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	pthread_mutex_lock(&fs->ns);
	vy_inode *in = vy_u64map_get(&fs->inodes, ino);
	int err = !in ? ENOENT : in->kind != VY_DIR ? ENOTDIR : 0;
	if (!err && fs->tier)
		vy_backed_list(fs, in, true); /* and what DIR gained behind the mount since */
	uint64_t fh = 0;
	int herr = err ? 0 : vy_handles_add_dir(&fs->handles, ino, in->dir.next_cookie, &fh);
	if (!err && !herr)
		vy_persist_handle(fs, fh, in, VY_HANDLE_DIR, in->dir.next_cookie);
	pthread_mutex_unlock(&fs->ns);
	vy_backed_notify(fs); /* names DIR lost behind the mount, out of the kernel's cache too */
	if (err || herr) {
		if (herr)
			vy_op_no_handle(req, herr);
		else
			fuse_reply_err(req, err);
		return;
	}
	fi->fh = fh;
	if (fuse_reply_open(req, fi) != 0) {
		pthread_mutex_lock(&fs->ns);
		vy_handles_free(&fs->handles, fh, VY_HANDLE_DIR);
		vy_persist_handle(fs, fh, NULL, VY_HANDLE_DIR, 0);
		pthread_mutex_unlock(&fs->ns);
	}
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
void vy_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	char *buf = malloc(size ? size : 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	pthread_mutex_lock(&fs->ns);
	vy_inode *d = vy_u64map_get(&fs->inodes, ino);
	vy_handle_dir *od = vy_handles_dir(&fs->handles, fi->fh);
	int err = !od || od->ino != ino ? EBADF : !d ? ENOENT : d->kind != VY_DIR ? ENOTDIR : 0;
	if (err) {
		pthread_mutex_unlock(&fs->ns);
		free(buf);
		fuse_reply_err(req, err);
		return;
	}
	if (off <= 0 && od->limit != d->dir.next_cookie) {
		od->limit = d->dir.next_cookie; /* a rewind sees the directory anew */
		vy_persist_handle(fs, fi->fh, d, VY_HANDLE_DIR, od->limit);
	}
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
	vy_atime_read(fs, d, false); /* open: the kernel holds it; it drops its atime after a readdir */
	fuse_reply_buf(req, buf, used);
	free(buf);
}

void vy_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	pthread_mutex_lock(&fs->ns);
	vy_handle_dir *od = vy_handles_dir(&fs->handles, fi->fh);
	bool ours = od && od->ino == ino && vy_handles_free(&fs->handles, fi->fh, VY_HANDLE_DIR);
	if (ours)
		vy_persist_handle(fs, fi->fh, NULL, VY_HANDLE_DIR, 0);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_err(req, ours ? 0 : EBADF);
}
