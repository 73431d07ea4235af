/* .vyre/modules/: PTX, cubin and fatbin files, kept in host memory and
 * loaded through the module registry when closed after writing. The module
 * is the file's name without its extension; NAME.log shows the JIT's log.
 * A module that fails to load makes the close fail (EINVAL) and its file
 * goes, so `ls modules/` shows what is loaded (and the logs). */
#ifndef VY_MODDIR_H
#define VY_MODDIR_H

#include "fs/fs.h"

#define VY_MODULE_MAX (256u << 20)

/* Whether `name` may be created in modules/ (0, or an errno), and its
 * module name (malloc'd). */
int vy_moddir_name(const char *name, char **module);
/* The image's bytes (the inode's rwlock taken inside). 0 or an errno. */
int vy_moddir_write(vy_inode *in, uint64_t off, const char *buf, size_t size);
size_t vy_moddir_read(vy_inode *in, uint64_t off, char *buf, size_t size);
int vy_moddir_truncate(vy_inode *in, uint64_t size);
/* At close after writing: load it. 0, or an errno for close(). */
int vy_moddir_load(vy_fs *fs, vy_inode *in);
/* At the last close: a module file that never loaded (say, created empty)
 * leaves the listing too. */
void vy_moddir_closed(vy_fs *fs, vy_inode *in);
/* The module registry's maker (ctl/modules.h) for the built-in module
 * std: its source compiled like a NAME.cu (options, cache, stats); ctx is
 * the vy_fs. */
vy_err vy_moddir_make_builtin(void *ctx, const char *name, void **image, size_t *len, char **log, vy_error *e);
/* Before its name goes (ns held): unload it and drop its log. 0 or EBUSY. */
int vy_moddir_forget(vy_fs *fs, vy_inode *dir, vy_inode *in);

#endif
