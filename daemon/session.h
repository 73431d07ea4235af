#ifndef VY_FS_SESSION_H
#define VY_FS_SESSION_H
/* The FUSE settings vyrefs runs with: the connection's capabilities and the
 * request loop. bench/nullfs uses the same two calls, so the benchmark's
 * FUSE ceiling runs exactly as vyrefs does. */

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* At INIT: largest write, no kernel write-back cache (a write reaches the
 * store before it is acknowledged). */
void vy_session_conn(struct fuse_conn_info *conn, size_t max_write);

/* fuse_session_mount, and the INIT reply asks the kernel to leave the
 * suid/sgid bits to us (FUSE_HANDLE_KILLPRIV_V2): no xattr round trip per
 * write. -1 when the mount failed. */
int vy_session_mount(struct fuse_session *se, const char *mountpoint);

/* survive=on: the kernel's INIT request and the INIT reply as sent (after
 * the KILLPRIV_V2 edit) go into the state region when they pass (state/). */
struct vy_state;
void vy_session_record_init(struct vy_state *st);

/* survive=on (daemon/resend.c): told of each request a worker reads (a
 * resent one with FUSE_UNIQUE_RESEND still set) and each reply it writes,
 * before and after the write; asked for the kept reply to a resent request
 * (bit 63 cleared), which the session then writes in place of running it
 * (0: none kept). Set before the session serves; NULL: none. */
struct fuse_in_header;
#ifndef FUSE_UNIQUE_RESEND
#define FUSE_UNIQUE_RESEND (1ULL << 63) /* a resent request's unique (Linux 6.9; older headers lack it) */
#endif
typedef struct vy_session_hooks {
	void (*read)(const struct fuse_in_header *in);
	void (*reply)(uint64_t unique, const struct iovec *iov, int count);
	void (*sent)(uint64_t unique);
	size_t (*resent)(uint64_t unique, void *buf, size_t cap);
} vy_session_hooks;
void vy_session_hook(const vy_session_hooks *h);

/* Stop reading requests (a worker that asks for the next one waits for
 * ever: the caller is about to exit) and wait, at most `ms`, until every
 * request read has been answered. Returns how many are still unanswered
 * (the kernel resends them to a successor). */
long vy_session_quiesce(unsigned ms);

/* A successor's session on a live /dev/fuse fd, with no mount: replays
 * the recorded INIT at once (libfuse knows the protocol before anything
 * serves), checks libfuse's reply against the recorded one, and its loop's
 * first read asks the kernel to resend what the dead daemon had read
 * (adopt_io.h).
 * -1 when the recorded exchange is not an INIT's. */
int vy_session_adopt(struct fuse_session *se, int fuse_fd, const void *init_req, size_t init_req_len,
		     const void *init_reply, size_t init_reply_len);

/* The name a create carries when it is an O_TMPFILE (session.c turns the
 * kernel's FUSE_TMPFILE into a create of this name): make the inode
 * without a name. */
#define VY_SESSION_TMPFILE_NAME "/"

/* `mode` (of a file in group `gid`) after a write, truncate or fallocate
 * by the request's caller, or after a chown (`chown`): suid and sgid
 * dropped as the kernel would drop them (session.c says the rule). */
mode_t vy_session_kill_suid(fuse_req_t req, mode_t mode, gid_t gid, bool chown);
/* Whether the request's caller may write a file of this mode and owner
 * (uid 0 may write anything, as for CAP_DAC_OVERRIDE). */
bool vy_session_may_write(fuse_req_t req, mode_t mode, uid_t uid, gid_t gid);
/* Whether the request the calling worker runs is a resend (survive=on:
 * read by a daemon that died; part of it may be done, e.g. in a backing
 * directory). */
bool vy_session_resent(void);
/* CLOCK_MONOTONIC of an adopted session's first answer, 0 before it or in
 * a session that mounted (.vyre/stats' takeover_ms). */
uint64_t vy_session_first_answer_ns(void);

/* The request's caller's fs uid and gid: the kernel's, or /proc/PID's
 * where the kernel sends -1 (FUSE_ALLOW_IDMAP: only requests that make an
 * inode name the caller); -1 where neither says. */
uid_t vy_session_caller_uid(fuse_req_t req);
gid_t vy_session_caller_gid(fuse_req_t req);

/* Whether the request's caller is in group `gid`: its fs gid or one of its
 * supplementary groups. */
bool vy_session_in_group(fuse_req_t req, gid_t gid);

/* Serve requests until unmount or a signal; 0, or a negative errno.
 * waiting >= 2: once requests come one at a time, at most that many idle
 * workers wait on the kernel; the others sleep, and the one that slept last
 * is woken first (session_loop.c). waiting = 0: libfuse's own loop, where
 * every idle worker always waits on the kernel. The kernel hands each
 * request to the worker that waited longest, so there, after a busy spell,
 * one-at-a-time requests rotate over up to 10 idle workers, each on a cold
 * core: on the H200 a control-file launch went 31 -> 52 µs and a 4 KiB read
 * at iodepth 1 22 -> 40 µs. libfuse's cap on idle workers (exiting them)
 * fixed that but cost 8 parallel readers 20% and 32 random reads in flight
 * 30%, in thread exits and starts (bench/run.sh measures both loops). */
int vy_session_loop(struct fuse_session *se, unsigned waiting);

/* Whether the loop ended because the kernel ended the connection (a read
 * of /dev/fuse said ENODEV: unmounted or aborted), not by a signal: then
 * there is no mount of ours left to release, whatever sits at its path
 * now (issue "posix 3"). */
bool vy_session_connection_gone(void);

/* fn runs once, after the first daemon's reply to the kernel's INIT is
 * written: from then on the mount answers (systemd's READY, notify.h). */
void vy_session_on_answering(void (*fn)(void));

/* Called by the reply hook (session.c) just before a reply goes out: the
 * worker sending it is about to wait again, so a worker that takes the next
 * request need not wake another for its place. */
void vy_session_replying(void);

/* The most workers either loop runs (libfuse's default). */
#define VY_SESSION_WORKERS 10

#endif
