/* A backing mount's names (backed.h): DIR's entries become inodes when a
 * directory is first used, and every change of names, modes, owners and
 * times is made in DIR before the namespace takes it, so a refusal of
 * DIR's (EACCES over NFS, ENOSPC, EEXIST behind the mount) changes
 * nothing. Directories are reached through O_PATH fds each item holds,
 * opened beneath their parent's (tier/dir.h): no path is ever built. */
#include "fs/backed.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "core/grow.h"
#include "fs/devices.h"
#include "fs/file.h"
#include "ns/acl.h"
#include "persist/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Directory `d`'s O_PATH fd in DIR (ns held), opened beneath its parent's
 * the first time: the fd, or -errno. */
static int dir_fd(vy_fs *fs, vy_inode *d, unsigned depth)
{
	vy_tier_item *it = d->tier;
	if (!it || d->kind != VY_DIR)
		return -ENOENT;
	if (it->fd >= 0)
		return it->fd;
	if (!it->name || depth > 4096)
		return -ENOENT;
	vy_inode *p = vy_u64map_get(&fs->inodes, it->parent);
	int pfd = p ? dir_fd(fs, p, depth + 1) : -ENOENT;
	if (pfd < 0)
		return pfd;
	int fd = vy_tier_open_dir(pfd, it->name);
	if (fd >= 0)
		it->fd = fd;
	return fd;
}

int vy_backed_where(vy_fs *fs, vy_inode *in, const char **name)
{
	vy_tier_item *it = in->tier;
	if (!it || !it->name)
		return -ENOENT;
	vy_inode *p = vy_u64map_get(&fs->inodes, it->parent);
	*name = it->name;
	return p ? dir_fd(fs, p, 0) : -ENOENT;
}

static vy_kind kind_of(mode_t mode)
{
	return S_ISDIR(mode) ? VY_DIR : S_ISREG(mode) ? VY_FILE : S_ISLNK(mode) ? VY_SYMLINK : VY_SPECIAL;
}

/* The xattrs a mount over DIR shows and keeps in DIR: user.* (not
 * user.vyre.*, the mount's own) and, where the kernel enforces them, the
 * POSIX ACLs. */
static bool user_xattr(const char *n)
{
	return !strncmp(n, "user.", 5) && strncmp(n, "user.vyre.", 10);
}

static bool user_or_acl_xattr(const char *n)
{
	return user_xattr(n) || vy_acl_name(n);
}

bool vy_backed_xattr_kept(vy_fs *fs, const char *n)
{
	return fs->acl ? user_or_acl_xattr(n) : user_xattr(n);
}

static void took_xattr(void *ctx, const char *n, const void *value, size_t size)
{
	vy_inode *in = ctx;
	vy_xattrs_set(&in->xattrs, n, value, size, 0); /* past the budget: not shown */
}

/* `in` takes DIR's times: every inode's times come from DIR, so a change
 * shows in them exactly as DIR's filesystem stamps it. */
static void times_of(vy_inode *in, const struct stat *st)
{
	pthread_mutex_lock(&in->meta);
	in->atime = st->st_atim;
	in->mtime = st->st_mtim;
	in->ctime = st->st_ctim;
	pthread_mutex_unlock(&in->meta);
}

void vy_backed_dir_times(vy_fs *fs, vy_inode *d)
{
	struct stat st;
	int fd = fs->tier && d->tier ? dir_fd(fs, d, 0) : -1;
	if (fd >= 0 && vy_tier_stat(fd, "", &st) == 0)
		times_of(d, &st);
}

/* The inode DIR's file `st` already has (a second name of it), or NULL. */
static vy_inode *known(vy_fs *fs, const struct stat *st)
{
	/* One name in DIR: no other. A number DIR reused for a new file after
	 * the old one went behind the mount is not that file either: the
	 * inode's own name must still be this file. */
	if (S_ISDIR(st->st_mode) || st->st_nlink < 2)
		return NULL;
	uint64_t ino = (uint64_t)(uintptr_t)vy_u64map_get(&fs->tier->ids, vy_tier_id(st));
	vy_inode *in = ino ? vy_u64map_get(&fs->inodes, ino) : NULL;
	if (!in || !in->tier || in->tier->ino != st->st_ino || in->tier->dev != st->st_dev || in->nlink == 0)
		return NULL;
	const char *name;
	struct stat now;
	int at = in->tier->name ? vy_backed_where(fs, in, &name) : -1;
	if (in->tier->fd >= 0 ? fstat(in->tier->fd, &now) != 0 || now.st_nlink == 0
			      : at < 0 || vy_tier_stat(at, name, &now) != 0)
		return NULL;
	return now.st_ino == st->st_ino && now.st_dev == st->st_dev ? in : NULL;
}

/* DIR's entry `name` of directory `p` (stat `st`) as an inode (ns held). */
static vy_inode *adopt(vy_fs *fs, vy_inode *p, const char *name, const struct stat *st)
{
	if (vy_dir_find(&p->dir, name))
		return NULL;
	vy_inode *in = known(fs, st);
	if (in) { /* a hard link: one inode, another name (DIR's count has it) */
		if (!vy_dir_add(&p->dir, name, in->ino))
			return NULL;
		fs->extra_links++;
		/* DIR's count, as an adopted file's: a link DIR got behind the
		 * mount (or made by a daemon that died before it answered). */
		if (st->st_nlink > in->nlink)
			in->nlink = st->st_nlink > UINT32_MAX ? UINT32_MAX : (uint32_t)st->st_nlink;
		if (!in->tier->name) /* the name it knew went: this one */
			vy_tier_item_rename(in->tier, p->ino, name);
		vy_persist_adopted(fs, p, name, in);
		return in;
	}
	if (fs->inodes.count + fs->extra_links >= fs->cfg.max_inodes) {
		vy_log(LOG_WARNING, "backing directory: %s and more are not shown: the mount holds max_inodes=%llu "
				    "(Fix: mount with a larger max_inodes)",
		       name, (unsigned long long)fs->cfg.max_inodes);
		return NULL;
	}
	vy_kind kind = kind_of(st->st_mode);
	char *target = NULL;
	if (kind == VY_SYMLINK) {
		char buf[4096];
		int pfd = dir_fd(fs, p, 0);
		if (pfd < 0 || vy_tier_readlink(pfd, name, buf, sizeof(buf)) != 0 || !(target = strdup(buf)))
			return NULL;
		if (!vy_xattr_budget_take(&fs->xattr_budget, strlen(target) + 1)) {
			free(target);
			return NULL;
		}
	}
	in = vy_inode_new(vy_fs_ns(fs), kind, st->st_mode, st->st_uid, st->st_gid);
	vy_tier_item *it = in ? vy_tier_item_new(in->ino, p->ino, name) : NULL;
	if (!it || !vy_dir_add(&p->dir, name, in->ino)) {
		if (target) {
			vy_xattr_budget_give(&fs->xattr_budget, strlen(target) + 1);
			free(target);
		}
		if (in) {
			in->nlink = 0;
			vy_ns_reap(vy_fs_ns(fs), in);
		}
		vy_tier_item_free(it);
		return NULL;
	}
	vy_tier_item_saw(it, st);
	in->tier = it;
	in->target = target;
	if (kind == VY_FILE || kind == VY_DIR) /* DIR's xattrs, read as the entry is */
		vy_tier_xattrs(dir_fd(fs, p, 0), name, fs->acl ? user_or_acl_xattr : user_xattr, took_xattr, in);
	in->atime = st->st_atim;
	in->mtime = st->st_mtim;
	in->ctime = st->st_ctim;
	vy_devices_place(fs, p, in);
	/* DIR's link count: a directory's counts its subdirectories, a
	 * file's its names, whether or not the mount listed them yet. */
	in->nlink = st->st_nlink > UINT32_MAX ? UINT32_MAX : (uint32_t)st->st_nlink;
	if (kind == VY_DIR) {
		in->nlink = in->nlink < 2 ? 2 : in->nlink;
		in->parent = p->ino;
	} else {
		in->nlink = in->nlink < 1 ? 1 : in->nlink;
		in->rdev = kind == VY_SPECIAL ? st->st_rdev : 0;
	}
	if (kind == VY_FILE) {
		in->size = (uint64_t)st->st_size;
		it->src = in->size;
		vy_u64map_put(&fs->tier->ids, vy_tier_id(st), (void *)(uintptr_t)in->ino);
	}
	vy_persist_adopted(fs, p, name, in); /* survive=on: kept at once, nobody holds it yet */
	vy_backed_keep(fs, in);
	return in;
}

typedef struct listing {
	vy_fs *fs;
	vy_inode *d;
	/* A listing again (opendir): the names DIR has now, sorted after. */
	char **names;
	size_t n, cap;
	bool failed;
} listing;

/* Whether the mount may forget `in` as DIR did (ns held): nothing of it
 * is open, mapped or not yet in DIR, and a directory holds nothing. */
static bool forgettable(const vy_inode *in)
{
	const vy_tier_item *it = in->tier;
	return it && !in->fixed && !in->opens && !in->maps && !it->dirty.count && !it->suspect.count &&
	       (in->kind != VY_DIR || in->dir.count == 0);
}

/* Entry `name` of `d` goes from the namespace: DIR lost it behind the
 * mount (ns held). */
static void forget_name(vy_fs *fs, vy_inode *d, const char *name, vy_inode *in)
{
	vy_dir_remove(&d->dir, name);
	if (in->kind == VY_DIR) {
		in->nlink = 0;
		d->nlink--;
	} else if (in->nlink > 0) {
		fs->extra_links -= in->nlink > 1;
		in->nlink--;
	}
	if (in->tier && in->tier->parent == d->ino && in->tier->name && !strcmp(in->tier->name, name))
		vy_tier_item_rename(in->tier, 0, NULL);
	vy_tier_gone_add(fs->tier, d->ino, name); /* the kernel's dentry too (vy_backed_notify) */
	vy_persist_lost(fs, d, name, in);
	vy_inode_reap(fs, in);
}

void vy_backed_notify(vy_fs *fs)
{
	if (!fs->tier)
		return;
	struct vy_tier_gone_name g[32];
	for (size_t n; (n = vy_tier_gone_take(fs->tier, g, 32)) > 0;)
		for (size_t i = 0; i < n; i++) {
			if (fs->se) /* -ENOENT: the kernel held none */
				fuse_lowlevel_notify_inval_entry(fs->se, g[i].parent, g[i].name, strlen(g[i].name));
			free(g[i].name);
		}
}

static bool list_one(void *ctx, const char *name, const struct stat *st)
{
	listing *l = ctx;
	/* .vyre at the root is the mount's own: DIR's is not shown. */
	if (l->d->ino == FUSE_ROOT_ID && !strcmp(name, ".vyre"))
		return true;
	if (strlen(name) > 255)
		return true;
	if (l->names) {
		vy_dirent *e = vy_dir_find(&l->d->dir, name);
		vy_inode *in = e ? vy_u64map_get(&l->fs->inodes, e->ino) : NULL;
		/* The same name for another file of DIR's: the old one goes. */
		if (in && in->tier && (in->tier->ino != st->st_ino || in->tier->dev != st->st_dev) && forgettable(in))
			forget_name(l->fs, l->d, name, in);
		char *copy = l->n < l->cap || vy_grow((void **)&l->names, &l->cap, l->n, sizeof(char *)) ? strdup(name) : NULL;
		if (copy)
			l->names[l->n++] = copy;
		else
			l->failed = true;
	}
	adopt(l->fs, l->d, name, st);
	return true;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A listing again: the names the namespace has and DIR lost go, where
 * nothing holds them (ns held). */
static void forget_lost(vy_fs *fs, vy_inode *d, listing *l)
{
	qsort(l->names, l->n, sizeof(char *), by_name);
	/* First the names, then their removal: the walk never sees a changed
	 * directory. */
	char **lost = NULL;
	size_t n = 0, cap = 0;
	for (const vy_dirent *e = vy_dir_next(&d->dir, 0); e; e = vy_dir_next(&d->dir, e->cookie)) {
		const char *name = e->name;
		vy_inode *in = vy_u64map_get(&fs->inodes, e->ino);
		if (!in || !forgettable(in) || bsearch(&name, l->names, l->n, sizeof(char *), by_name))
			continue;
		char *copy = vy_grow((void **)&lost, &cap, n, sizeof(char *)) ? strdup(name) : NULL;
		if (!copy)
			break; /* the rest stays shown: no harm */
		lost[n++] = copy;
	}
	for (size_t i = 0; i < n; i++) {
		vy_dirent *e = vy_dir_find(&d->dir, lost[i]);
		vy_inode *in = e ? vy_u64map_get(&fs->inodes, e->ino) : NULL;
		if (in)
			forget_name(fs, d, lost[i], in);
		free(lost[i]);
	}
	free(lost);
}

int vy_backed_list(vy_fs *fs, vy_inode *d, bool again)
{
	if (!fs->tier || !d->tier || d->kind != VY_DIR || (d->tier->listed && !again))
		return 0;
	int fd = dir_fd(fs, d, 0);
	if (fd < 0)
		return -fd;
	bool relist = d->tier->listed;
	listing l = {.fs = fs, .d = d};
	if (relist && !vy_grow((void **)&l.names, &l.cap, 0, sizeof(char *)))
		return ENOMEM;
	int err = vy_tier_list(fd, list_one, &l);
	if (err) {
		atomic_fetch_add(&fs->tier->stats.errors, 1);
		vy_log(LOG_WARNING, "backing directory: cannot list a directory (inode %llu): %s",
		       (unsigned long long)d->ino, strerror(err));
	} else if (relist && !l.failed) {
		forget_lost(fs, d, &l);
	}
	for (size_t i = 0; i < l.n; i++)
		free(l.names[i]);
	free(l.names);
	if (!err)
		d->tier->listed = true;
	return err;
}

vy_inode *vy_backed_lookup(vy_fs *fs, vy_inode *d, const char *name)
{
	if (!fs->tier || !d->tier || d->kind != VY_DIR || (d->ino == FUSE_ROOT_ID && !strcmp(name, ".vyre")))
		return NULL;
	if (!d->tier->listed) {
		vy_backed_list(fs, d, false);
		vy_dirent *e = vy_dir_find(&d->dir, name);
		return e ? vy_u64map_get(&fs->inodes, e->ino) : NULL;
	}
	int fd = dir_fd(fs, d, 0);
	struct stat st;
	if (fd < 0 || strlen(name) > 255 || vy_tier_stat(fd, name, &st) != 0)
		return NULL;
	return adopt(fs, d, name, &st); /* made since the listing, behind the mount */
}

int vy_backed_make(vy_fs *fs, vy_inode *p, const char *name, mode_t mode, uid_t uid, gid_t gid,
		   const char *target, dev_t rdev, struct stat *st)
{
	if (!fs->tier || !p->tier)
		return 0;
	int err = vy_backed_list(fs, p, false);
	int fd = err ? -err : dir_fd(fs, p, 0);
	if (fd < 0)
		return -fd;
	/* Root makes it and gives it to its maker; a user's mount is the user's. */
	uid_t u = geteuid() == 0 ? uid : (uid_t)-1;
	gid_t g = geteuid() == 0 ? gid : (gid_t)-1;
	if (S_ISDIR(mode))
		err = vy_tier_mkdir(fd, name, mode, u, g);
	else if (S_ISLNK(mode))
		err = vy_tier_symlink(fd, name, target, u, g);
	else if (S_ISREG(mode))
		err = vy_tier_create(fd, name, mode, u, g, NULL);
	else
		err = vy_tier_mknod(fd, name, mode, rdev, u, g);
	if (!err)
		err = vy_tier_stat(fd, name, st);
	return err;
}

void vy_backed_unmake(vy_fs *fs, vy_inode *p, const char *name, mode_t kind, uid_t uid, const char *target,
		      dev_t rdev)
{
	if (!fs->tier || !p->tier)
		return;
	int fd = dir_fd(fs, p, 0);
	struct stat st;
	if (fd < 0 || vy_tier_stat(fd, name, &st) != 0 || (st.st_mode & S_IFMT) != (kind & S_IFMT))
		return;
	/* Its maker's once chowned; the daemon's if it died before that. */
	bool ours = st.st_uid == geteuid() || (geteuid() == 0 && st.st_uid == uid);
	bool known = vy_u64map_get(&fs->tier->ids, vy_tier_id(&st)) != NULL;
	char was[PATH_MAX];
	if (!ours || known)
		return;
	if (S_ISREG(st.st_mode) && (st.st_size || st.st_nlink != 1))
		return;
	if (S_ISLNK(st.st_mode) && (vy_tier_readlink(fd, name, was, sizeof(was)) != 0 || strcmp(was, target)))
		return;
	if ((S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) && st.st_rdev != rdev)
		return;
	/* A directory goes only while empty (rmdir). */
	int err = vy_tier_unlink(fd, name, S_ISDIR(st.st_mode));
	vy_log(err ? LOG_WARNING : LOG_NOTICE, "takeover: %s, made in the backing directory by a resent request "
					       "whose daemon died before it answered, %s",
	       name, err ? "stays (the resend is answered EEXIST)" : "is made again by the resend");
}

int vy_backed_made(vy_fs *fs, vy_inode *p, const char *name, vy_inode *in, const struct stat *st)
{
	if (!fs->tier || !p->tier)
		return 0;
	vy_tier_item *it = vy_tier_item_new(in->ino, p->ino, name);
	if (!it)
		return ENOMEM;
	vy_tier_item_saw(it, st);
	it->listed = true; /* new: nothing in it */
	in->tier = it;
	in->btime = st->st_mtim;
	times_of(in, st);
	if (in->kind == VY_FILE)
		vy_u64map_put(&fs->tier->ids, vy_tier_id(st), (void *)(uintptr_t)in->ino);
	vy_backed_keep(fs, in);
	return 0;
}

/* A file about to lose the name its item knows, that stays reachable
 * (another name, or open): its fd keeps DIR's file in reach. */
static void anchor(vy_fs *fs, vy_inode *in, int at, const char *name)
{
	vy_tier_item *it = in->tier;
	if (in->kind != VY_FILE || !it || it->fd >= 0)
		return;
	int fd = vy_tier_open(at, name, O_RDWR, 0);
	if (fd == -EACCES || fd == -EROFS || fd == -EPERM)
		fd = vy_tier_open(at, name, O_RDONLY, 0);
	if (fd >= 0)
		it->fd = fd;
	(void)fs;
}

/* The item of `in` loses its name `name` in `p`: another of the file's
 * names, if it has one (a hard link; ns held), or none. */
static void another_name(vy_fs *fs, vy_inode *in, vy_inode *p, const char *name)
{
	uint64_t key;
	void *value;
	size_t cursor = 0;
	vy_inode *d = p;
	while (in->nlink > 1 && d) {
		for (const vy_dirent *e = vy_dir_next(&d->dir, 0); e; e = vy_dir_next(&d->dir, e->cookie))
			if (e->ino == in->ino && (d != p || strcmp(e->name, name))) {
				vy_tier_item_rename(in->tier, d->ino, e->name);
				return;
			}
		do /* then every other directory: hard links are rare */
			d = vy_u64map_next(&fs->inodes, &cursor, &key, &value) ? value : NULL;
		while (d && (d == p || d->kind != VY_DIR));
	}
	vy_tier_item_rename(in->tier, 0, NULL);
}

int vy_backed_remove(vy_fs *fs, vy_inode *p, const char *name, vy_inode *in, bool dir)
{
	if (!fs->tier || !p->tier)
		return 0;
	int fd = dir_fd(fs, p, 0);
	if (fd < 0)
		return -fd;
	if (in && (in->nlink > 1 || in->opens))
		anchor(fs, in, fd, name);
	int err = vy_tier_unlink(fd, name, dir);
	if (err == ENOENT)
		err = 0; /* gone behind the mount already */
	if (!err && in && in->tier && in->tier->name && in->tier->parent == p->ino && !strcmp(in->tier->name, name))
		another_name(fs, in, p, name);
	return err;
}

int vy_backed_rename(vy_fs *fs, vy_inode *p, const char *name, vy_inode *np, const char *newname, unsigned flags)
{
	if (!fs->tier || !p->tier || !np->tier)
		return 0;
	int fd = dir_fd(fs, p, 0), nfd = dir_fd(fs, np, 0);
	if (fd < 0 || nfd < 0)
		return fd < 0 ? -fd : -nfd;
	vy_dirent *nd = vy_dir_find(&np->dir, newname);
	vy_inode *target = nd ? vy_u64map_get(&fs->inodes, nd->ino) : NULL;
	if (target && !(flags & RENAME_EXCHANGE) && (target->nlink > 1 || target->opens))
		anchor(fs, target, nfd, newname);
	int err = vy_tier_rename(fd, name, nfd, newname, flags);
	if (err == ENOENT && !(flags & RENAME_EXCHANGE)) {
		/* DIR has it done already (survive=on: the daemon died between
		 * DIR's rename and its answer, and this is the kernel's resend):
		 * the new name is this very file and the old one is gone, so
		 * the namespace's rename is what is left to do. */
		vy_dirent *od = vy_dir_find(&p->dir, name);
		vy_inode *in = od ? vy_u64map_get(&fs->inodes, od->ino) : NULL;
		struct stat now, old;
		if (in && in->tier && in->tier->ino && vy_tier_stat(nfd, newname, &now) == 0 &&
		    now.st_ino == in->tier->ino && now.st_dev == in->tier->dev && vy_tier_stat(fd, name, &old) == ENOENT)
			err = 0;
	}
	return err;
}

void vy_backed_renamed(vy_fs *fs, vy_inode *p, const char *name, vy_inode *np, const char *newname, vy_inode *in,
		       vy_inode *target, unsigned flags)
{
	if (!fs->tier || !p->tier || !np->tier)
		return;
	if (target && !(flags & RENAME_EXCHANGE) && target->tier && target->tier->name &&
	    target->tier->parent == np->ino && !strcmp(target->tier->name, newname))
		vy_tier_item_rename(target->tier, 0, NULL);
	if (in->tier && !vy_tier_item_rename(in->tier, np->ino, newname))
		vy_log(LOG_ERR, "backing directory: out of memory naming inode %llu", (unsigned long long)in->ino);
	if ((flags & RENAME_EXCHANGE) && target && target->tier)
		vy_tier_item_rename(target->tier, p->ino, name);
	if (flags & RENAME_WHITEOUT) {
		vy_dirent *d = vy_dir_find(&p->dir, name);
		vy_inode *wh = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
		int fd = dir_fd(fs, p, 0);
		struct stat st;
		if (wh && !wh->tier && fd >= 0 && vy_tier_stat(fd, name, &st) == 0)
			vy_backed_made(fs, p, name, wh, &st);
	}
}

int vy_backed_link(vy_fs *fs, vy_inode *in, vy_inode *np, const char *newname)
{
	if (!fs->tier || !np->tier)
		return 0;
	const char *name;
	int fd = in->tier ? vy_backed_where(fs, in, &name) : -ENOENT, nfd = dir_fd(fs, np, 0);
	if (fd < 0 || nfd < 0)
		return fd < 0 ? -fd : -nfd;
	int err = vy_tier_link(fd, name, nfd, newname);
	struct stat st;
	/* A resend whose daemon died after DIR's link: the name is this very
	 * file already, and the namespace's link is what is left to do. */
	if (err == EEXIST && vy_session_resent() && in->tier->ino && vy_tier_stat(nfd, newname, &st) == 0 &&
	    st.st_ino == in->tier->ino && st.st_dev == in->tier->dev)
		err = 0;
	return err;
}

/* The entry of `in` in DIR (at, name) as an O_PATH fd, when the mount
 * knows which file of DIR's it is: a change goes to that file only, never
 * to another put under its name behind the mount (ESTALE then). -1: by
 * name (a symlink, or a file whose identity a successor did not keep). */
static int same_entry(vy_inode *in, int at, const char *name, int *err)
{
	const vy_tier_item *it = in->tier;
	if (!name || in->kind == VY_SYMLINK || !it->ino)
		return -1;
	int fd = vy_tier_open_same(at, name, it->dev, it->ino);
	if (fd < 0)
		*err = -fd;
	return fd;
}

int vy_backed_setattr(vy_fs *fs, vy_inode *in, int to_set, const struct stat *attr)
{
	if (!fs->tier || !in->tier)
		return 0;
	pthread_mutex_lock(&fs->ns);
	/* The root is DIR itself: its own attributes stay DIR's (docs/tier.md). */
	const char *name = NULL;
	int fd = in->ino == FUSE_ROOT_ID ? 0 : vy_backed_where(fs, in, &name);
	int err = fd < 0 ? -fd : 0;
	int efd = !err ? same_entry(in, fd, name, &err) : -1;
	uid_t uid = to_set & FUSE_SET_ATTR_UID ? attr->st_uid : (uid_t)-1;
	gid_t gid = to_set & FUSE_SET_ATTR_GID ? attr->st_gid : (gid_t)-1;
	if (!err && name && ((to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) || !to_set)) {
		/* chown(-1, -1) too: the ctime DIR gives it. */
		if (efd >= 0)
			err = vy_tier_fchown(efd, uid, gid);
		else if (to_set)
			err = vy_tier_chown(fd, name, uid, gid);
		else
			err = fchownat(fd, name, (uid_t)-1, (gid_t)-1, AT_SYMLINK_NOFOLLOW) ? errno : 0;
	}
	if (!err && name && (to_set & FUSE_SET_ATTR_MODE) && in->kind != VY_SYMLINK)
		err = efd >= 0 ? vy_tier_fchmod(efd, attr->st_mode) : vy_tier_chmod(fd, name, attr->st_mode);
	if (!err && name && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
		if (to_set & FUSE_SET_ATTR_ATIME)
			ts[0] = to_set & FUSE_SET_ATTR_ATIME_NOW ? (struct timespec){.tv_nsec = UTIME_NOW} : attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME)
			ts[1] = to_set & FUSE_SET_ATTR_MTIME_NOW ? (struct timespec){.tv_nsec = UTIME_NOW} : attr->st_mtim;
		err = efd >= 0 ? vy_tier_futimens(efd, ts) : vy_tier_utimens(fd, name, ts);
	}
	if (efd >= 0)
		close(efd);
	pthread_mutex_unlock(&fs->ns);
	return err;
}

void vy_backed_times(vy_fs *fs, vy_inode *in)
{
	if (!fs->tier || !in->tier)
		return;
	pthread_mutex_lock(&fs->ns);
	vy_backed_times_locked(fs, in);
	pthread_mutex_unlock(&fs->ns);
}

void vy_backed_times_locked(vy_fs *fs, vy_inode *in)
{
	if (!fs->tier || !in->tier)
		return;
	const char *name = NULL;
	int fd = in->ino == FUSE_ROOT_ID ? fs->tier->dir.root : vy_backed_where(fs, in, &name);
	struct stat st;
	/* A file with bytes DIR does not hold yet keeps the mount's times. */
	bool clean = in->kind != VY_FILE || (!in->tier->dirty.count && !in->tier->suspect.count);
	if (clean && fd >= 0 && vy_tier_stat(fd, name ? name : "", &st) == 0) {
		times_of(in, &st);
		/* The mount's own change: what DIR says now is agreed, not a
		 * change behind it (a reload at the next open). */
		vy_tier_item *it = in->tier;
		/* Not while a write-back runs (the namespace would wait for
		 * all of it): its end agrees with DIR, at worst before this
		 * change, and the next open then loads the file again. */
		if (pthread_mutex_trylock(&it->flushing) == 0) {
			if (it->ino == st.st_ino && it->dev == st.st_dev)
				vy_tier_item_saw(it, &st);
			pthread_mutex_unlock(&it->flushing);
		}
	}
}

int vy_backed_setxattr(vy_fs *fs, vy_inode *in, const char *xname, const void *value, size_t size, int flags)
{
	if (!fs->tier || !in->tier || !vy_backed_xattr_kept(fs, xname) || (in->kind != VY_FILE && in->kind != VY_DIR))
		return 0;
	pthread_mutex_lock(&fs->ns);
	const char *name = NULL;
	int fd = in->ino == FUSE_ROOT_ID ? fs->tier->dir.root : vy_backed_where(fs, in, &name);
	int err = fd < 0 ? -fd : 0;
	int efd = !err ? same_entry(in, fd, name, &err) : -1;
	if (!err)
		err = efd >= 0 ? vy_tier_fsetxattr(efd, xname, value, size, flags)
			       : vy_tier_setxattr(fd, name ? name : "", xname, value, size, flags);
	if (efd >= 0)
		close(efd);
	pthread_mutex_unlock(&fs->ns);
	return err;
}

int vy_backed_statfs(vy_fs *fs, struct statvfs *out)
{
	return fstatvfs(fs->tier->dir.root, out) ? errno : 0;
}
