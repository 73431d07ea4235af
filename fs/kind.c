/* Which table answers for an inode (kind.h), and the tables of the kinds
 * that have no bytes of their own: directories, symlinks and special
 * files (FIFOs, devices, sockets: the kernel opens them itself). */
#include "fs/kind.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const vy_kind_ops *vy_kind_ops_of(const vy_inode *in)
{
	switch (in->kind) {
	case VY_FILE:
		return &vy_file_kind;
	case VY_DIR:
		return &vy_dir_kind;
	case VY_SYMLINK:
		return &vy_symlink_kind;
	case VY_SPECIAL:
		return &vy_special_kind;
	case VY_MODULE:
		return &vy_module_kind;
	case VY_VIRTUAL:
		return in->virt == VY_V_CTL ? &vy_ctl_kind : in->virt == VY_V_UPGRADE ? &vy_upgrade_kind : &vy_vyre_kind;
	}
	return &vy_special_kind; /* no other kind is made (ns/ns.h) */
}

static void dir_stat(vy_fs *fs, vy_inode *in, struct stat *st)
{
	(void)fs;
	(void)in;
	st->st_size = 4096;
	st->st_blocks = 8;
}

const vy_kind_ops vy_dir_kind = {
	.no_data = EISDIR,
	.keeps_caps = true,
	.stat = dir_stat,
};

static void symlink_stat(vy_fs *fs, vy_inode *in, struct stat *st)
{
	(void)fs;
	st->st_size = (off_t)strlen(in->target);
}

static void symlink_readlink(fuse_req_t req, vy_inode *in)
{
	/* Reply from memory of our own: once the reply is out, the inode
	 * may be forgotten and freed. */
	char *target = strdup(in->target);
	if (!target) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fuse_reply_readlink(req, target);
	free(target);
}

/* The kernel follows a symlink or answers ELOOP itself: it opens none. */
const vy_kind_ops vy_symlink_kind = {
	.no_data = EINVAL,
	.hard_links = true,
	.stat = symlink_stat,
	.readlink = symlink_readlink,
};

static void special_stat(vy_fs *fs, vy_inode *in, struct stat *st)
{
	(void)fs;
	st->st_rdev = in->rdev;
}

const vy_kind_ops vy_special_kind = {
	.no_data = ENXIO,
	.hard_links = true,
	.stat = special_stat,
};
