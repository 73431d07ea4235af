/* The mount's devices as files see them (docs/devices.md): where a new
 * file goes, and what a full device's message says (devices_xattr.h has
 * the user.vyre.device attribute).
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
 * device dir names (and is pinned there), else to the device of dir's
 * newest file while that has room for another of its size, else to the
 * one with the most free budget; a directory takes dir's setting, as a
 * default ACL passes on. */
void vy_devices_place(vy_fs *fs, vy_inode *dir, vy_inode *in);

/* A file whose device has no room for `need` bytes of it (write lock
 * held): the device it may move to, with the most room and at least
 * `need` free, or -1: none, or the file is pinned (its user.vyre.device
 * was set, on it or its directory) or mapped. */
int vy_devices_spill_to(vy_fs *fs, const vy_inode *in, uint64_t need);

/* Device `d`'s ordinal: how users name it. */
int vy_devices_ordinal(vy_fs *fs, unsigned d);
/* An error's message without its Fix, for a message that gives its own. */
void vy_devices_what_of(const vy_error *e, char *out, size_t cap);

/* Past the budget of the file's device (rc VY_ENOSPC) on a mount of
 * several: the message names that device and the room on the others. */
void vy_devices_name_nospace(vy_fs *fs, const vy_inode *in, vy_err rc, vy_error *e);

#endif
