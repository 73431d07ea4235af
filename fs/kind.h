/* Per-kind operations: what each kind of inode answers for the FUSE
 * operations on its bytes and attributes, one table per kind (the shape of
 * libfuse's fuse_lowlevel_ops). fs/ops_*.c do what every kind shares
 * (handles, open counts, chattr flags, argument checks) and call through
 * the table vy_kind_ops_of picks; an entry a kind lacks is NULL and the
 * operation answers for it (each entry says what).
 *
 * The tables: regular files (fs/file_kind.c), directories, symlinks and
 * special files (fs/kind.c), .vyre's rendered files (fs/vyre.c), the
 * control file (fs/ctl_file.c) and module files (fs/moddir.c). The
 * table's shape is fs/kind_ops.h, below every kind: this header's
 * vy_kind_ops_of names each kind's table. */
#ifndef VY_KIND_H
#define VY_KIND_H

#include "fs/kind_ops.h"

/* The table of `in`'s kind: the one place that looks at in->kind and
 * in->virt for the operations. */
const vy_kind_ops *vy_kind_ops_of(const vy_inode *in);

extern const vy_kind_ops vy_dir_kind, vy_symlink_kind, vy_special_kind; /* fs/kind.c */
extern const vy_kind_ops vy_file_kind;                                  /* fs/file_kind.c */
extern const vy_kind_ops vy_vyre_kind;                                  /* fs/vyre.c */
extern const vy_kind_ops vy_ctl_kind;                                   /* fs/ctl_file.c */
extern const vy_kind_ops vy_upgrade_kind;                               /* fs/upgrade_file.c */
extern const vy_kind_ops vy_module_kind;                                /* fs/moddir.c */

#endif
