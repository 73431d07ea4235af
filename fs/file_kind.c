/* A regular file's table (kind.h): its bytes in a device buffer (file.h),
 * read through readahead, written behind, sized, punched, sought and
 * copied on the device; user.vyre.* name its buffer. */
#include "fs/kind.h"
#include "fs/op.h"
#include "fs/atime.h"
#include "fs/backed.h"
#include "fs/file.h"
#include "core/transfer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <string.h>

static void file_stat(vy_fs *fs, vy_inode *in, struct stat *st)
{
	/* Where files may have holes, the granule is the unit of a hole,
	 * of SEEK_HOLE's answers and of st_blocks: say it (docs/fs.md). */
	if (vy_fs_core(fs, in)->dev->share && vy_fs_core(fs, in)->dev->info.share_granularity)
		st->st_blksize = (blksize_t)vy_fs_core(fs, in)->dev->info.share_granularity;
	st->st_size = (off_t)in->size;
	st->st_blocks = (blkcnt_t)((in->cap - in->holes + 511) / 512); /* device bytes held */
}

static bool file_open(fuse_req_t req, vy_fs *fs, vy_open *h, struct fuse_file_info *fi)
{
	vy_inode *in = h->in;
	if (in->tier) {
		/* backing=DIR: close-to-open, DIR's newer copy if it changed
		 * behind the mount; and DIR's file open for loads. */
		vy_backed_revalidate(fs, in);
		int err = vy_backed_prepare(fs, in);
		if (err) {
			fuse_reply_err(req, err);
			return false;
		}
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY && (fi->flags & O_TRUNC)) {
		/* libfuse asks the kernel for atomic O_TRUNC: no SETATTR
		 * follows, the open itself truncates. */
		vy_error e;
		pthread_rwlock_wrlock(&in->lock);
		/* backing=DIR: DIR's too, first, unless the mount must refuse it
		 * (a mapped file does not shrink). */
		int derr = in->tier && !(in->maps && in->size) ? vy_backed_resize(fs, in, 0) : 0;
		vy_err rc = derr ? vy_fail(&e, VY_EDEVICE, "check the backing directory", "truncating it there: %s",
					   strerror(derr))
			  : in->size ? vy_file_truncate(fs, in, 0, &e)
				     : VY_OK;
		if (rc == VY_OK)
			vy_op_kill_caps(fs, in);
		pthread_rwlock_unlock(&in->lock);
		if (rc != VY_OK) {
			vy_op_reply_err(req, rc, &e, in->ino, "truncate at open");
			return false;
		}
		vy_op_wrote(req, in);
	}
	fi->keep_cache = fs->cfg.page_cache;
	return true;
}

/* backing=DIR and no room on the device: the read from DIR (and the
 * device, for what is there), the read lock held. */
static void read_direct(fuse_req_t req, vy_fs *fs, vy_inode *in, size_t size, off_t off)
{
	vy_error e;
	size_t n = (uint64_t)off >= in->size ? 0 : in->size - (uint64_t)off < size ? (size_t)(in->size - (uint64_t)off) : size;
	vy_staging_buf buf = {0};
	vy_core *core = vy_fs_core(fs, in);
	vy_err rc = n ? vy_staging_acquire(core->staging, n, &buf, &e) : VY_OK;
	if (rc == VY_OK && n)
		rc = vy_backed_read_direct(fs, in, (uint64_t)off, n, buf.ptr, &e);
	if (rc == VY_OK)
		fuse_reply_buf(req, buf.ptr, n);
	else
		vy_op_reply_err(req, rc, &e, in->ino, "read");
	vy_staging_release(core->staging, &buf);
}

static void file_read(fuse_req_t req, vy_fs *fs, vy_open *h, size_t size, off_t off)
{
	/* The reply is made from readahead memory or from the pinned buffer
	 * the device copied into: no host copy of ours. Under the read lock:
	 * the readahead chunk stays until the reply is out. */
	vy_inode *in = h->in;
	vy_error e;
	vy_ra_hit hit = {0};
	vy_staging_buf buf = {0};
	size_t got = 0;
	uint64_t end = (uint64_t)off + size;
	pthread_rwlock_rdlock(&in->lock);
	/* backing=DIR: the bytes asked for are loaded first (only those: a
	 * unit of 2 MiB at a time), or read from DIR when the device is full. */
	bool hit_tier = vy_backed_present(in, (uint64_t)off, end);
	if (in->tier)
		atomic_fetch_add(hit_tier ? &fs->tier->stats.hits : &fs->tier->stats.misses, 1);
	while (!vy_backed_present(in, (uint64_t)off, end)) {
		uint64_t want = vy_backed_ahead(in, (uint64_t)off, end);
		pthread_rwlock_unlock(&in->lock);
		vy_err lrc = vy_backed_load_room(fs, in, (uint64_t)off, want, &e);
		if (lrc == VY_ENOSPC && want > end) /* no room ahead: its own units only */
			lrc = vy_backed_load_room(fs, in, (uint64_t)off, end, &e);
		pthread_rwlock_rdlock(&in->lock);
		if (lrc == VY_ENOSPC) {
			read_direct(req, fs, in, size, off);
			pthread_rwlock_unlock(&in->lock);
			return;
		}
		if (lrc != VY_OK) {
			pthread_rwlock_unlock(&in->lock);
			vy_op_reply_err(req, lrc, &e, in->ino, "read");
			return;
		}
	}
	vy_backed_used(fs, in);
	vy_core *core = vy_fs_core(fs, in); /* whose staging buf comes from */
	vy_err rc = vy_file_read(fs, in, (uint64_t)off, size, &hit, &buf, &got, &e);
	if (rc == VY_OK)
		vy_atime_read(fs, in, false); /* before the reply, after which the kernel drops its atime */
	if (rc == VY_OK)
		fuse_reply_buf(req, hit.chunk ? hit.data : buf.ptr, got);
	else
		vy_op_reply_err(req, rc, &e, in->ino, "read");
	if (hit.chunk)
		vy_readahead_put(fs, in, &hit);
	pthread_rwlock_unlock(&in->lock);
	vy_staging_release(core->staging, &buf);
}

static void file_write(fuse_req_t req, vy_fs *fs, vy_open *h, const char *buf, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	vy_inode *in = h->in;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (vy_op_frozen(in, false)) {
		fuse_reply_err(req, EPERM); /* made immutable while open */
		return;
	}
	vy_error e;
	uint64_t end = (uint64_t)off + size;
	vy_err rc = VY_OK;
	for (int tries = 0;; tries++) {
		/* backing=DIR: the units it touches loaded first, so what it
		 * does not cover stays DIR's bytes. */
		rc = vy_backed_load_room(fs, in, (uint64_t)off, end, &e);
		if (rc != VY_OK)
			break;
		pthread_rwlock_wrlock(&in->lock);
		rc = vy_backed_present(in, (uint64_t)off, end)
			     ? vy_file_write(fs, in, (uint64_t)off, buf, size, &e)
			     : vy_fail(&e, VY_ENOSPC, "retry", "its bytes went while it waited");
		if (rc == VY_OK) {
			vy_op_kill_caps(fs, in);
			vy_backed_wrote(fs, in, (uint64_t)off, end);
		}
		unsigned dev = in->dev;
		pthread_rwlock_unlock(&in->lock);
		if (rc != VY_ENOSPC || !in->tier || tries == 3 || !vy_backed_evict(fs, dev, size))
			break;
	}
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
		vy_op_reply_err(req, rc, &e, in->ino, "write");
}

/* The gathered writes on the device (write-behind), and the reply: 0, or
 * the error that lost some of them. */
static void settle_and_reply(fuse_req_t req, vy_fs *fs, vy_inode *in, const char *what)
{
	vy_error e;
	pthread_rwlock_rdlock(&in->lock);
	vy_err rc = vy_file_settle(fs, in, &e);
	pthread_rwlock_unlock(&in->lock);
	if (rc == VY_OK)
		fuse_reply_err(req, 0);
	else
		vy_op_reply_err(req, rc, &e, in->ino, what);
}

/* Writes gathered behind are copied now, so close reports a failure. */
static void file_flush(fuse_req_t req, vy_fs *fs, vy_open *h)
{
	settle_and_reply(req, fs, h->in, "close");
}

static void file_fsync(fuse_req_t req, vy_fs *fs, vy_open *h)
{
	if (!h->in->tier) {
		settle_and_reply(req, fs, h->in, "fsync");
		return;
	}
	/* backing=DIR: durable once DIR holds the bytes and its fsync
	 * returned; DIR's errno otherwise (the bytes stay dirty). What a
	 * program mapping it wrote is compared and written too. */
	pthread_rwlock_wrlock(&h->in->lock);
	if (h->in->maps)
		vy_backed_suspect(fs, h->in);
	pthread_rwlock_unlock(&h->in->lock);
	fuse_reply_err(req, vy_backed_flush(fs, h->in));
}

static void file_closed(vy_fs *fs, vy_inode *in)
{
	/* Outside ns: fitting copies the file on the device. */
	pthread_rwlock_wrlock(&in->lock);
	vy_file_closed(fs, in);
	pthread_rwlock_unlock(&in->lock);
}

static bool file_resize(fuse_req_t req, vy_fs *fs, vy_inode *in, off_t size, bool *resized)
{
	vy_error e;
	if (in->tier && vy_backed_prepare(fs, in) != 0) {
		fuse_reply_err(req, ENOENT);
		return false;
	}
	pthread_rwlock_wrlock(&in->lock);
	*resized = size >= 0 && (uint64_t)size != in->size;
	uint64_t was = in->size;
	/* backing=DIR: DIR's size changes with it; a shrink there first (a
	 * mapped file refuses it before), growth after the device's. */
	int derr = in->tier && size >= 0 && (uint64_t)size <= was && !in->maps ? vy_backed_resize(fs, in, (uint64_t)size) : 0;
	vy_err rc = size < 0 ? vy_fail(&e, VY_EINVAL, "give a size of 0 or more", "negative size")
		    : derr   ? vy_fail(&e, VY_EDEVICE, "check the backing directory", "truncating it there: %s",
				       strerror(derr))
			     : vy_file_truncate(fs, in, (uint64_t)size, &e);
	if (rc == VY_OK && in->tier && (uint64_t)size > was && (derr = vy_backed_resize(fs, in, (uint64_t)size)) != 0) {
		vy_file_truncate(fs, in, was, NULL);
		rc = vy_fail(&e, VY_EDEVICE, "check the backing directory", "growing it there: %s", strerror(derr));
	}
	if (rc == VY_OK)
		vy_op_kill_caps(fs, in);
	pthread_rwlock_unlock(&in->lock);
	if (rc != VY_OK)
		vy_op_reply_err(req, rc, &e, in->ino, "truncate");
	return rc == VY_OK;
}

static void file_fallocate(fuse_req_t req, vy_fs *fs, vy_inode *in, int mode, off_t off, off_t len)
{
	vy_error e;
	/* backing=DIR: the whole file on the device first; what changes
	 * is dirty after. */
	vy_err rc = vy_backed_load_room(fs, in, 0, in->size, &e);
	if (rc != VY_OK) {
		vy_op_reply_err(req, rc, &e, in->ino, "fallocate");
		return;
	}
	pthread_rwlock_wrlock(&in->lock);
	rc = vy_backed_present(in, 0, in->size) ? VY_OK : vy_fail(&e, VY_ENOSPC, "retry", "its bytes went while it waited");
	if (rc == VY_OK)
		rc = mode & FALLOC_FL_PUNCH_HOLE
			     ? vy_file_punch(fs, in, (uint64_t)off, (uint64_t)len, &e)
			     : vy_file_allocate(fs, in, (uint64_t)off, (uint64_t)len, mode & FALLOC_FL_KEEP_SIZE, &e);
	if (rc == VY_OK) {
		vy_op_kill_caps(fs, in);
		uint64_t end = (uint64_t)off + (uint64_t)len;
		vy_backed_wrote(fs, in, (uint64_t)off, end < in->size ? end : in->size);
	}
	pthread_rwlock_unlock(&in->lock);
	if (rc == VY_OK)
		vy_op_wrote(req, in); /* times and suid/sgid, KEEP_SIZE too, as tmpfs */
	if (rc == VY_OK)
		fuse_reply_err(req, 0);
	else
		vy_op_reply_err(req, rc, &e, in->ino, "fallocate");
}

static void file_copy(fuse_req_t req, vy_fs *fs, vy_inode *src, off_t off_in, vy_inode *dst, off_t off_out,
		      size_t len)
{
	vy_error e;
	/* backing=DIR: both on the device whole first. */
	vy_err rc = vy_backed_load_room(fs, src, 0, src->size, &e);
	if (rc == VY_OK && dst != src)
		rc = vy_backed_load_room(fs, dst, 0, dst->size, &e);
	if (rc != VY_OK) {
		vy_op_reply_err(req, rc, &e, dst->ino, "copy_file_range");
		return;
	}
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
	uint64_t copied = 0;
	rc = vy_backed_present(src, 0, src->size) && vy_backed_present(dst, 0, dst->size)
		     ? vy_file_copy(fs, src, (uint64_t)off_in, dst, (uint64_t)off_out, len, &copied, &e)
		     : vy_fail(&e, VY_ENOSPC, "retry", "their bytes went while it waited");
	if (rc == VY_OK && copied) {
		vy_op_kill_caps(fs, dst);
		vy_backed_wrote(fs, dst, (uint64_t)off_out, (uint64_t)off_out + copied);
	}
	if (src != dst)
		pthread_rwlock_unlock(&src->lock);
	pthread_rwlock_unlock(&dst->lock);
	if (rc == VY_OK && copied)
		vy_op_wrote(req, dst);
	if (rc == VY_OK)
		fuse_reply_write(req, (size_t)copied);
	else
		vy_op_reply_err(req, rc, &e, dst->ino, "copy_file_range");
}

/* backing=DIR: a file is data to its end (what DIR holds in its holes is
 * not known without loading it); elsewhere the buffer's holes. */
static int file_seek(vy_fs *fs, vy_inode *in, uint64_t off, bool data, uint64_t *at)
{
	if (!in->tier)
		return vy_file_seek(fs, in, off, data, at);
	if (off >= in->size)
		return ENXIO;
	*at = data ? off : in->size;
	return 0;
}

/* user.vyre.* read-only attributes of a file with a buffer. */
static const char *const vyre_xattrs[] = {"user.vyre.handle", "user.vyre.capacity", "user.vyre.device_ptr"};

/* user.vyre.device_ptr says where the daemon's context maps the buffer:
 * only for callers that may write the file, and only on a GPU (on the host
 * backend it would be an address of the daemon's heap). */
static bool file_xattr(const vy_fs *fs, const vy_inode *in, const char *name, bool may_write, char *out, size_t cap)
{
	if (vy_backed_xattr(in, name, out, cap))
		return true; /* user.vyre.resident and user.vyre.dirty */
	if (!in->buf)
		return false;
	vy_buffer_view v;
	if (!strcmp(name, vyre_xattrs[0]))
		snprintf(out, cap, "%" PRIu64, in->buf);
	else if (!strcmp(name, vyre_xattrs[1]))
		snprintf(out, cap, "%" PRIu64, in->cap);
	else if (!strcmp(name, vyre_xattrs[2]) && may_write && !strcmp(vy_fs_core(fs, in)->dev->info.backend, "cuda") &&
		 vy_store_view(vy_fs_core(fs, in)->store, in->buf, &v, NULL) == VY_OK)
		snprintf(out, cap, "0x%" PRIx64, v.ptr);
	else
		return false;
	return true;
}

const vy_kind_ops vy_file_kind = {
	.no_data = EINVAL,
	.hard_links = true,
	.stat = file_stat,
	.open = file_open,
	.read = file_read,
	.write = file_write,
	.flush = file_flush,
	.fsync = file_fsync,
	.closed = file_closed,
	.resize = file_resize,
	.fallocate = file_fallocate,
	.seek = file_seek,
	.copy = file_copy,
	.xattr = file_xattr,
};
