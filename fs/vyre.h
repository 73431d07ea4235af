/* The control directory .vyre/ at the mount root: `stats`, `device` and
 * `config` show what vyrefs knows; `ctl`, `log` and `modules/` are in place
 * for the control file, which fills them. None can be removed, renamed or
 * changed, except where the design says (ctl is written to). */
#ifndef VY_VYRE_H
#define VY_VYRE_H

#include "fs/fs.h"

#define VY_VYRE_NAME ".vyre"

/* Make .vyre/ and its entries under `root` (ns held or not yet shared). */
vy_err vy_vyre_build(vy_fs *fs, vy_inode *root, vy_error *e);

/* Whether directory `dir`'s listing shows entry `ino`: .vyre is left out
 * of the root's unless vyre_dir=visible (docs/fs.md says why); lookups
 * by name reach it either way. */
bool vy_vyre_listed(const vy_fs *fs, uint64_t dir, uint64_t ino);

/* The content of a virtual file now, malloc'd; NULL if out of memory. */
char *vy_vyre_render(vy_fs *fs, vy_inode *in, size_t *len);
/* Its length now (for stat). */
size_t vy_vyre_size(vy_fs *fs, vy_inode *in);

#endif
