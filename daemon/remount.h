/* Remounting a live vyrefs mount: `vyrefs [SOURCE] MNT -o remount,...`, as
 * mount.fuse3 runs it for `mount -o remount,...`. */
#ifndef VY_FS_REMOUNT_H
#define VY_FS_REMOUNT_H

#include "config/config.h"

/* Change the mount flags of the vyrefs mount at `mountpoint` by the
 * comma-separated `mount_flags` (ro, rw, nosuid, nodev, noexec, noatime,
 * relatime, ...; those not named stay as they are). Each key=value in
 * `settings` must be what the mount runs with (read from its
 * .vyre/config); one that would change is refused by name. The process's
 * exit status: 0, 1 on failure, 2 on a refused option. */
int vy_remount(const char *mountpoint, const char *mount_flags, const char *settings);

#endif
