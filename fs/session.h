#ifndef VY_FS_SESSION_H
#define VY_FS_SESSION_H
/* The FUSE settings vyrefs runs with: the connection's capabilities and the
 * request loop. bench/nullfs uses the same two calls, so the benchmark's
 * FUSE ceiling runs exactly as vyrefs does. */

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stddef.h>
#include <sys/types.h>

/* At INIT: largest write, no kernel write-back cache (a write reaches the
 * store before it is acknowledged). */
void vy_session_conn(struct fuse_conn_info *conn, size_t max_write);

/* fuse_session_mount, and the INIT reply asks the kernel to leave the
 * suid/sgid bits to us (FUSE_HANDLE_KILLPRIV_V2): no xattr round trip per
 * write. -1 when the mount failed. */
int vy_session_mount(struct fuse_session *se, const char *mountpoint);

/* `mode` after a write or truncate by the request's caller: suid and sgid
 * dropped as the kernel would (callers other than root). */
mode_t vy_session_kill_suid(fuse_req_t req, mode_t mode);

/* Serve requests until unmount or a signal; 0, or a negative errno. */
int vy_session_loop(struct fuse_session *se);

#endif
