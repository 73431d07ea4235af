/* A loaded module kept for a successor daemon (issue "survive",
 * docs/survive.md): its image goes into a sealed memfd the keeper holds,
 * and a VY_P_MODULE record (persist/format.h) says where, with the file's
 * name, its log's and their numbers. A successor makes them again and
 * loads the image (persist/replay_modules.c). With survive=off, or before
 * the writer starts, nothing is kept. */
#ifndef VY_MODDIR_KEEP_H
#define VY_MODDIR_KEEP_H

#include <stdint.h>

#include "fs/fs.h"

/* A sealed memfd with the image module file `in` holds (its lock held), to
 * keep once it loaded; -1 when nothing is kept (survive=off) or it cannot
 * be made (logged: that module then does not survive the daemon). */
int vy_moddir_image_fd(vy_fs *fs, vy_inode *in);
/* Module `in` loaded from the image in `fd` (vy_moddir_image_fd's; closed
 * here): the keeper holds it from now on, and the record says so; the
 * image kept before goes. ns not held. */
void vy_moddir_keep(vy_fs *fs, vy_inode *in, int fd);
/* Module `in` is unloaded: its record says gone and the keeper drops its
 * image. ns held. */
void vy_moddir_unkeep(vy_fs *fs, vy_inode *in);

#endif
