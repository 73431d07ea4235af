/* FUSE operations on open files: open, read, write, flush, release,
 * fsync, fallocate, lseek and copy_file_range. What every kind shares is
 * here (handles, open counts, chattr's flags, arguments); the rest goes
 * through the inode's table (kind.h). */
#include "fs/op.h"
#include "fs/atime.h"
#include "fs/backed.h"
#include "fs/file.h"
#include "fs/kind.h"
#include "persist/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void vy_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	const vy_kind_ops *ko = vy_kind_ops_of(in);
	if (!ko->open) {
		fuse_reply_err(req, ko->no_data); /* a directory; a special file the kernel opens itself */
		return;
	}
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	if ((writing || (fi->flags & O_TRUNC)) &&
	    (vy_op_frozen(in, false) || (vy_op_frozen(in, true) && (!(fi->flags & O_APPEND) || (fi->flags & O_TRUNC))))) {
		fuse_reply_err(req, EPERM); /* chattr +i: no writer; +a: appends only */
		return;
	}
	vy_open *h = vy_open_new(in);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!ko->open(req, fs, h, fi)) {
		vy_open_discard(h);
		return;
	}
	pthread_mutex_lock(&fs->ns);
	int err = vy_open_add(vy_fs_ns(fs), h);
	if (!err) {
		in->opens++;
		/* A module's writer is not kept: after a death it gets EBADF,
		 * never a file that mixes two images. */
		if (!(writing && in->kind == VY_MODULE))
			vy_persist_handle(fs, h->fh, in, VY_HANDLE_FILE, 0); /* before the kernel holds it */
	}
	pthread_mutex_unlock(&fs->ns);
	if (err) {
		vy_open_discard(h);
		vy_op_no_handle(req, err);
		return;
	}
	fi->fh = h->fh;
	if (!writing && in->kind == VY_FILE)
		vy_atime_read(fs, in, true); /* a read the page cache answers never reaches us */
	if (fuse_reply_open(req, fi) != 0) {
		pthread_mutex_lock(&fs->ns);
		in->opens--;
		vy_persist_handle(fs, h->fh, NULL, VY_HANDLE_FILE, 0);
		vy_open_free(vy_fs_ns(fs), h);
		vy_inode_reap(fs, in);
		pthread_mutex_unlock(&fs->ns);
	}
}

void vy_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	vy_open *h = vy_op_handle(req, ino, fi);
	if (!h)
		return;
	const vy_kind_ops *ko = vy_kind_ops_of(h->in);
	if (off < 0)
		fuse_reply_err(req, EINVAL);
	else if (!ko->read)
		fuse_reply_err(req, ko->no_data);
	else
		ko->read(req, fs_of(req), h, size, off);
}

void vy_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	vy_open *h = vy_op_handle(req, ino, fi);
	if (!h)
		return;
	const vy_kind_ops *ko = vy_kind_ops_of(h->in);
	if (ko->write)
		ko->write(req, fs_of(req), h, buf, size, off, fi); /* checks off: the control file takes any */
	else
		fuse_reply_err(req, ko->no_data);
}

void vy_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_open *h = vy_op_handle(req, ino, fi);
	if (!h)
		return;
	const vy_kind_ops *ko = vy_kind_ops_of(h->in);
	if (ko->flush)
		ko->flush(req, fs_of(req), h);
	else
		fuse_reply_err(req, 0);
}

void vy_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_open *h = vy_op_handle(req, ino, fi);
	if (!h)
		return; /* nothing of ours to release */
	vy_inode *in = h->in;
	const vy_kind_ops *ko = vy_kind_ops_of(in);
	pthread_mutex_lock(&fs->ns);
	bool last = --in->opens == 0, named = in->nlink > 0;
	pthread_mutex_unlock(&fs->ns);
	if (last && named && ko->closed)
		ko->closed(fs, in); /* outside ns: a file's fitting copies it on the device */
	pthread_mutex_lock(&fs->ns);
	vy_persist_handle(fs, h->fh, NULL, VY_HANDLE_FILE, 0);
	vy_open_free(vy_fs_ns(fs), h);
	vy_inode_reap(fs, in);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_err(req, 0);
}

void vy_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	vy_open *h = vy_op_handle(req, ino, fi);
	if (!h)
		return;
	const vy_kind_ops *ko = vy_kind_ops_of(h->in);
	if (ko->fsync)
		ko->fsync(req, fs_of(req), h);
	else
		fuse_reply_err(req, 0);
}

void vy_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	vy_open *h = vy_op_handle(req, ino, fi);
	if (!h)
		return;
	vy_inode *in = h->in;
	const vy_kind_ops *ko = vy_kind_ops_of(in);
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) {
		fuse_reply_err(req, EOPNOTSUPP); /* zero, collapse, insert range: as tmpfs */
		return;
	}
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EINVAL); /* as fallocate(2): a hole keeps the size */
		return;
	}
	if (!ko->fallocate) {
		fuse_reply_err(req, ENODEV);
		return;
	}
	if (off < 0 || len <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (vy_op_frozen(in, false) || (vy_op_frozen(in, true) && (mode & ~FALLOC_FL_KEEP_SIZE))) {
		fuse_reply_err(req, EPERM); /* as vfs_fallocate for chattr +i, +a */
		return;
	}
	ko->fallocate(req, fs_of(req), in, mode, off, len);
}

/* SEEK_DATA and SEEK_HOLE, from the file's holes (docs/fs.md, "Sparse
 * files"); the kernel answers SEEK_SET, SEEK_CUR and SEEK_END itself. */
void vy_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_open *h = vy_op_handle(req, ino, fi);
	if (!h)
		return;
	vy_inode *in = h->in;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	const vy_kind_ops *ko = vy_kind_ops_of(in);
	uint64_t at = 0;
	int err = ENXIO;
	pthread_rwlock_rdlock(&in->lock);
	if (ko->seek) {
		err = ko->seek(fs, in, (uint64_t)off, whence == SEEK_DATA, &at);
	} else {
		/* A kind with no holes (.vyre files, modules): all of what stat
		 * says is data, as lseek(2) has it for such files; cp takes a
		 * file with no data for one hole, and copies NULs. */
		struct stat st = {0};
		if (ko->stat)
			ko->stat(fs, in, &st);
		if ((uint64_t)off < (uint64_t)st.st_size) {
			at = whence == SEEK_DATA ? (uint64_t)off : (uint64_t)st.st_size;
			err = 0;
		}
	}
	pthread_rwlock_unlock(&in->lock);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_lseek(req, (off_t)at);
}

void vy_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
			       fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len, int flags)
{
	vy_fs *fs = fs_of(req);
	vy_open *hin = handle_of(req, ino_in, fi_in), *hout = handle_of(req, ino_out, fi_out);
	if (!hin || !hout) {
		fuse_reply_err(req, EBADF);
		return;
	}
	vy_inode *src = hin->in, *dst = hout->in;
	if (flags != 0 || off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	const vy_kind_ops *ko = vy_kind_ops_of(src);
	if (!ko->copy || vy_kind_ops_of(dst) != ko) {
		fuse_reply_err(req, EOPNOTSUPP); /* the kernel falls back to read and write */
		return;
	}
	if (vy_op_frozen(dst, false)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	/* The reply's count is 32 bits wide: copy at most that, in pages. */
	if (len > (UINT32_MAX & ~(size_t)4095))
		len = UINT32_MAX & ~(size_t)4095;
	ko->copy(req, fs, src, off_in, dst, off_out, len);
}

void vy_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	(void)datasync;
	(void)fi;
	/* backing=DIR: an fsync of a directory writes back every dirty file
	 * of the mount (sync(1) and syncfs(2) never reach a FUSE daemon), then
	 * DIR's own fsync: `python3 -c 'import os; os.fsync(os.open(MNT, 0))'`. */
	vy_fs *fs = fs_of(req);
	int err = fs->tier ? vy_backed_flush_all(fs) : 0;
	if (!err && fs->tier) {
		int fd = openat(fs->tier->dir.root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || fsync(fd) != 0)
			err = errno;
		if (fd >= 0)
			close(fd);
	}
	fuse_reply_err(req, err);
}
