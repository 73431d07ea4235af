/* Module files: bytes in host memory, loaded at close. */
#include "fs/moddir.h"
#include "fs/moddir_keep.h"
#include "fs/kind.h"
#include "fs/file.h"
#include "daemon/log.h"
#include "ctl/nvrtc.h"
#include "ctl/std.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const extensions[] = {".ptx", ".cubin", ".fatbin", ".cu"};

int vy_moddir_name(const char *name, char **module)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < sizeof(extensions) / sizeof(extensions[0]); i++) {
		size_t ext = strlen(extensions[i]);
		if (len > ext && !strcmp(name + len - ext, extensions[i])) {
			if (strchr(name, '.') != name + len - ext) {
				vy_log(LOG_NOTICE, "modules/%s refused: a module name has no dots (launch names MODULE.ENTRY)",
				       name);
				return EINVAL;
			}
			/* `std` is the built-in module: a user's would shadow it
			 * for every sequence that launches std.ENTRY. */
			if (len - ext == strlen(VY_STD_NAME) && !strncmp(name, VY_STD_NAME, len - ext)) {
				vy_log(LOG_NOTICE, "modules/%s refused: %s is the built-in module's name (pick another)", name,
				       VY_STD_NAME);
				return EEXIST;
			}
			*module = strndup(name, len - ext);
			return *module ? 0 : ENOMEM;
		}
	}
	vy_log(LOG_NOTICE, "modules/%s refused: name modules NAME.ptx, NAME.cubin, NAME.fatbin or NAME.cu", name);
	return EINVAL;
}

static int resize(vy_inode *in, uint64_t size)
{
	if (size > VY_MODULE_MAX)
		return EFBIG;
	if (size > in->dlen) {
		char *d = realloc(in->data, size);
		if (!d)
			return ENOMEM;
		memset(d + in->dlen, 0, size - in->dlen);
		in->data = d;
	}
	in->dlen = size;
	return 0;
}

int vy_moddir_write(vy_inode *in, uint64_t off, const char *buf, size_t size)
{
	pthread_rwlock_wrlock(&in->lock);
	int err = off > VY_MODULE_MAX || size > VY_MODULE_MAX - off ? EFBIG : 0;
	if (!err && off + size > in->dlen)
		err = resize(in, off + size);
	if (!err)
		memcpy(in->data + off, buf, size);
	if (err == EFBIG)
		in->overflowed = true; /* what is kept is not the module */
	pthread_rwlock_unlock(&in->lock);
	return err;
}

size_t vy_moddir_read(vy_inode *in, uint64_t off, char *buf, size_t size)
{
	pthread_rwlock_rdlock(&in->lock);
	size_t n = off < in->dlen ? (in->dlen - off < size ? in->dlen - off : size) : 0;
	memcpy(buf, in->data + off, n);
	pthread_rwlock_unlock(&in->lock);
	return n;
}

int vy_moddir_truncate(vy_inode *in, uint64_t size)
{
	pthread_rwlock_wrlock(&in->lock);
	int err = resize(in, size);
	if (!err && size == 0)
		in->overflowed = false; /* written afresh */
	pthread_rwlock_unlock(&in->lock);
	return err;
}

/* modules/NAME.log for module NAME: made at its first load. ns held. */
static void ensure_log(vy_fs *fs, vy_inode *dir, const char *module)
{
	char name[300];
	snprintf(name, sizeof(name), "%s.log", module);
	if (vy_dir_find(&dir->dir, name))
		return;
	vy_inode *log = vy_inode_new(vy_fs_ns(fs), VY_VIRTUAL, S_IFREG | 0444, fs->owner, fs->group);
	char *target = strdup(module);
	if (!log || !target || !vy_dir_add(&dir->dir, name, log->ino)) {
		free(target);
		if (log)
			vy_inode_reap(fs, log);
		return; /* the log is a help, not a promise */
	}
	log->virt = VY_V_MODLOG;
	log->target = target;
	log->nlink = 1;
}

/* The name under which `in` stands in `dir`, or NULL. ns held. */
static const char *name_of(vy_inode *dir, vy_inode *in)
{
	const vy_dirent *e = vy_dir_naming(&dir->dir, in->ino);
	return e ? e->name : NULL;
}

/* Take a module file out of modules/ (it is not loaded), and out of the
 * kernel's dentry cache. */
static void unlist(vy_fs *fs, vy_inode *in)
{
	char *gone = NULL;
	pthread_mutex_lock(&fs->ns);
	vy_inode *dir = vy_u64map_get(&fs->inodes, fs->modules_ino);
	const char *name = name_of(dir, in);
	gone = name ? strdup(name) : NULL;
	if (gone && vy_dir_remove(&dir->dir, gone))
		in->nlink--;
	vy_moddir_unkeep(fs, in);
	vy_inode_reap(fs, in);
	pthread_mutex_unlock(&fs->ns);
	if (gone && fs->se)
		fuse_lowlevel_notify_inval_entry(fs->se, fs->modules_ino, gone, strlen(gone));
	free(gone);
}

void vy_moddir_closed(vy_fs *fs, vy_inode *in)
{
	if (in->nlink > 0 && !vy_modules_loaded(fs->dev[0].modules, in->target))
		unlist(fs, in);
}

/* CUDA C to PTX by NVRTC (ctl/nvrtc.c) for device `dev`, with the
 * mount's options and cache, counted in the stats. `name` is NAME.cu.
 * Devices of one architecture share the cache's entry. */
static vy_err compile_source(vy_fsdev *dev, const char *name, const char *src, char **ptx, size_t *len, char **log,
			     vy_error *e)
{
	vy_fs *fs = dev->fs;
	const vy_device_info *d = &dev->core->dev->info;
	vy_nvrtc_job job = {.name = name,
			    .src = src,
			    .cflags = fs->cfg.kernel_cflags,
			    .cc_major = d->cc_major,
			    .cc_minor = d->cc_minor,
			    .cache_dir = getenv("CUDA_CACHE_DISABLE") ? NULL : getenv("CUDA_CACHE_PATH")};
	bool hit = false;
	vy_err rc = vy_nvrtc_compile(&job, ptx, len, log, &hit, e);
	if (rc == VY_OK && hit)
		vy_telemetry_add(dev->core->tel, compile_cache_hits, 1);
	else if (rc == VY_OK)
		vy_telemetry_add(dev->core->tel, compiles, 1);
	return rc;
}

/* Without NVRTC, the host backend keeps CUDA C uncompiled, as it keeps
 * any module (no device runs it): the copy succeeds, NAME.log says so,
 * and a launch says it needs the cuda backend (README's first session,
 * on a machine with no CUDA toolkit). The cuda backend refuses. */
static bool keeps_uncompiled(const vy_fsdev *dev)
{
	return strcmp(dev->core->dev->info.backend, "cuda") != 0;
}

/* A .cu module: compiled to PTX, or the reason recorded as its log. Lock
 * held. */
static vy_err compile(vy_fsdev *dev, vy_inode *in, char **ptx, size_t *len, vy_error *e)
{
	char *src = malloc(in->dlen + 1), *log = NULL;
	if (!src)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot hold the source of '%s'", in->target);
	memcpy(src, in->data, in->dlen);
	src[in->dlen] = '\0';
	char name[300];
	snprintf(name, sizeof(name), "%s.cu", in->target);
	vy_err rc = strlen(src) != in->dlen ? vy_fail(e, VY_EINVAL, "copy CUDA C source text", "'%s' holds NUL bytes", name)
					   : compile_source(dev, name, src, ptx, len, &log, e);
	if (rc == VY_ENOTSUP && keeps_uncompiled(dev))
		rc = VY_OK; /* *ptx NULL: the source bytes are what is loaded */
	if (rc != VY_OK)
		vy_modules_failed(dev->modules, in->target, log ? log : e->msg, NULL);
	free(log);
	free(src);
	return rc;
}

vy_err vy_moddir_make_builtin(void *ctx, const char *name, void **image, size_t *len, char **log, vy_error *e)
{
	if (strcmp(name, VY_STD_NAME) != 0)
		return VY_ENOENT;
	char *ptx = NULL;
	vy_err rc = compile_source(ctx, VY_STD_NAME ".cu", vy_std_source, &ptx, len, log, e); /* ctx: a vy_fsdev */
	if (rc == VY_ENOTSUP && keeps_uncompiled(ctx)) {
		free(*log);
		*log = NULL;
		ptx = strdup(vy_std_source); /* kept as the source, as a copied .cu */
		*len = ptx ? strlen(ptx) : 0;
		rc = ptx ? VY_OK : vy_fail(e, VY_ENOMEM, "free host memory", "cannot keep the std module's source");
	}
	*image = ptx;
	return rc;
}

/* Whether `in` is NAME.cu (else PTX, cubin or fatbin). ns held. */
static bool is_source(vy_fs *fs, vy_inode *in)
{
	const char *name = name_of(vy_u64map_get(&fs->inodes, fs->modules_ino), in);
	size_t len = name ? strlen(name) : 0;
	return len > 3 && !strcmp(name + len - 3, ".cu");
}

int vy_moddir_load(vy_fs *fs, vy_inode *in)
{
	pthread_mutex_lock(&fs->ns);
	bool source = is_source(fs, in);
	pthread_mutex_unlock(&fs->ns);
	pthread_rwlock_rdlock(&in->lock);
	vy_error e;
	vy_err rc = VY_OK;
	/* In use on any device: refused before any device changes. */
	for (unsigned k = 0; k < fs->ndev && rc == VY_OK; k++)
		if (vy_modules_busy(fs->dev[k].modules, in->target))
			rc = vy_fail(&e, VY_EBUSY, "wait for the running sequence to finish",
				     "module '%s' is in use by a running sequence", in->target);
	/* Into every device's context; all or none of them. */
	unsigned d = 0;
	for (; d < fs->ndev && rc == VY_OK; d++) {
		vy_modules *m = fs->dev[d].modules;
		char *ptx = NULL;
		size_t ptx_len = 0;
		vy_err made = source && !in->overflowed && in->dlen ? compile(&fs->dev[d], in, &ptx, &ptx_len, &e) : VY_OK;
		rc = in->overflowed ? vy_fail(&e, VY_EINVAL, "keep modules under 256 MiB (split the code into several)",
					      "module '%s' was larger than 256 MiB: what arrived of it is not loaded",
					      in->target)
		     : made != VY_OK ? made
		     : ptx	      ? vy_modules_load(m, in->target, ptx, ptx_len, &e)
		     : in->dlen ? vy_modules_load(m, in->target, in->data, in->dlen, &e)
				: vy_fail(&e, VY_EINVAL, "copy a PTX, cubin or fatbin file", "module '%s' is empty", in->target);
		free(ptx);
	}
	if (in->overflowed) /* an older version goes too */
		for (unsigned k = 0; k < fs->ndev; k++)
			vy_modules_unload(fs->dev[k].modules, in->target, NULL);
	else if (rc != VY_OK && d > 0) {
		/* All or none: the devices before the failing one hold the new
		 * version, those after it the old one; none keeps either, and
		 * each carries the failing device's log (NAME.log reads dev 0). */
		char *why = vy_modules_log(fs->dev[d - 1].modules, in->target);
		for (unsigned k = 0; k < fs->ndev; k++)
			if (k != d - 1)
				vy_modules_failed(fs->dev[k].modules, in->target, why ? why : e.msg, NULL);
		free(why);
	}
	int kept = rc == VY_OK ? vy_moddir_image_fd(fs, in) : -1; /* the bytes loaded, for a successor */
	pthread_rwlock_unlock(&in->lock);
	pthread_mutex_lock(&fs->ns);
	ensure_log(fs, vy_u64map_get(&fs->inodes, fs->modules_ino), in->target);
	pthread_mutex_unlock(&fs->ns);
	vy_moddir_keep(fs, in, kept);
	if (rc == VY_OK)
		return 0;
	vy_log(LOG_NOTICE, "module %s: %s", in->target, e.msg);
	/* Not loaded, so not listed: its log says why. Last: with nothing
	 * holding it open (a takeover's replay) the inode is freed there. */
	if (rc != VY_EBUSY)
		unlist(fs, in);
	return rc == VY_EBUSY ? EBUSY : EINVAL;
}

int vy_moddir_forget(vy_fs *fs, vy_inode *dir, vy_inode *in)
{
	vy_error e;
	for (unsigned d = 0; d < fs->ndev; d++)
		if (vy_modules_busy(fs->dev[d].modules, in->target))
			return EBUSY; /* before any device forgets it */
	for (unsigned d = 0; d < fs->ndev; d++)
		if (vy_modules_unload(fs->dev[d].modules, in->target, &e) != VY_OK)
			return EBUSY;
	vy_moddir_unkeep(fs, in);
	char name[300];
	snprintf(name, sizeof(name), "%s.log", in->target);
	vy_dirent *d = vy_dir_find(&dir->dir, name);
	vy_inode *log = d ? vy_u64map_get(&fs->inodes, d->ino) : NULL;
	if (log) {
		vy_dir_remove(&dir->dir, name);
		log->nlink = 0;
		vy_inode_reap(fs, log);
	}
	return 0;
}

/* Module files' table (kind.h): an image in host memory, read and written
 * by offset, loaded when a writer closes it. */
static void module_stat(vy_fs *fs, vy_inode *in, struct stat *st)
{
	(void)fs;
	st->st_size = (off_t)in->dlen;
	st->st_blocks = (blkcnt_t)((in->dlen + 511) / 512);
}

static bool module_open(fuse_req_t req, vy_fs *fs, vy_open *h, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) != O_RDONLY && (fi->flags & O_TRUNC) && vy_moddir_truncate(h->in, 0) != 0) {
		fuse_reply_err(req, ENOMEM);
		return false;
	}
	fi->keep_cache = fs->cfg.page_cache;
	return true;
}

static void module_read(fuse_req_t req, vy_fs *fs, vy_open *h, size_t size, off_t off)
{
	(void)fs;
	char *buf = malloc(size ? size : 1);
	if (buf)
		fuse_reply_buf(req, buf, vy_moddir_read(h->in, (uint64_t)off, buf, size));
	else
		fuse_reply_err(req, ENOMEM);
	free(buf);
}

static void module_write(fuse_req_t req, vy_fs *fs, vy_open *h, const char *buf, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	(void)fs;
	(void)fi;
	if (off < 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	int err = vy_moddir_write(h->in, (uint64_t)off, buf, size);
	if (!err) {
		h->written = true;
		vy_inode_touch(h->in, true);
	}
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
}

/* A module that does not load fails the close. */
static void module_flush(fuse_req_t req, vy_fs *fs, vy_open *h)
{
	int err = 0;
	if (h->written) {
		h->written = false;
		err = vy_moddir_load(fs, h->in);
	}
	fuse_reply_err(req, err);
}

static bool module_resize(fuse_req_t req, vy_fs *fs, vy_inode *in, off_t size, bool *resized)
{
	(void)fs;
	*resized = false; /* its size changes no time */
	int err = size < 0 ? EINVAL : vy_moddir_truncate(in, (uint64_t)size);
	if (err)
		fuse_reply_err(req, err);
	return !err;
}

const vy_kind_ops vy_module_kind = {
	.no_data = EINVAL,
	.stat = module_stat,
	.open = module_open,
	.read = module_read,
	.write = module_write,
	.flush = module_flush,
	.closed = vy_moddir_closed,
	.resize = module_resize,
	.unlink = vy_moddir_forget, /* EBUSY while a sequence uses it */
};
