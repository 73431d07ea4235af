/* Building and tearing down the filesystem: the namespace's root, each
 * device's launcher and modules, peer access, .vyre/ and the sequence log;
 * at the end, the reverse. Above the namespace, the control directory and
 * the files' data: none of them calls back here. */
#include "fs/lifecycle.h"
#include "core/peer.h"
#include "daemon/log.h"
#include "fs/backed.h"
#include "fs/file.h"
#include "fs/moddir.h"
#include "fs/seqlog.h"
#include "fs/vyre.h"
#include "fs/wbehind_keep.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Sequences run in a launcher process when the device can share memory
 * with one; otherwise in this process, which a faulting kernel then takes
 * down with every file (said once). */
/* The mount is going away (a signal, umount): running sequences stop. */
static bool fs_exiting(void *ctx)
{
	vy_fs *fs = ctx;
	return fs->se && fuse_session_exited(fs->se);
}

static vy_err open_runner(vy_fs *fs, vy_fsdev *dev, vy_error *e)
{
	vy_device *d = dev->core->dev;
	if (!d->share) {
		vy_log(LOG_NOTICE, "this device cannot share memory with a launcher: kernels run in the daemon's own "
				   "context, where a faulting kernel loses every file");
		return vy_runner_local_open(d, &dev->runner, e);
	}
	vy_launcher_options o = {
		.exe = "/proc/self/exe",
		.backend = strcmp(d->info.backend, "cuda") ? VY_BACKEND_HOST : VY_BACKEND_CUDA,
		.ordinal = d->info.ordinal,
		.host_memory = d->info.total_bytes,
		.timeout_ms = fs->cfg.launch_timeout_ms,
		.exiting = fs_exiting,
		.exiting_ctx = fs,
	};
	return vy_runner_launcher_open(dev->core->store, dev->core->tel, &o, &dev->runner, e);
}

/* Each device's launcher and modules; and peer access between them. */
static vy_err open_devices(vy_fs *fs, vy_core *const *cores, unsigned n, vy_error *e)
{
	vy_err rc = VY_OK;
	for (unsigned d = 0; d < n && rc == VY_OK; d++) {
		vy_fsdev *dev = &fs->dev[d];
		*dev = (vy_fsdev){.fs = fs, .index = d, .core = cores[d]};
		fs->ndev = d + 1;
		rc = open_runner(fs, dev, e);
		if (rc == VY_OK)
			rc = vy_modules_open(dev->runner, &dev->modules, e);
		if (rc == VY_OK)
			vy_modules_set_maker(dev->modules, vy_moddir_make_builtin, dev);
	}
	if (rc == VY_OK && n > 1 && fs->cfg.peer)
		rc = vy_peer_pair(cores, n, fs->direct, e);
	return rc;
}

vy_err vy_fs_init(vy_fs *fs, vy_core *const *cores, unsigned n, const vy_config *cfg, vy_error *e)
{
	memset(fs, 0, sizeof(*fs));
	if (n < 1 || n > VY_DEVICES_MAX)
		return vy_fail(e, VY_EINVAL, "mount 1 to 16 devices", "%u devices", n);
	fs->cfg = *cfg;
	/* survive=on: a write is acknowledged only once its bytes are in memory
	 * the keeper holds; write-behind gathers only into the keeper's slots
	 * (fs->wbk, wbehind_keep.h), once the mount has them. */
	_Static_assert(VY_NS_ROOT == FUSE_ROOT_ID, "the namespace's root is the kernel's");
	if (!vy_ns_init(vy_fs_ns(fs), cfg->xattr_budget))
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot create the namespace lock");
	struct timespec now;
	vy_now(&now);
	fs->generation = (uint32_t)((uint64_t)now.tv_sec * 1000003u ^ (uint64_t)now.tv_nsec ^ (uint64_t)getpid()) | 1u;
	fs->owner = getuid();
	fs->group = getgid();
	vy_inode *root = vy_inode_new(vy_fs_ns(fs), VY_DIR, S_IFDIR | 0755, fs->owner, fs->group);
	if (!root) {
		vy_ns_destroy(vy_fs_ns(fs));
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the root directory");
	}
	root->nlink = 2;
	root->parent = root->ino;
	root->fixed = true;
	vy_err rc = vy_seqlog_init(&fs->seqlog, e);
	if (rc == VY_OK)
		rc = vy_backed_start(fs, root, e); /* backing=DIR: the root is DIR */
	if (rc == VY_OK)
		rc = open_devices(fs, cores, n, e);
	if (rc == VY_OK)
		rc = vy_vyre_build(fs, root, e);
	if (rc != VY_OK)
		vy_fs_destroy(fs);
	return rc;
}

void vy_fs_destroy(vy_fs *fs)
{
	/* backing=DIR: every dirty byte into DIR while the devices are here. */
	vy_backed_stop(fs);
	/* The launchers first: their mappings end, so files free at once. */
	for (unsigned d = 0; d < fs->ndev; d++) {
		vy_runner_close(fs->dev[d].runner);
		fs->dev[d].runner = NULL;
	}
	uint64_t key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&fs->inodes, &cursor, &key, &value)) {
		vy_inode *in = value;
		if (in->kind == VY_FILE && in->buf)
			vy_file_drop(fs, in);
	}
	vy_ns_destroy(vy_fs_ns(fs)); /* every open file and inode */
	vy_wbk_stop(fs); /* every slot given back with its file */
	for (unsigned d = 0; d < fs->ndev; d++) {
		vy_modules_close(fs->dev[d].modules);
		fs->dev[d].modules = NULL;
	}
	vy_seqlog_destroy(&fs->seqlog);
}
