/* survive=on with a keeper: `.vyre/upgrade` (fs/upgrade_file.c) hands the
 * mount to the binary now installed at this daemon's path. The daemon
 * stops reading requests, waits until those it read are answered, and
 * exits VY_EXIT_TAKEOVER; the keeper starts the successor, which adopts the
 * mount as after a death. A request read in the last instant is resent to
 * it (docs/survive.md, "Upgrade"). */
#ifndef VY_DAEMON_UPGRADE_H
#define VY_DAEMON_UPGRADE_H

struct vy_fs;

/* Let `fs`'s .vyre/upgrade hand over (fs->upgrade). */
void vy_upgrade_offer(struct vy_fs *fs);

#endif
