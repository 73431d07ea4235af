/* The mount's devices as files see them (docs/devices.md): where a new
 * file goes, and the user.vyre.device attribute, which says where a file
 * lives, moves it when set, and on a directory names the device its new
 * files go to.
 *
 * Devices are named by their ordinal (nvidia-smi -L's number; on the host
 * backend 0..host_devices-1); inodes keep an index into fs->dev. */
#ifndef VY_DEVICES_H
#define VY_DEVICES_H

#include <stdbool.h>
#include <stddef.h>

#include "fs/fs.h"

#define VY_DEVICE_XATTR "user.vyre.device"

/* A new inode `in` made in directory `dir` (ns held): a file goes to the
 * device dir names, else to the one with the most free budget; a
 * directory takes dir's setting, as a default ACL passes on. */
void vy_devices_place(vy_fs *fs, vy_inode *dir, vy_inode *in);

/* user.vyre.device of `in`: 0 with the ordinal in out, or an errno
 * (ENODATA: a directory without a setting, or not a file or directory). */
int vy_devices_get(vy_fs *fs, vy_inode *in, char *out, size_t cap);
/* Set it (XATTR_CREATE / XATTR_REPLACE as setxattr): a file moves there,
 * a directory's new files go there. An errno; the log says why. */
int vy_devices_set(vy_fs *fs, vy_inode *in, const char *value, size_t size, int flags);
/* Remove a directory's setting; a file always has a device (EPERM). */
int vy_devices_remove(vy_fs *fs, vy_inode *in);

/* Past the budget of the file's device (rc VY_ENOSPC) on a mount of
 * several: the message names that device and the room on the others. */
void vy_devices_name_nospace(vy_fs *fs, const vy_inode *in, vy_err rc, vy_error *e);

#endif
