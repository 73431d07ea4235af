/* FUSE operations on open files: open, read, write, flush, release,
 * fsync, fallocate, lseek and copy_file_range. */
#include "fs/op.h"
#include "core/transfer.h"
#include "fs/ctl_file.h"
#include "fs/file.h"
#include "fs/moddir.h"
#include "fs/vyre.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vy_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = vy_fs_inode(fs, ino);
	if (!in) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (in->kind == VY_DIR || in->kind == VY_SPECIAL) {
		/* The kernel opens FIFOs, devices and sockets itself. */
		fuse_reply_err(req, in->kind == VY_DIR ? EISDIR : ENXIO);
		return;
	}
	bool writing = (fi->flags & O_ACCMODE) != O_RDONLY;
	if ((writing || (fi->flags & O_TRUNC)) &&
	    (vy_op_frozen(in, false) || (vy_op_frozen(in, true) && (!(fi->flags & O_APPEND) || (fi->flags & O_TRUNC))))) {
		fuse_reply_err(req, EPERM); /* chattr +i: no writer; +a: appends only */
		return;
	}
	if (in->kind == VY_VIRTUAL && writing && in->virt != VY_V_CTL) {
		fuse_reply_err(req, EPERM); /* .vyre's files are vyrefs's to write */
		return;
	}
	if (in->kind == VY_MODULE && writing && (fi->flags & O_TRUNC) && vy_moddir_truncate(in, 0) != 0) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (in->kind == VY_FILE && writing && (fi->flags & O_TRUNC)) {
		/* libfuse asks the kernel for atomic O_TRUNC: no SETATTR
		 * follows, the open itself truncates. */
		vy_error e;
		pthread_rwlock_wrlock(&in->lock);
		vy_err rc = in->size ? vy_file_truncate(fs, in, 0, &e) : VY_OK;
		if (rc == VY_OK)
			vy_op_kill_caps(in);
		pthread_rwlock_unlock(&in->lock);
		if (rc != VY_OK) {
			vy_op_reply_err(req, rc, &e, ino, "truncate at open");
			return;
		}
		vy_op_wrote(req, in);
	}
	vy_open *h = vy_open_new(in);
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (in->kind == VY_VIRTUAL) {
		h->text = vy_vyre_render(fs, in, &h->len);
		if (!h->text) {
			free(h);
			fuse_reply_err(req, ENOMEM);
			return;
		}
		fi->direct_io = 1; /* made anew at each open: never cached */
	} else {
		fi->keep_cache = fs->cfg.page_cache;
	}
	fi->fh = (uint64_t)(uintptr_t)h;
	pthread_mutex_lock(&fs->ns);
	in->opens++;
	vy_open_add(vy_fs_ns(fs), h);
	pthread_mutex_unlock(&fs->ns);
	if (fuse_reply_open(req, fi) != 0) {
		pthread_mutex_lock(&fs->ns);
		in->opens--;
		vy_open_free(vy_fs_ns(fs), h);
		vy_inode_reap(fs, in);
		pthread_mutex_unlock(&fs->ns);
	}
}

void vy_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_open *h = handle_of(fi);
	vy_inode *in = h->in;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (in->virt == VY_V_CTL) {
		/* The reply of this file's last sequence, once; not by offset. */
		char reply[4096];
		fuse_reply_buf(req, reply, vy_ctlfile_read(h, reply, size < sizeof(reply) ? size : sizeof(reply)));
		return;
	}
	if (in->kind == VY_VIRTUAL) {
		/* A copy: the handle may be released the moment the reply is in. */
		size_t at = (uint64_t)off < h->len ? (size_t)off : h->len;
		size_t n = h->len - at < size ? h->len - at : size;
		char *copy = malloc(n ? n : 1);
		if (!copy) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		memcpy(copy, h->text + at, n);
		fuse_reply_buf(req, copy, n);
		free(copy);
		return;
	}
	if (in->kind != VY_FILE && in->kind != VY_MODULE) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (in->kind == VY_MODULE) {
		char *buf = malloc(size ? size : 1);
		if (buf)
			fuse_reply_buf(req, buf, vy_moddir_read(in, (uint64_t)off, buf, size));
		else
			fuse_reply_err(req, ENOMEM);
		free(buf);
		return;
	}
	/* The reply is made from readahead memory or from the pinned buffer
	 * the device copied into: no host copy of ours. Under the read lock:
	 * the readahead chunk stays until the reply is out. */
	vy_error e;
	vy_ra_hit hit = {0};
	vy_staging_buf buf = {0};
	size_t got = 0;
	pthread_rwlock_rdlock(&in->lock);
	vy_core *core = vy_fs_core(fs, in); /* whose staging buf comes from */
	vy_err rc = vy_file_read(fs, in, (uint64_t)off, size, &hit, &buf, &got, &e);
	if (rc == VY_OK)
		fuse_reply_buf(req, hit.chunk ? hit.data : buf.ptr, got);
	else
		vy_op_reply_err(req, rc, &e, ino, "read");
	if (hit.chunk)
		vy_readahead_put(fs, in, &hit);
	pthread_rwlock_unlock(&in->lock);
	vy_staging_release(core->staging, &buf);
}

static void on_interrupt(fuse_req_t req, void *data)
{
	(void)req;
	atomic_store((_Atomic uint32_t *)data, 1);
}

void vy_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = handle_of(fi)->in;
	if (in->kind == VY_VIRTUAL) {
		/* A signal to the writer (FUSE sends INTERRUPT) stops its
		 * sequence at the next step; the write then fails with EINTR. */
		_Atomic uint32_t stop = 0;
		fuse_req_interrupt_func(req, on_interrupt, &stop);
		int err = vy_ctlfile_write(fs, handle_of(fi), buf, size, fuse_req_ctx(req)->pid, &stop);
		fuse_req_interrupt_func(req, NULL, NULL);
		if (err)
			fuse_reply_err(req, err);
		else
			fuse_reply_write(req, size);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (in->kind == VY_MODULE) {
		int err = vy_moddir_write(in, (uint64_t)off, buf, size);
		if (!err) {
			handle_of(fi)->written = true;
			vy_inode_touch(in, true);
		}
		if (err)
			fuse_reply_err(req, err);
		else
			fuse_reply_write(req, size);
		return;
	}
	if (vy_op_frozen(in, false)) {
		fuse_reply_err(req, EPERM); /* made immutable while open */
		return;
	}
	vy_error e;
	pthread_rwlock_wrlock(&in->lock);
	vy_err rc = vy_file_write(fs, in, (uint64_t)off, buf, size, &e);
	if (rc == VY_OK)
		vy_op_kill_caps(in);
	pthread_rwlock_unlock(&in->lock);
	if (rc == VY_OK)
		vy_op_wrote(req, in);
	if (rc == VY_OK && fs->cfg.page_cache && (fi->flags & O_DIRECT)) {
		/* A direct write passes the page cache by, and the kernel drops
		 * the range only around a synchronous one: pages that buffered
		 * readers refilled while an AIO write ran would stay, across
		 * opens too (keep_cache). Drop them here, before the reply: a
		 * page still being read waits for its read, then goes. */
		fuse_lowlevel_notify_inval_inode(fs->se, in->ino, off, (off_t)size);
	}
	if (rc == VY_OK)
		fuse_reply_write(req, size);
	else
		vy_op_reply_err(req, rc, &e, ino, "write");
}

/* A regular file's gathered writes on the device (write-behind), and the
 * reply: 0, or the error that lost some of them. */
static void settle_and_reply(fuse_req_t req, fuse_ino_t ino, vy_inode *in, const char *what)
{
	vy_error e;
	pthread_rwlock_rdlock(&in->lock);
	vy_err rc = vy_file_settle(fs_of(req), in, &e);
	pthread_rwlock_unlock(&in->lock);
	if (rc == VY_OK)
		fuse_reply_err(req, 0);
	else
		vy_op_reply_err(req, rc, &e, ino, what);
}

void vy_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	vy_open *h = handle_of(fi);
	/* Writes gathered behind are copied now, so close reports a failure;
	 * the control file may hold an unfinished statement, an error too. */
	if (h->in->kind == VY_FILE) {
		settle_and_reply(req, ino, h->in, "close");
		return;
	}
	int err = 0;
	if (h->in->virt == VY_V_CTL) {
		err = vy_ctlfile_flush(fs_of(req), h, fuse_req_ctx(req)->pid);
	} else if (h->in->kind == VY_MODULE && h->written) {
		h->written = false;
		err = vy_moddir_load(fs_of(req), h->in); /* a module that does not load fails the close */
	}
	fuse_reply_err(req, err);
}

void vy_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	vy_fs *fs = fs_of(req);
	vy_open *h = handle_of(fi);
	vy_inode *in = h->in;
	pthread_mutex_lock(&fs->ns);
	bool last = --in->opens == 0, named = in->nlink > 0;
	pthread_mutex_unlock(&fs->ns);
	if (last && named && in->kind == VY_MODULE)
		vy_moddir_closed(fs, in);
	if (last && named && in->kind == VY_FILE) {
		/* Outside ns: fitting copies the file on the device. */
		pthread_rwlock_wrlock(&in->lock);
		vy_file_closed(fs, in);
		pthread_rwlock_unlock(&in->lock);
	}
	pthread_mutex_lock(&fs->ns);
	vy_open_free(vy_fs_ns(fs), h);
	vy_inode_reap(fs, in);
	pthread_mutex_unlock(&fs->ns);
	fuse_reply_err(req, 0);
}

void vy_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)datasync;
	vy_inode *in = handle_of(fi)->in;
	if (in->kind == VY_FILE)
		settle_and_reply(req, ino, in, "fsync");
	else
		fuse_reply_err(req, 0);
}

void vy_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	vy_fs *fs = fs_of(req);
	vy_inode *in = handle_of(fi)->in;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) {
		fuse_reply_err(req, EOPNOTSUPP); /* zero, collapse, insert range: as tmpfs */
		return;
	}
	if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)) {
		fuse_reply_err(req, EINVAL); /* as fallocate(2): a hole keeps the size */
		return;
	}
	if (in->kind != VY_FILE) {
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
	vy_error e;
	pthread_rwlock_wrlock(&in->lock);
	vy_err rc = mode & FALLOC_FL_PUNCH_HOLE
			    ? vy_file_punch(fs, in, (uint64_t)off, (uint64_t)len, &e)
			    : vy_file_allocate(fs, in, (uint64_t)off, (uint64_t)len, mode & FALLOC_FL_KEEP_SIZE, &e);
	if (rc == VY_OK)
		vy_op_kill_caps(in);
	pthread_rwlock_unlock(&in->lock);
	if (rc == VY_OK)
		vy_op_wrote(req, in); /* times and suid/sgid, KEEP_SIZE too, as tmpfs */
	if (rc == VY_OK)
		fuse_reply_err(req, 0);
	else
		vy_op_reply_err(req, rc, &e, ino, "fallocate");
}

/* SEEK_DATA and SEEK_HOLE, from the file's holes (docs/fs.md, "Sparse
 * files"); the kernel answers SEEK_SET, SEEK_CUR and SEEK_END itself. */
void vy_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	(void)ino;
	vy_fs *fs = fs_of(req);
	vy_inode *in = handle_of(fi)->in;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	pthread_rwlock_rdlock(&in->lock);
	uint64_t at = 0;
	int err = in->kind == VY_FILE ? vy_file_seek(fs, in, (uint64_t)off, whence == SEEK_DATA, &at) : ENXIO;
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
	vy_inode *src = handle_of(fi_in)->in, *dst = handle_of(fi_out)->in;
	if (flags != 0 || off_in < 0 || off_out < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (src->kind != VY_FILE || dst->kind != VY_FILE) {
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
	/* Two inodes lock in ino order; one inode once. */
	if (src == dst) {
		pthread_rwlock_wrlock(&dst->lock);
	} else if (src->ino < dst->ino) {
		pthread_rwlock_rdlock(&src->lock);
		pthread_rwlock_wrlock(&dst->lock);
	} else {
		pthread_rwlock_wrlock(&dst->lock);
		pthread_rwlock_rdlock(&src->lock);
	}
	vy_error e;
	uint64_t copied = 0;
	vy_err rc = vy_file_copy(fs, src, (uint64_t)off_in, dst, (uint64_t)off_out, len, &copied, &e);
	if (rc == VY_OK && copied)
		vy_op_kill_caps(dst);
	if (src != dst)
		pthread_rwlock_unlock(&src->lock);
	pthread_rwlock_unlock(&dst->lock);
	if (rc == VY_OK && copied)
		vy_op_wrote(req, dst);
	(void)ino_in;
	if (rc == VY_OK)
		fuse_reply_write(req, (size_t)copied);
	else
		vy_op_reply_err(req, rc, &e, ino_out, "copy_file_range");
}
