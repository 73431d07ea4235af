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

/* Serve requests until unmount or a signal; 0, or a negative errno.
 * idle_threads > 0 caps the workers kept idle (0: libfuse's default, none).
 * The kernel hands each request to the worker that waited longest, so
 * after a busy spell one-at-a-time requests rotate over every idle worker
 * and each runs on a cold core: measured on the H200, a control-file
 * launch 31 -> 52 µs and a 4 KiB read at iodepth 1 22 -> 42 µs; a cap of 4
 * kept them at 32 and 25 µs, but the exits and restarts cost 8 parallel
 * readers 15% (bench/run.sh measures both). */
int vy_session_loop(struct fuse_session *se, unsigned idle_threads);

#endif
