/* .vyre/upgrade (issue "survive", docs/survive.md "Upgrade"): the mounting
 * user's (0200), written only. A write asks the daemon to hand the mount to
 * the binary now installed at its path, once the requests in flight are
 * answered; the write is answered first. `vyrefs --upgrade MOUNTPOINT`
 * writes it. The kernel checks who may open it; the daemon trusts that. */
#include "fs/ctl_file.h"
#include "fs/fs.h"
#include "fs/kind.h"
#include "daemon/log.h"

#include <errno.h>
#include <fcntl.h>

static bool upgrade_open(fuse_req_t req, vy_fs *fs, vy_open *h, struct fuse_file_info *fi)
{
	(void)fs;
	(void)h;
	if ((fi->flags & O_ACCMODE) != O_WRONLY) {
		fuse_reply_err(req, EPERM); /* nothing to read */
		return false;
	}
	fi->direct_io = 1;
	return true;
}

static void upgrade_write(fuse_req_t req, vy_fs *fs, vy_open *h, const char *buf, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	(void)h;
	(void)buf;
	(void)off;
	(void)fi;
	if (!fs->upgrade) {
		vy_log(LOG_WARNING, ".vyre/upgrade: this mount does not survive its daemon, so it cannot hand over "
				    "(Fix: mount with -o survive=on)");
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	int err = size ? fs->upgrade(fs) : 0;
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
}

const vy_kind_ops vy_upgrade_kind = {
	.no_data = EINVAL,
	.uncached = true,
	.open = upgrade_open,
	.write = upgrade_write,
	.resize = vy_ctl_truncated_only, /* `echo now > .vyre/upgrade` truncates first, as for ctl */
};
