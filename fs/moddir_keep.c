/* A loaded module kept for a successor (moddir_keep.h). */
#include "fs/moddir_keep.h"
#include "core/device_keep.h"
#include "daemon/log.h"
#include "persist/format.h"
#include "persist/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int vy_moddir_image_fd(vy_fs *fs, vy_inode *in)
{
	if (!vy_fs_keeps_fds(fs) || !in->dlen)
		return -1;
	int fd = memfd_create("vyrefs-module", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t at = 0;
	while (fd >= 0 && at < in->dlen) {
		ssize_t n = write(fd, in->data + at, in->dlen - at);
		if (n > 0)
			at += (size_t)n;
		else if (n < 0 && errno != EINTR)
			break;
	}
	/* Sealed: a successor loads exactly what this daemon loaded. */
	if (fd >= 0 && (at != in->dlen || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)) {
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		vy_log(LOG_WARNING, "module %s: cannot keep its image for a successor (%s); it does not survive the "
				    "daemon's death (Fix: free host memory, then copy it in again)", in->target, strerror(errno));
	return fd;
}

void vy_moddir_keep(vy_fs *fs, vy_inode *in, int fd)
{
	if (fd < 0)
		return;
	struct stat st;
	vy_keep_slot slot = fstat(fd, &st) == 0 && st.st_size > 0 ? fs->keep_sink->add(fs->keep_sink->ctx, fd) : 0;
	close(fd); /* the keeper holds its copy (or none: the sink logged why) */
	if (!slot)
		return;
	vy_keep_slot old = slot; /* dropped below: this one, if the module left meanwhile */
	pthread_mutex_lock(&fs->ns);
	vy_inode *dir = vy_u64map_get(&fs->inodes, fs->modules_ino);
	const vy_dirent *d = in->nlink ? vy_dir_naming(&dir->dir, in->ino) : NULL;
	if (d) {
		char log[300];
		snprintf(log, sizeof(log), "%s.log", in->target);
		const vy_dirent *l = vy_dir_find(&dir->dir, log);
		vy_p_module where = {.cookie = d->cookie,
				     .log_ino = l ? l->ino : 0,
				     .log_cookie = l ? l->cookie : 0,
				     .bytes = (uint64_t)st.st_size,
				     .slot = slot};
		vy_persist_module(fs, in, &where, d->name);
		old = in->kept_slot;
		in->kept_slot = slot;
	}
	pthread_mutex_unlock(&fs->ns);
	if (old)
		fs->keep_sink->drop(fs->keep_sink->ctx, old); /* after the record: a death between leaves a slot no record claims, which a successor drops */
}

void vy_moddir_unkeep(vy_fs *fs, vy_inode *in)
{
	vy_keep_slot slot = in->kept_slot;
	in->kept_slot = 0;
	if (!slot || !vy_fs_keeps_fds(fs))
		return;
	vy_p_module gone = {.slot = 0};
	vy_persist_module(fs, in, &gone, "");
	fs->keep_sink->drop(fs->keep_sink->ctx, slot);
}
