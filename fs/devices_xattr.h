/* The user.vyre.device attribute (docs/devices.md): it says where a file
 * lives, moves it when set, and on a directory names the device its new
 * files go to. */
#ifndef VY_DEVICES_XATTR_H
#define VY_DEVICES_XATTR_H

#include <stddef.h>

#include "fs/devices.h"

/* user.vyre.device of `in`: 0 with the ordinal in out, or an errno
 * (ENODATA: a directory without a setting, or not a file or directory). */
int vy_devices_get(vy_fs *fs, vy_inode *in, char *out, size_t cap);
/* Set it (XATTR_CREATE / XATTR_REPLACE as setxattr): a file moves there,
 * a directory's new files go there. An errno; the log says why. */
int vy_devices_set(vy_fs *fs, vy_inode *in, const char *value, size_t size, int flags);
/* Remove a directory's setting; a file always has a device (EPERM). */
int vy_devices_remove(vy_fs *fs, vy_inode *in);

#endif
