/* The backing directory: names resolved beneath DIR's fds (dir.h). */
#include "tier/dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif

/* One component: what the kernel hands a FUSE daemon for a name. Anything
 * else (a slash, "." or "..") never reaches DIR. */
static bool one_name(const char *name)
{
	return name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

int vy_tier_open(int at, const char *name, int flags, mode_t mode)
{
	if (!one_name(name))
		return -EINVAL;
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
		.mode = flags & (O_CREAT | O_TMPFILE) ? mode : 0,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, at, name, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS) /* before Linux 5.6: one component with O_NOFOLLOW is the same */
		fd = openat(at, name, flags | O_CLOEXEC | O_NOFOLLOW, mode);
	return fd < 0 ? -errno : (int)fd;
}

int vy_tier_open_dir(int at, const char *name)
{
	return vy_tier_open(at, name, O_PATH | O_DIRECTORY, 0);
}

int vy_tier_stat(int at, const char *name, struct stat *st)
{
	if (name[0] && !one_name(name))
		return EINVAL;
	return fstatat(at, name, st, AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH)) ? errno : 0;
}

vy_err vy_tier_dir_open(vy_tier_dir *d, const char *path, vy_error *e)
{
	memset(d, 0, sizeof(*d));
	d->root = -1;
	if (strlen(path) >= sizeof(d->path))
		return vy_fail(e, VY_EINVAL, "give a shorter path", "backing directory path too long");
	snprintf(d->path, sizeof(d->path), "%s", path);
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		return vy_fail(e, VY_EINVAL, "give an existing directory: backing=DIR (mkdir -p DIR first)",
			       "cannot open the backing directory %s: %s", path, strerror(err));
	}
	d->root = fd;
	d->dev = st.st_dev;
	return VY_OK;
}

void vy_tier_dir_close(vy_tier_dir *d)
{
	if (d->root >= 0)
		close(d->root);
	d->root = -1;
}

int vy_tier_list(int at, vy_tier_entry_fn fn, void *ctx)
{
	int fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	DIR *dir = fdopendir(fd);
	if (!dir) {
		int err = errno;
		close(fd);
		return err;
	}
	int err = 0;
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(dir);
		if (!de) {
			err = errno;
			break;
		}
		if (!one_name(de->d_name))
			continue;
		struct stat st;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
			continue; /* gone since readdir saw it */
		if (!fn(ctx, de->d_name, &st))
			break;
	}
	closedir(dir);
	return err;
}

/* Give what was just made its maker's owner (uid/gid -1: leave it). */
static int own(int at, const char *name, uid_t uid, gid_t gid)
{
	if (uid == (uid_t)-1 && gid == (gid_t)-1)
		return 0;
	return fchownat(at, name, uid, gid, AT_SYMLINK_NOFOLLOW) ? errno : 0;
}

/* A made entry that could not be given its owner goes again. */
static int own_or_undo(int at, const char *name, uid_t uid, gid_t gid, bool dir)
{
	int err = own(at, name, uid, gid);
	if (err)
		(void)unlinkat(at, name, dir ? AT_REMOVEDIR : 0); /* the owner's error is what the caller hears */
	return err;
}

int vy_tier_mkdir(int at, const char *name, mode_t mode, uid_t uid, gid_t gid)
{
	if (!one_name(name))
		return EINVAL;
	if (mkdirat(at, name, mode & 07777) != 0)
		return errno;
	int err = own_or_undo(at, name, uid, gid, true);
	/* mkdir applies the umask and may drop setgid: say the mode whole. */
	return err ? err : vy_tier_chmod(at, name, mode & 07777);
}

int vy_tier_mknod(int at, const char *name, mode_t mode, dev_t rdev, uid_t uid, gid_t gid)
{
	if (!one_name(name))
		return EINVAL;
	if (mknodat(at, name, mode, rdev) != 0)
		return errno;
	int err = own_or_undo(at, name, uid, gid, false);
	return err ? err : vy_tier_chmod(at, name, mode & 07777);
}

int vy_tier_symlink(int at, const char *name, const char *target, uid_t uid, gid_t gid)
{
	if (!one_name(name))
		return EINVAL;
	if (symlinkat(target, at, name) != 0)
		return errno;
	return own_or_undo(at, name, uid, gid, false);
}

int vy_tier_create(int at, const char *name, mode_t mode, uid_t uid, gid_t gid, struct stat *st)
{
	int fd = vy_tier_open(at, name, O_CREAT | O_EXCL | O_WRONLY, mode & 07777);
	if (fd < 0)
		return -fd;
	int err = 0;
	if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) != 0)
		err = errno;
	if (!err && fchmod(fd, mode & 07777) != 0) /* past the umask, and after chown dropped set-id bits */
		err = errno;
	if (!err && st && fstat(fd, st) != 0)
		err = errno;
	close(fd);
	if (err)
		unlinkat(at, name, 0);
	return err;
}

int vy_tier_unlink(int at, const char *name, bool dir)
{
	if (!one_name(name))
		return EINVAL;
	return unlinkat(at, name, dir ? AT_REMOVEDIR : 0) ? errno : 0;
}

int vy_tier_rename(int at, const char *name, int to, const char *newname, unsigned flags)
{
	if (!one_name(name) || !one_name(newname))
		return EINVAL;
	return renameat2(at, name, to, newname, flags) ? errno : 0;
}

int vy_tier_link(int at, const char *name, int to, const char *newname)
{
	if (!one_name(name) || !one_name(newname))
		return EINVAL;
	return linkat(at, name, to, newname, 0) ? errno : 0;
}

int vy_tier_readlink(int at, const char *name, char *buf, size_t cap)
{
	if (!one_name(name) || cap < 2)
		return EINVAL;
	ssize_t n = readlinkat(at, name, buf, cap - 1);
	if (n < 0)
		return errno;
	buf[n] = '\0';
	return 0;
}

int vy_tier_chmod(int at, const char *name, mode_t mode)
{
	if (!one_name(name))
		return EINVAL;
	if (syscall(SYS_fchmodat2, at, name, mode & 07777, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	if (errno != ENOSYS)
		return errno;
	/* Before Linux 6.6: the entry itself, through its O_PATH fd. */
	int fd = vy_tier_open(at, name, O_PATH, 0);
	if (fd < 0)
		return -fd;
	struct stat st;
	int err = fstat(fd, &st) ? errno : S_ISLNK(st.st_mode) ? EOPNOTSUPP : 0;
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (!err && chmod(proc, mode & 07777) != 0)
		err = errno;
	close(fd);
	return err;
}

int vy_tier_chown(int at, const char *name, uid_t uid, gid_t gid)
{
	if (!one_name(name))
		return EINVAL;
	return own(at, name, uid, gid);
}

int vy_tier_utimens(int at, const char *name, const struct timespec ts[2])
{
	if (!one_name(name))
		return EINVAL;
	return utimensat(at, name, ts, AT_SYMLINK_NOFOLLOW) ? errno : 0;
}

int vy_tier_truncate(int at, const char *name, uint64_t size)
{
	if (size > INT64_MAX)
		return EFBIG;
	int fd = vy_tier_open(at, name, O_WRONLY, 0);
	if (fd < 0)
		return -fd;
	int err = ftruncate(fd, (off_t)size) ? errno : 0;
	close(fd);
	return err;
}

int vy_tier_open_same(int at, const char *name, dev_t dev, ino_t ino)
{
	int fd = vy_tier_open(at, name, O_PATH, 0);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || st.st_dev != dev || st.st_ino != ino || S_ISLNK(st.st_mode))) {
		close(fd);
		fd = -ESTALE;
	}
	return fd;
}

/* The entry an O_PATH fd holds, as a path the kernel resolves to it and
 * nothing else (its magic link). */
static void fd_path(int fd, char *out, size_t cap)
{
	snprintf(out, cap, "/proc/self/fd/%d", fd);
}

int vy_tier_fchmod(int fd, mode_t mode)
{
	char p[64];
	fd_path(fd, p, sizeof(p));
	return chmod(p, mode & 07777) ? errno : 0;
}

int vy_tier_fchown(int fd, uid_t uid, gid_t gid)
{
	return fchownat(fd, "", uid, gid, AT_EMPTY_PATH) ? errno : 0;
}

int vy_tier_futimens(int fd, const struct timespec ts[2])
{
	char p[64];
	fd_path(fd, p, sizeof(p));
	return utimensat(AT_FDCWD, p, ts, 0) ? errno : 0;
}

int vy_tier_fsetxattr(int fd, const char *xname, const void *value, size_t size, int flags)
{
	char p[64];
	fd_path(fd, p, sizeof(p));
	return (value ? setxattr(p, xname, value, size, flags) : removexattr(p, xname)) ? errno : 0;
}

/* An fd of `name` in `at` (or `at` itself) fit for the f*xattr calls: a
 * regular file or a directory opened without following a link. */
static int xattr_fd(int at, const char *name)
{
	if (!name[0]) {
		int fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	}
	int fd = vy_tier_open(at, name, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)))) {
		close(fd);
		return -ENOTSUP; /* a FIFO or a device: nothing of theirs is opened */
	}
	return fd;
}

int vy_tier_xattrs(int at, const char *name, vy_tier_xattr_keep keep, vy_tier_xattr_fn fn, void *ctx)
{
	int fd = xattr_fd(at, name);
	if (fd < 0)
		return -fd;
	int err = 0;
	char *names = NULL, *value = NULL;
	ssize_t len = flistxattr(fd, NULL, 0);
	if (len > 0 && (names = malloc((size_t)len)) && (len = flistxattr(fd, names, (size_t)len)) > 0 &&
	    (value = malloc(65536))) {
		for (char *n = names; n < names + len; n += strlen(n) + 1) {
			if (!keep(n))
				continue;
			ssize_t v = fgetxattr(fd, n, value, 65536);
			if (v >= 0)
				fn(ctx, n, value, (size_t)v);
		}
	} else if (len < 0) {
		err = errno;
	}
	free(names);
	free(value);
	close(fd);
	return err;
}

int vy_tier_setxattr(int at, const char *name, const char *xname, const void *value, size_t size, int flags)
{
	int fd = xattr_fd(at, name);
	if (fd < 0)
		return -fd;
	int err = (value ? fsetxattr(fd, xname, value, size, flags) : fremovexattr(fd, xname)) ? errno : 0;
	close(fd);
	return err;
}

/* The whole of [off, off + len): a short read is the file's end (it
 * shrank behind the mount), the rest zeros; through an O_DIRECT fd a
 * read that ends off a block is the end too (no read may start there). */
static int read_all(int fd, void *buf, size_t len, uint64_t off, bool direct)
{
	char *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0 || (direct && n % 4096)) {
			memset(p + n, 0, len - (size_t)n);
			return 0;
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int vy_tier_pread(int fd, void *buf, size_t len, uint64_t off)
{
	return read_all(fd, buf, len, off, false);
}

int vy_tier_pread_direct(int fd, void *buf, size_t len, uint64_t off)
{
	return read_all(fd, buf, len, off, true);
}

int vy_tier_pwrite(int fd, const void *buf, size_t len, uint64_t off)
{
	const char *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}
