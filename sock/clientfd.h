/* What a client's file descriptor may be. A client proves what it may do
 * with the fds it passes over the client socket: the kernel checked its
 * permissions when it opened them. The daemon acts on such an fd only
 * where the client itself could: the access mode it was opened with (never
 * O_PATH), a regular file, on a filesystem whose files are data (not proc,
 * sysfs and the like, where the daemon's own credentials would matter),
 * and never to write an append-only or immutable file. */
#ifndef VY_CLIENTFD_H
#define VY_CLIENTFD_H

#include "fs/fs.h"

#include <sys/types.h>

enum { VY_FD_READ = 1, VY_FD_WRITE = 2 };

/* The file of this mount (device `dev`) that fd names, held like an open
 * file (vy_clientfd_let_go ends that), when fd was opened for `need`
 * (VY_FD_READ, VY_FD_WRITE or both). */
vy_err vy_clientfd_mount_file(vy_fs *fs, dev_t dev, int fd, int need, vy_inode **out, vy_error *e);
void vy_clientfd_let_go(vy_fs *fs, vy_inode *in);

/* The other file of a copy: a regular file off this mount, opened for
 * `need`, on a filesystem of data, not append-only or immutable. */
vy_err vy_clientfd_other(int fd, dev_t mount_dev, int need, vy_error *e);

/* Close the other file's fd in a thread of its own: closing a file of a
 * FUSE filesystem asks its daemon (a flush), which may never answer. */
void vy_clientfd_close(int fd);

#endif
