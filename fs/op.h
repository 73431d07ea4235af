/* What the FUSE operations share (fs/ops*.c and fs/reply.c): the request's
 * filesystem and open file, replies, and the checks every operation makes;
 * what differs by the inode's kind is in its table (fs/kind.h).
 * Core errors become errnos here (vy_err_errno); the full message of a
 * failure the user must act on (ENOSPC, device errors) goes to the log. */
#ifndef VY_OP_H
#define VY_OP_H

#include "fs/fs.h"

#include <errno.h>

#define NAME_MAX_LEN 255

/* chattr's flags vyrefs keeps, as tmpfs keeps them. */
#define VY_ATTR_FLAGS (FS_IMMUTABLE_FL | FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL)

static inline vy_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The open file `fi->fh` names for inode `ino`, or NULL when it names none
 * (a stale or forged id, a directory's, another inode's): the caller
 * answers EBADF. No lock (ns/handles.h). */
static inline vy_open *handle_of(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_open *h = vy_open_of(vy_fs_ns(fs_of(req)), fi->fh);
	return h && h->in->ino == ino ? h : NULL; /* ino never changes */
}

/* handle_of, answering EBADF itself when there is none. */
static inline vy_open *vy_op_handle(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_open *h = handle_of(req, ino, fi);
	if (!h)
		fuse_reply_err(req, EBADF);
	return h;
}

/* fs/reply.c (below the kinds' tables: they call it too) */
void vy_op_reply_err(fuse_req_t req, vy_err rc, const vy_error *e, uint64_t ino, const char *what);
int vy_op_writable_dir(vy_fs *fs, vy_inode *dir);
void vy_op_wrote(fuse_req_t req, vy_inode *in);
void vy_op_kill_caps(vy_fs *fs, vy_inode *in);
bool vy_op_name_too_long(fuse_req_t req, const char *name);
bool vy_op_frozen(vy_inode *in, bool append);
void vy_op_no_handle(fuse_req_t req, int err);

/* fs/entry.c: attributes and entries, each kind's part through its table */
void vy_op_stat(vy_fs *fs, vy_inode *in, struct stat *st);
double vy_op_attr_timeout(const vy_inode *in);
void vy_op_reply_entry(fuse_req_t req, vy_fs *fs, vy_inode *in);

/* fs/ops_names.c: names, links, directories */
void vy_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void vy_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void vy_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void vy_op_readlink(fuse_req_t req, fuse_ino_t ino);
void vy_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void vy_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void vy_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void vy_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi);
void vy_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void vy_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void vy_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags);
void vy_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void vy_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void vy_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void vy_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* fs/ops_data.c: open files and their bytes */
void vy_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void vy_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void vy_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi);
void vy_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void vy_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void vy_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void vy_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void vy_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi);
void vy_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void vy_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
			       fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags);

/* fs/ops_attr.c: attributes, xattrs, chattr, statfs */
void vy_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void vy_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi);
void vy_op_statfs(fuse_req_t req, fuse_ino_t ino);
void vy_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
			int flags);
void vy_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void vy_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void vy_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void vy_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi, unsigned flags,
		     const void *in_buf, size_t in_bufsz, size_t out_bufsz);

#endif
