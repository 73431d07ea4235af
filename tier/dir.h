/* The backing directory (backing=DIR, docs/tier.md): every name is
 * resolved beneath a directory fd of DIR's, one component at a time, with
 * openat2's RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS:
 * a symlink planted in DIR is never followed and nothing outside DIR is
 * reached, whatever a user renames behind the mount. No FUSE, no device:
 * calls return 0 or a positive errno (DIR's own, so fsync can say it). */
#ifndef VY_TIER_DIR_H
#define VY_TIER_DIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "core/err.h"

typedef struct vy_tier_dir {
	int root; /* DIR itself, O_PATH | O_DIRECTORY */
	dev_t dev;
	char path[4096]; /* for messages */
} vy_tier_dir;

/* Open DIR (an absolute path to a directory the caller may use). */
vy_err vy_tier_dir_open(vy_tier_dir *d, const char *path, vy_error *e);
void vy_tier_dir_close(vy_tier_dir *d);

/* `name` (one component: no '/', not "." or "..") in the directory `at`
 * (an fd of DIR's), opened with `flags` (O_CREAT's `mode`), never through
 * a symlink: the fd, or -errno. */
int vy_tier_open(int at, const char *name, int flags, mode_t mode);
/* The same for a directory: an O_PATH | O_DIRECTORY fd, or -errno. */
int vy_tier_open_dir(int at, const char *name);
/* lstat of `name` in `at` (an empty name: `at` itself): 0 or errno. */
int vy_tier_stat(int at, const char *name, struct stat *st);

/* The entries of directory `at` in DIR, one call each (not "." or ".."):
 * `fn` returns false to stop. 0 or errno. */
typedef bool (*vy_tier_entry_fn)(void *ctx, const char *name, const struct stat *st);
int vy_tier_list(int at, vy_tier_entry_fn fn, void *ctx);

/* Namespace changes in DIR, each 0 or errno. Owners are set as given
 * (uid/gid -1: unchanged), so what a user makes is theirs in DIR too. */
int vy_tier_mkdir(int at, const char *name, mode_t mode, uid_t uid, gid_t gid);
int vy_tier_mknod(int at, const char *name, mode_t mode, dev_t rdev, uid_t uid, gid_t gid);
int vy_tier_symlink(int at, const char *name, const char *target, uid_t uid, gid_t gid);
int vy_tier_create(int at, const char *name, mode_t mode, uid_t uid, gid_t gid, struct stat *st);
int vy_tier_unlink(int at, const char *name, bool dir);
int vy_tier_rename(int at, const char *name, int to, const char *newname, unsigned flags);
int vy_tier_link(int at, const char *name, int to, const char *newname);
/* A symlink's target into buf (NUL-terminated): 0 or errno. */
int vy_tier_readlink(int at, const char *name, char *buf, size_t cap);

/* Attribute changes of `name` in `at`, never through a symlink. */
int vy_tier_chmod(int at, const char *name, mode_t mode);
int vy_tier_chown(int at, const char *name, uid_t uid, gid_t gid);
int vy_tier_utimens(int at, const char *name, const struct timespec ts[2]);
int vy_tier_truncate(int at, const char *name, uint64_t size);

/* The entry `name` of `at` as an O_PATH fd, only while it is still DIR's
 * file (dev, ino): -ESTALE when another file took the name behind the
 * mount (the caller then changes nothing), or -errno. Not a symlink. */
int vy_tier_open_same(int at, const char *name, dev_t dev, ino_t ino);
/* The same changes, of the entry `fd` (vy_tier_open_same's) itself. */
int vy_tier_fchmod(int fd, mode_t mode);
int vy_tier_fchown(int fd, uid_t uid, gid_t gid);
int vy_tier_futimens(int fd, const struct timespec ts[2]);
int vy_tier_fsetxattr(int fd, const char *xname, const void *value, size_t size, int flags);

/* The extended attributes of `name` in `at` (a regular file or a
 * directory, never through a symlink) whose names `keep` accepts, one
 * `fn` call each. 0 or errno (ENOTSUP: DIR keeps none). */
typedef bool (*vy_tier_xattr_keep)(const char *xname);
typedef void (*vy_tier_xattr_fn)(void *ctx, const char *xname, const void *value, size_t size);
int vy_tier_xattrs(int at, const char *name, vy_tier_xattr_keep keep, vy_tier_xattr_fn fn, void *ctx);
/* setxattr(2) (value NULL: removexattr) on `name` in `at`, a regular file
 * or a directory ("" : `at` itself). 0 or errno. */
int vy_tier_setxattr(int at, const char *name, const char *xname, const void *value, size_t size, int flags);

/* Whole reads and writes of an open file: 0 or errno (a short read past
 * DIR's end gives zeros: the file shrank behind the mount). */
int vy_tier_pread(int fd, void *buf, size_t len, uint64_t off);
/* The same through an O_DIRECT fd: buf, len and off on 4 KiB; a short
 * read off a block is the end. */
int vy_tier_pread_direct(int fd, void *buf, size_t len, uint64_t off);
int vy_tier_pwrite(int fd, const void *buf, size_t len, uint64_t off);

#endif
