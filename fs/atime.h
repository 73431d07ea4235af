/* Access times (docs/fs.md, "Times"): a read moves a file's atime as the
 * mount's flags say (relatime, the default; strictatime; noatime;
 * nodiratime for directories), as tmpfs's do. The kernel leaves atime to
 * a FUSE server (its inodes are S_NOATIME), so vyrefs moves it where a
 * request reaches it, with no round trip of its own: an open for reading,
 * a read, an opendir and readdir, a readlink. */
#ifndef VY_ATIME_H
#define VY_ATIME_H

#include <stdbool.h>

#include "fs/fs.h"

/* The mount's atime flags (MS_NOATIME, MS_RELATIME, MS_STRICTATIME,
 * MS_NODIRATIME, MS_RDONLY), read from /proc/self/mountinfo for
 * fs->mountpoint: at the mount, and at every statfs (a remount ends with
 * one). */
void vy_atime_refresh(vy_fs *fs);

/* `in` was read now: its atime moves if the flags say so. Takes its meta
 * lock; the kernel's cached atime is dropped when it moved and `notify`
 * (a reply that does not drop it itself, as an open's). */
void vy_atime_read(vy_fs *fs, vy_inode *in, bool notify);

#endif
