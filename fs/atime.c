/* Access times on reads (see atime.h). */
#include "fs/atime.h"
#include "daemon/mountflags.h"
#include "persist/writer.h"

#include <linux/fs.h>
#include <sys/mount.h>

#define DAY_S (24 * 60 * 60)

void vy_atime_refresh(vy_fs *fs)
{
	unsigned long mf;
	if (fs->mountpoint && vy_mountflags_now(fs->mountpoint, &mf))
		atomic_store_explicit(&fs->atime_flags, (unsigned)mf, memory_order_relaxed);
}

static int cmp(struct timespec a, struct timespec b)
{
	if (a.tv_sec != b.tv_sec)
		return a.tv_sec < b.tv_sec ? -1 : 1;
	return a.tv_nsec < b.tv_nsec ? -1 : a.tv_nsec > b.tv_nsec;
}

/* The kernel's rule (fs/inode.c, atime_needs_update and relatime's):
 * relatime moves it when it is not after the last change, or a day old. */
static bool due(unsigned mf, const vy_inode *in, struct timespec now)
{
	if (mf & (MS_NOATIME | MS_RDONLY) || (in->attr_flags & FS_NOATIME_FL))
		return false;
	if (in->kind == VY_DIR && (mf & MS_NODIRATIME))
		return false;
	if (!(mf & MS_RELATIME))
		return cmp(now, in->atime) != 0;
	return cmp(in->mtime, in->atime) >= 0 || cmp(in->ctime, in->atime) >= 0 ||
	       now.tv_sec - in->atime.tv_sec >= DAY_S;
}

void vy_atime_read(vy_fs *fs, vy_inode *in, bool notify)
{
	unsigned mf = atomic_load_explicit(&fs->atime_flags, memory_order_relaxed);
	if (mf & MS_NOATIME)
		return; /* the cheap way out, before any lock */
	struct timespec now;
	vy_now(&now);
	pthread_mutex_lock(&in->meta);
	bool moved = due(mf, in, now);
	if (moved)
		in->atime = now;
	pthread_mutex_unlock(&in->meta);
	if (!moved)
		return;
	vy_persist_inode(fs, in);
	if (notify && fs->se)
		fuse_lowlevel_notify_inval_inode(fs->se, in->ino, -1, 0); /* attributes only */
}
