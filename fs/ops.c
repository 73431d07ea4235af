/* The FUSE low-level operations over a vy_fs (the session's userdata): the
 * table libfuse dispatches through, and INIT. The operations are in
 * ops_names.c, ops_data.c and ops_attr.c (op.h). */
#include "fs/ops.h"
#include "fs/op.h"
#include "daemon/session.h"

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	vy_fs *fs = userdata;
	vy_session_conn(conn, fs->cfg.max_write);
	/* File handles (name_to_handle_at, the kernel NFS server): the kernel
	 * looks up "." of a node id it has forgotten, ".." of a directory. */
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	/* POSIX ACLs, as tmpfs: the kernel enforces them from the
	 * system.posix_acl_* xattrs and leaves keeping them, the mode in step
	 * and inheritance to us (ns/acl_inode.c). With a default ACL the umask
	 * does not apply, so the kernel must leave it to us too (DONT_MASK). */
	if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK)) {
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
		fs->acl = true;
	}
}

const struct fuse_lowlevel_ops vy_fs_ops = {
	.init = op_init,
	.lookup = vy_op_lookup,
	.forget = vy_op_forget,
	.forget_multi = vy_op_forget_multi,
	.getattr = vy_op_getattr,
	.setattr = vy_op_setattr,
	.readlink = vy_op_readlink,
	.mknod = vy_op_mknod,
	.mkdir = vy_op_mkdir,
	.unlink = vy_op_unlink,
	.rmdir = vy_op_rmdir,
	.symlink = vy_op_symlink,
	.rename = vy_op_rename,
	.link = vy_op_link,
	.open = vy_op_open,
	.read = vy_op_read,
	.write = vy_op_write,
	.flush = vy_op_flush,
	.release = vy_op_release,
	.fsync = vy_op_fsync,
	.fsyncdir = vy_op_fsyncdir,
	.opendir = vy_op_opendir,
	.readdir = vy_op_readdir,
	.releasedir = vy_op_releasedir,
	.statfs = vy_op_statfs,
	.setxattr = vy_op_setxattr,
	.getxattr = vy_op_getxattr,
	.listxattr = vy_op_listxattr,
	.removexattr = vy_op_removexattr,
	.create = vy_op_create,
	.fallocate = vy_op_fallocate,
	.copy_file_range = vy_op_copy_file_range,
	.lseek = vy_op_lseek,
	.ioctl = vy_op_ioctl,
};
