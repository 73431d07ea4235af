/* Replies and checks the FUSE operations share (op.h). */
#include "fs/op.h"
#include "daemon/log.h"
#include "daemon/session.h"
#include "persist/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reply with a core error; say why in the log when the user must act.
 * A size no budget could hold is EFBIG (the file is too large for this
 * filesystem); ENOSPC means no room now. */
void vy_op_reply_err(fuse_req_t req, vy_err rc, const vy_error *e, uint64_t ino, const char *what)
{
	if (rc == VY_ENOSPC || rc == VY_EOVERFLOW)
		vy_log(LOG_WARNING, "%s (inode %" PRIu64 "): %s", what, ino, e->msg);
	else if (rc == VY_EDEVICE || rc == VY_EINTERNAL || rc == VY_ENOMEM)
		vy_log(LOG_ERR, "%s (inode %" PRIu64 "): %s", what, ino, e->msg);
	fuse_reply_err(req, rc == VY_EOVERFLOW ? EFBIG : vy_err_errno(rc));
}

/* A regular file's bytes changed through `req`: times, and suid/sgid
 * dropped as the kernel leaves that to us (daemon/session.h). True when the
 * mode changed: the kernel's cached attributes must go. */
static bool inode_wrote(vy_inode *in, fuse_req_t req)
{
	pthread_mutex_lock(&in->meta);
	vy_now(&in->ctime);
	in->mtime = in->ctime;
	mode_t was = in->mode;
	in->mode = vy_session_kill_suid(req, in->mode, in->gid, false);
	pthread_mutex_unlock(&in->meta);
	return in->mode != was;
}

/* A directory that may gain or lose entries, or the errno why not. ns held. */
int vy_op_writable_dir(vy_fs *fs, vy_inode *dir)
{
	if (!dir)
		return ENOENT;
	if (dir->kind != VY_DIR)
		return ENOTDIR;
	if (dir->ino == fs->vyre_ino)
		return EPERM;
	return 0; /* modules/ takes module files only: make_node checks */
}

/* After a write, truncate or copy into a file: times, and suid/sgid dropped
 * (the kernel leaves that to us); its cached mode goes before the reply, so
 * no stale set-user-ID survives the write. */
void vy_op_wrote(fuse_req_t req, vy_inode *in)
{
	if (inode_wrote(in, req))
		fuse_lowlevel_notify_inval_inode(fs_of(req)->se, in->ino, -1, 0);
	vy_persist_inode(fs_of(req), in); /* size, times, mode */
}

/* A file's capabilities go with a change of its bytes or owner, whoever
 * makes it (the kernel's killpriv rule, left to us with
 * FUSE_HANDLE_KILLPRIV_V2). The inode's write lock is held. */
void vy_op_kill_caps(vy_fs *fs, vy_inode *in)
{
	if (vy_xattrs_remove(&in->xattrs, "security.capability") == 0)
		vy_persist_xattrs(fs, in);
}

/* Names over NAME_MAX_LEN bytes: ENAMETOOLONG in every operation that takes
 * one, lookup included, as every Linux filesystem answers. */
bool vy_op_name_too_long(fuse_req_t req, const char *name)
{
	if (strlen(name) <= NAME_MAX_LEN)
		return false;
	fuse_reply_err(req, ENAMETOOLONG);
	return true;
}

/* Whether `in` is immutable (chattr +i), or append-only too when `append`. */
bool vy_op_frozen(vy_inode *in, bool append)
{
	pthread_mutex_lock(&in->meta);
	unsigned f = in->attr_flags;
	pthread_mutex_unlock(&in->meta);
	return (f & FS_IMMUTABLE_FL) || (append && (f & FS_APPEND_FL));
}

/* No id for a new open file or directory (ENFILE: the handle table is
 * full; ENOMEM): say so once, the first time, and answer it. */
void vy_op_no_handle(fuse_req_t req, int err)
{
	static atomic_flag said = ATOMIC_FLAG_INIT;
	if (err == ENFILE && !atomic_flag_test_and_set(&said))
		vy_log(LOG_WARNING,
		       "%u files and directories are open on this mount, the most vyrefs keeps; opens fail with "
		       "ENFILE (Fix: close files and directories no longer needed; lsof +f -- MOUNTPOINT lists them)",
		       VY_NS_HANDLES_MAX);
	fuse_reply_err(req, err);
}
