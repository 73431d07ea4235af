/* The shape of a kind's table of operations (fs/kind.h says which kinds
 * there are and picks one for an inode). A header alone, so that each
 * kind's file sits below fs/kind.c, which names every table. */
#ifndef VY_KIND_OPS_H
#define VY_KIND_OPS_H

#include "fs/fs.h"

#include <sys/stat.h>

typedef struct vy_kind_ops {
	/* The errno of open, read, write and a size change where this kind
	 * has no entry for them (EISDIR for a directory, ...). */
	int no_data;
	/* Attributes the kernel may not cache: rendered sizes change. */
	bool uncached;
	/* A chown leaves security.capability (a directory's), where for
	 * every other kind it goes with the owner (the killpriv rule). */
	bool keeps_caps;
	/* link(2) may give it another name: not a directory, a module or a
	 * .vyre file. */
	bool hard_links;

	/* stat's kind-owned fields (size, blocks, rdev, blksize); the rest is
	 * filled. The inode's lock held (read). NULL: a size of 0. */
	void (*stat)(vy_fs *fs, vy_inode *in, struct stat *st);

	/* Ready handle h (h->in) for an open with fi->flags, after the shared
	 * checks; sets fi's caching. False when it replied an error (h is
	 * freed by the caller). NULL: open answers no_data. */
	bool (*open)(fuse_req_t req, vy_fs *fs, vy_open *h, struct fuse_file_info *fi);
	/* Reply to a read (off >= 0). NULL: no_data. */
	void (*read)(fuse_req_t req, vy_fs *fs, vy_open *h, size_t size, off_t off);
	/* Reply to a write. NULL: no_data. */
	void (*write)(fuse_req_t req, vy_fs *fs, vy_open *h, const char *buf, size_t size, off_t off,
		      struct fuse_file_info *fi);
	/* Reply to a flush (a close) and an fsync. NULL: 0. */
	void (*flush)(fuse_req_t req, vy_fs *fs, vy_open *h);
	void (*fsync)(fuse_req_t req, vy_fs *fs, vy_open *h);
	/* The last open closed and the inode still has a name. NULL: nothing. */
	void (*closed)(vy_fs *fs, vy_inode *in);

	/* A size change to `size` (setattr): *resized when the size it had
	 * changed. False when it replied an error. For an inode that takes no
	 * change (in->fixed), an entry here is asked whether this one may be
	 * let pass as nothing (.vyre/ctl's truncate to 0). NULL: no_data. */
	bool (*resize)(fuse_req_t req, vy_fs *fs, vy_inode *in, off_t size, bool *resized);
	/* Reply to a fallocate whose mode and range were checked. NULL: ENODEV. */
	void (*fallocate)(fuse_req_t req, vy_fs *fs, vy_inode *in, int mode, off_t off, off_t len);
	/* SEEK_DATA (`data`) or SEEK_HOLE from off into *at, the read lock
	 * held: 0 or an errno. NULL: ENXIO (no data). */
	int (*seek)(vy_fs *fs, vy_inode *in, uint64_t off, bool data, uint64_t *at);
	/* Reply to a copy_file_range between two inodes of this kind (len
	 * clamped, dst not frozen). NULL: EOPNOTSUPP (the kernel falls back to
	 * read and write). */
	void (*copy)(fuse_req_t req, vy_fs *fs, vy_inode *src, off_t off_in, vy_inode *dst, off_t off_out,
		     size_t len);
	/* A read-only xattr of vyrefs's own (user.vyre.*) into out: false when
	 * this kind has none by that name. The inode's read lock held. NULL:
	 * none. */
	bool (*xattr)(const vy_fs *fs, const vy_inode *in, const char *name, bool may_write, char *out,
		      size_t cap);

	/* Reply to a readlink. NULL: EINVAL (not a symlink). */
	void (*readlink)(fuse_req_t req, vy_inode *in);
	/* Before its name in `dir` goes (unlink; ns held): 0, or the errno
	 * that keeps it (a module a sequence uses). NULL: 0. */
	int (*unlink)(vy_fs *fs, vy_inode *dir, vy_inode *in);
} vy_kind_ops;

#endif
