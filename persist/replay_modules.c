/* The loaded modules made again (replay_modules.h). */
#include "persist/replay_modules.h"
#include "daemon/log.h"
#include "fs/fs.h"
#include "fs/moddir.h"
#include "persist/format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct timespec ts(vy_p_time t)
{
	return (struct timespec){.tv_sec = t.sec, .tv_nsec = t.nsec};
}

/* The image in `fd` (its first `bytes`), malloc'd, or NULL. */
static char *read_image(int fd, uint64_t bytes)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < bytes || bytes > VY_P_MODULE_MAX_BYTES)
		return NULL;
	char *buf = malloc(bytes);
	for (uint64_t at = 0; buf && at < bytes;) {
		ssize_t n = pread(fd, buf + at, bytes - at, (off_t)at);
		if (n > 0)
			at += (uint64_t)n;
		else if (n == 0 || errno != EINTR) {
			free(buf);
			buf = NULL;
		}
	}
	return buf;
}

/* NAME.log of module `in`, with its kept number and place (a help, not a
 * promise: without it, the next load makes one). */
static void make_log(vy_fs *fs, vy_inode *dir, vy_inode *in, const vy_p_module *r)
{
	char name[300];
	snprintf(name, sizeof(name), "%s.log", in->target);
	if (!r->log_ino || vy_dir_find(&dir->dir, name) || vy_fs_inode(fs, r->log_ino))
		return;
	vy_inode *log = vy_inode_new_at(vy_fs_ns(fs), r->log_ino, VY_VIRTUAL, S_IFREG | 0444, fs->owner, fs->group);
	char *target = log ? strdup(in->target) : NULL;
	if (!target || (!vy_dir_add_at(&dir->dir, name, log->ino, r->log_cookie) && !vy_dir_add(&dir->dir, name, log->ino))) {
		free(target);
		if (log)
			vy_ns_reap(vy_fs_ns(fs), log);
		return;
	}
	log->virt = VY_V_MODLOG;
	log->target = target;
	log->nlink = 1;
}

/* Module file `r` with its image: made and named (0), or an errno. */
static int make_module(vy_fs *fs, vy_inode *dir, const vy_p_module *r, char *image, vy_inode **out)
{
	char name[256];
	memcpy(name, r + 1, r->name_len); /* 1..255 bytes, one dot before its extension: the shadow checked */
	name[r->name_len] = 0;
	if (vy_dir_find(&dir->dir, name) || vy_fs_inode(fs, r->ino))
		return EEXIST;
	vy_inode *in = vy_inode_new_at(vy_fs_ns(fs), r->ino, VY_MODULE, S_IFREG | (r->mode & 07777), r->uid, r->gid);
	char *module = in ? strndup(name, (size_t)(strchr(name, '.') - name)) : NULL;
	if (!module || (!vy_dir_add_at(&dir->dir, name, in->ino, r->cookie) && !vy_dir_add(&dir->dir, name, in->ino))) {
		free(module);
		if (in)
			vy_ns_reap(vy_fs_ns(fs), in);
		return ENOMEM;
	}
	in->target = module;
	in->data = image;
	in->dlen = r->bytes;
	in->nlink = 1;
	in->atime = ts(r->atime);
	in->mtime = ts(r->mtime);
	in->ctime = ts(r->ctime);
	in->btime = ts(r->btime);
	make_log(fs, dir, in, r);
	*out = in;
	return 0;
}

/* Module `r` made again and loaded: 0, or an errno (logged). */
static int take_back(vy_fs *fs, const vy_p_module *r, vy_keep_fds *mem)
{
	int fd = r->slot < mem->n ? mem->fd[r->slot] : -1;
	char *image = fd >= 0 ? read_image(fd, r->bytes) : NULL;
	if (!image) {
		vy_log(LOG_WARNING, "takeover: module file inode %" PRIu64 ": its image %s; it is gone (Fix: copy it into "
				    ".vyre/modules/ again)", r->ino, fd < 0 ? "is not with the keeper" : "cannot be read");
		return EIO;
	}
	vy_inode *in = NULL;
	int err = make_module(fs, vy_fs_inode(fs, fs->modules_ino), r, image, &in);
	if (err) {
		free(image);
		vy_log(LOG_WARNING, "takeover: module file inode %" PRIu64 " cannot be made again (%s); it is gone (Fix: "
				    "copy it into .vyre/modules/ again)", r->ino, strerror(err));
		return err;
	}
	/* Loaded as a close after writing loads it (a failure unlists it,
	 * its log says why). */
	err = vy_moddir_load(fs, in);
	if (err) {
		vy_log(LOG_WARNING, "takeover: module file inode %" PRIu64 " does not load again (%s; its log says why); "
				    "it is gone (Fix: copy it into .vyre/modules/ again)", r->ino, strerror(err));
		return err;
	}
	in->kept_slot = r->slot;
	mem->fd[r->slot] = -1; /* read: the keeper's copy stays, under its slot */
	close(fd);
	return 0;
}

vy_err vy_replay_modules(struct vy_fs *fs, vy_shadow *sh, vy_keep_fds *mem, vy_replay_counts *counts, vy_error *e)
{
	size_t n = sh->modules.count, k = 0;
	uint64_t *lost = malloc((n ? n : 1) * sizeof(*lost)), ino;
	if (!lost)
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for the modules");
	void *v;
	for (size_t i = 0; vy_u64map_next(&sh->modules, &i, &ino, &v);) {
		if (take_back(fs, v, mem) == 0)
			counts->modules++;
		else
			lost[k++] = ino;
	}
	for (size_t i = 0; i < k; i++) /* no removal while walking the map */
		vy_shadow_forget_module(sh, lost[i]);
	counts->modules_lost += k;
	free(lost);
	return VY_OK;
}
