/* A backing mount's start and end (backed.h): DIR opened and the root
 * given its attributes; at the end every dirty byte written back, the
 * write-back thread stopped and every item freed. */
#include "fs/backed.h"
#include "daemon/log.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

vy_err vy_backed_start(vy_fs *fs, vy_inode *root, vy_error *e)
{
	if (!fs->cfg.backing[0])
		return VY_OK;
	vy_err rc = vy_tier_open_mount(&fs->tier, fs->cfg.backing, fs->cfg.writeback_delay_ms, e);
	if (rc != VY_OK)
		return rc;
	struct stat st;
	int fd = dup(fs->tier->dir.root);
	vy_tier_item *it = fd >= 0 ? vy_tier_item_new(root->ino, root->ino, NULL) : NULL;
	if (!it || fstat(fd, &st) != 0) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		vy_tier_item_free(it);
		vy_tier_close(fs->tier);
		fs->tier = NULL;
		return vy_fail(e, VY_ENOMEM, "free host memory or file descriptors", "cannot use the backing directory: %s",
			       strerror(err));
	}
	it->fd = fd;
	vy_tier_item_saw(it, &st);
	root->tier = it;
	/* The root is DIR: its mode, owner and times. */
	root->mode = S_IFDIR | (st.st_mode & 07777);
	root->nlink = st.st_nlink < 2 ? 2 : (uint32_t)st.st_nlink;
	root->uid = st.st_uid;
	root->gid = st.st_gid;
	root->atime = st.st_atim;
	root->mtime = st.st_mtim;
	root->ctime = st.st_ctim;
	rc = vy_backed_wb_start(fs, e);
	if (rc != VY_OK) {
		root->tier = NULL;
		vy_tier_item_free(it);
		vy_tier_close(fs->tier);
		fs->tier = NULL;
	}
	return rc;
}

void vy_backed_last_write_back(vy_fs *fs)
{
	if (!fs->tier)
		return;
	vy_backed_wb_stop(fs);
	int err = vy_backed_flush_all(fs);
	if (err)
		vy_log(LOG_ERR, "unmount: %zu files of %s could not be written back (%s): their last bytes are lost "
				"(Fix: make room in, or mend, the backing directory before unmounting; fsync reports it)",
		       fs->tier->cache.ndirty, fs->tier->dir.path, strerror(err));
}

void vy_backed_stop(vy_fs *fs)
{
	if (!fs->tier)
		return;
	vy_backed_last_write_back(fs);
	uint64_t key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&fs->inodes, &cursor, &key, &value)) {
		vy_inode *in = value;
		vy_tier_forget(fs->tier, in->tier);
		in->tier = NULL;
	}
	vy_tier_close(fs->tier);
	fs->tier = NULL;
}
