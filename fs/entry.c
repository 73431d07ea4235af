/* An inode's attributes as the kernel gets them (stat, how long it may
 * keep them, entry replies): what every kind shares here, the rest from
 * its table (kind.h). */
#include "fs/op.h"
#include "fs/kind.h"
#include "persist/writer.h"

#include <string.h>

/* Fill a stat for the kernel (inode lock held, read is enough). */
void vy_op_stat(vy_fs *fs, vy_inode *in, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = in->ino;
	st->st_nlink = in->nlink;
	pthread_mutex_lock(&in->meta);
	st->st_mode = in->mode;
	st->st_uid = in->uid;
	st->st_gid = in->gid;
	st->st_atim = in->atime;
	st->st_mtim = in->mtime;
	st->st_ctim = in->ctime;
	pthread_mutex_unlock(&in->meta);
	st->st_blksize = (blksize_t)fs->cfg.max_write; /* what cp and dd size their writes by */
	const vy_kind_ops *ko = vy_kind_ops_of(in);
	if (ko->stat)
		ko->stat(fs, in, st);
}

double vy_op_attr_timeout(const vy_inode *in)
{
	return vy_kind_ops_of(in)->uncached ? 0.0 : VY_ATTR_TIMEOUT;
}

/* Reply with an entry for `in`, counting the kernel's new reference. ns held. */
void vy_op_reply_entry(fuse_req_t req, vy_fs *fs, vy_inode *in)
{
	struct fuse_entry_param ep;
	memset(&ep, 0, sizeof(ep));
	vy_ns_looked_up(vy_fs_ns(fs), in);
	vy_persist_lookup(fs, in); /* before the kernel holds it */
	pthread_rwlock_rdlock(&in->lock);
	vy_op_stat(fs, in, &ep.attr);
	pthread_rwlock_unlock(&in->lock);
	ep.ino = in->ino;
	ep.generation = fs->generation;
	ep.attr_timeout = vy_op_attr_timeout(in);
	ep.entry_timeout = VY_ATTR_TIMEOUT;
	if (fuse_reply_entry(req, &ep) != 0) {
		vy_ns_not_looked_up(vy_fs_ns(fs), in); /* the kernel did not take it */
		vy_persist_lookup(fs, in);
	}
}
