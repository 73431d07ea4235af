/* The inode table: creation, lifetime, attributes. */
#include "fs/fs.h"
#include "core/peer.h"
#include "fs/session.h"
#include "fs/ctl_file.h"
#include "fs/file.h"
#include "fs/log.h"
#include "fs/moddir.h"
#include "fs/vyre.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void vy_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
}

vy_inode *vy_inode_new(vy_fs *fs, vy_kind kind, mode_t mode, uid_t uid, gid_t gid)
{
	vy_inode *in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	if (pthread_rwlock_init(&in->lock, NULL) != 0) {
		free(in);
		return NULL;
	}
	if (pthread_mutex_init(&in->meta, NULL) != 0) {
		pthread_rwlock_destroy(&in->lock);
		free(in);
		return NULL;
	}
	in->ino = fs->next_ino;
	in->kind = kind;
	in->xattrs.budget = &fs->xattr_budget;
	in->mode = mode;
	in->uid = uid;
	in->gid = gid;
	vy_now(&in->mtime);
	in->atime = in->ctime = in->btime = in->mtime;
	if (kind == VY_DIR)
		vy_dir_init(&in->dir);
	if (!vy_u64map_put(&fs->inodes, in->ino, in)) {
		pthread_mutex_destroy(&in->meta);
		pthread_rwlock_destroy(&in->lock);
		free(in);
		return NULL;
	}
	fs->next_ino++;
	return in;
}

/* Bytes of xattrs and modules freed since malloc last gave memory back. */
static _Atomic uint64_t freed_since_trim;

/* Deleting files gives the daemon's memory back to the system, not only to
 * malloc's free lists (now and then: a trim walks every arena). */
static void gave_back(uint64_t bytes)
{
	if (bytes && atomic_fetch_add(&freed_since_trim, bytes) + bytes >= (1u << 20)) {
		atomic_store(&freed_since_trim, 0);
		malloc_trim(0);
	}
}

static void inode_free(vy_inode *in)
{
	if (in->kind == VY_DIR)
		vy_dir_destroy(&in->dir);
	uint64_t big = in->xattrs.bytes + in->dlen;
	free(in->target);
	free(in->data);
	vy_xattrs_destroy(&in->xattrs);
	gave_back(big);
	pthread_mutex_destroy(&in->meta);
	pthread_rwlock_destroy(&in->lock);
	free(in);
}

void vy_inode_reap(vy_fs *fs, vy_inode *in)
{
	if (in->nlink > 0 || in->opens > 0 || in->fixed)
		return;
	if (in->kind == VY_FILE && in->buf) {
		/* No name and no handle: nobody can reach the bytes again. */
		pthread_rwlock_wrlock(&in->lock);
		vy_file_drop(fs, in);
		pthread_rwlock_unlock(&in->lock);
	}
	if (in->xattrs.n) {
		/* Nor its xattrs: free them now, not when the kernel forgets the
		 * inode, which may be much later. */
		pthread_rwlock_wrlock(&in->lock);
		uint64_t bytes = in->xattrs.bytes;
		vy_xattr_budget *budget = in->xattrs.budget;
		vy_xattrs_destroy(&in->xattrs);
		in->xattrs.budget = budget;
		pthread_rwlock_unlock(&in->lock);
		gave_back(bytes);
	}
	if (in->nlookup > 0)
		return;
	vy_u64map_remove(&fs->inodes, in->ino);
	inode_free(in);
}

vy_open *vy_open_new(vy_inode *in)
{
	vy_open *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	if (pthread_mutex_init(&o->ctl, NULL) != 0) {
		free(o);
		return NULL;
	}
	o->in = in;
	o->next_line = 1;
	return o;
}

void vy_open_add(vy_fs *fs, vy_open *o)
{
	o->prev = NULL;
	o->next = fs->opens;
	if (fs->opens)
		fs->opens->prev = o;
	fs->opens = o;
}

void vy_open_free(vy_fs *fs, vy_open *o)
{
	if (o->prev)
		o->prev->next = o->next;
	else
		fs->opens = o->next;
	if (o->next)
		o->next->prev = o->prev;
	pthread_mutex_destroy(&o->ctl);
	free(o->text);
	free(o->pending);
	free(o->reply);
	free(o);
}

vy_inode *vy_fs_inode(vy_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->ns);
	vy_inode *in = vy_u64map_get(&fs->inodes, ino);
	pthread_mutex_unlock(&fs->ns);
	return in;
}

void vy_inode_stat(vy_fs *fs, vy_inode *in, struct stat *st)
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
	switch (in->kind) {
	case VY_FILE:
		/* Where files may have holes, the granule is the unit of a hole,
		 * of SEEK_HOLE's answers and of st_blocks: say it (docs/fs.md). */
		if (vy_fs_core(fs, in)->dev->share && vy_fs_core(fs, in)->dev->info.share_granularity)
			st->st_blksize = (blksize_t)vy_fs_core(fs, in)->dev->info.share_granularity;
		st->st_size = (off_t)in->size;
		st->st_blocks = (blkcnt_t)((in->cap - in->holes + 511) / 512); /* device bytes held */
		break;
	case VY_SYMLINK:
		st->st_size = (off_t)strlen(in->target);
		break;
	case VY_DIR:
		st->st_size = 4096;
		st->st_blocks = 8;
		break;
	case VY_VIRTUAL:
		st->st_size = (off_t)vy_vyre_size(fs, in);
		break;
	case VY_MODULE:
		st->st_size = (off_t)in->dlen;
		st->st_blocks = (blkcnt_t)((in->dlen + 511) / 512);
		break;
	case VY_SPECIAL:
		st->st_rdev = in->rdev;
		break;
	}
}

unsigned vy_inode_attr_flags(vy_inode *in)
{
	pthread_mutex_lock(&in->meta);
	unsigned f = in->attr_flags;
	pthread_mutex_unlock(&in->meta);
	return f;
}

void vy_inode_touch(vy_inode *in, bool modified)
{
	pthread_mutex_lock(&in->meta);
	vy_now(&in->ctime);
	if (modified)
		in->mtime = in->ctime;
	pthread_mutex_unlock(&in->meta);
}

bool vy_inode_wrote(vy_inode *in, fuse_req_t req)
{
	pthread_mutex_lock(&in->meta);
	vy_now(&in->ctime);
	in->mtime = in->ctime;
	mode_t was = in->mode;
	in->mode = vy_session_kill_suid(req, in->mode, in->gid, false);
	pthread_mutex_unlock(&in->meta);
	return in->mode != was;
}

mode_t vy_inode_type(const vy_inode *in)
{
	switch (in->kind) {
	case VY_DIR: return S_IFDIR;
	case VY_SYMLINK: return S_IFLNK;
	case VY_FILE:
	case VY_VIRTUAL:
	case VY_MODULE: break;
	case VY_SPECIAL: return in->mode & S_IFMT; /* never changes: no lock */
	}
	return S_IFREG;
}

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
	return vy_runner_launcher_open(dev->core->store, &dev->core->tel, &o, &dev->runner, e);
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
	fs->next_ino = FUSE_ROOT_ID;
	fs->xattr_budget.max = cfg->xattr_budget;
	struct timespec now;
	vy_now(&now);
	fs->generation = (uint32_t)((uint64_t)now.tv_sec * 1000003u ^ (uint64_t)now.tv_nsec ^ (uint64_t)getpid()) | 1u;
	fs->owner = getuid();
	fs->group = getgid();
	vy_u64map_init(&fs->inodes);
	if (pthread_mutex_init(&fs->ns, NULL) != 0)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot create the namespace lock");
	vy_inode *root = vy_inode_new(fs, VY_DIR, S_IFDIR | 0755, fs->owner, fs->group);
	if (!root) {
		pthread_mutex_destroy(&fs->ns);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the root directory");
	}
	root->nlink = 2;
	root->parent = root->ino;
	root->fixed = true;
	vy_err rc = pthread_mutex_init(&fs->log_lock, NULL) == 0
			    ? open_devices(fs, cores, n, e)
			    : vy_fail(e, VY_ENOMEM, "free host memory", "cannot create the log's lock");
	if (rc == VY_OK)
		rc = vy_vyre_build(fs, root, e);
	if (rc != VY_OK)
		vy_fs_destroy(fs);
	return rc;
}

void vy_fs_destroy(vy_fs *fs)
{
	/* The launchers first: their mappings end, so files free at once. */
	for (unsigned d = 0; d < fs->ndev; d++) {
		vy_runner_close(fs->dev[d].runner);
		fs->dev[d].runner = NULL;
	}
	while (fs->opens) /* releases the kernel did not send */
		vy_open_free(fs, fs->opens);
	uint64_t key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&fs->inodes, &cursor, &key, &value)) {
		vy_inode *in = value;
		if (in->kind == VY_FILE && in->buf)
			vy_file_drop(fs, in);
		inode_free(in);
	}
	vy_u64map_destroy(&fs->inodes);
	pthread_mutex_destroy(&fs->ns);
	for (unsigned d = 0; d < fs->ndev; d++) {
		vy_modules_close(fs->dev[d].modules);
		fs->dev[d].modules = NULL;
	}
	vy_ctlfile_log_free(fs);
	pthread_mutex_destroy(&fs->log_lock);
}
