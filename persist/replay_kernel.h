/* A successor's side, what the kernel and client programs hold (replay.c
 * calls it once the inodes and names are made): the references the kernel
 * counts on each inode, the open files and directories it names by `fh`,
 * taken back with the same ids so a program's open fd reads on after the
 * death, and the files client programs map (each held as an open file is,
 * until the map server takes its connection back). */
#ifndef VY_PERSIST_REPLAY_KERNEL_H
#define VY_PERSIST_REPLAY_KERNEL_H

#include "core/err.h"
#include "persist/replay_counts.h"
#include "persist/shadow.h"
#include "core/store_keep.h"

struct vy_fs;

/* Mappings and handles from `sh` into fs (the lookup counts are set by
 * replay.c, in its walk of the inodes in order); a handle that cannot be
 * taken back (its inode is not made again, or is of another kind) is
 * dropped from `sh` and counted: the kernel's next request on it gets
 * EBADF. VY_ENOMEM. */
vy_err vy_replay_kernel_refs(struct vy_fs *fs, vy_shadow *sh, vy_replay_counts *counts, vy_error *e);

/* A client connection that maps files, for the map server to serve on
 * (sock/mapsrv.h vy_mapsrv_adopt): its kept record and its socket. */
typedef struct vy_kept_conn {
	struct vy_p_mapconn *rec; /* malloc'd, with its mappings; a mapping whose ino is 0 holds no file */
	int fd;                   /* -1: the keeper did not hand it */
} vy_kept_conn;
typedef struct vy_kept_conns {
	vy_kept_conn *c;
	size_t n;
} vy_kept_conns;

/* Every kept client connection of `sh`, its socket taken out of `mem`
 * (before the slots nothing took are dropped). VY_ENOMEM. */
vy_err vy_replay_mapconns(const vy_shadow *sh, vy_keep_fds *mem, vy_kept_conns *out, vy_error *e);
/* Free what the map server did not take (closing sockets). */
void vy_kept_conns_free(vy_kept_conns *kc);

#endif
