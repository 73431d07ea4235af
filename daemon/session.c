/* The FUSE connection settings and request loop vyrefs and bench/nullfs
 * share (see session.h). */
#include "daemon/session.h"
#include "daemon/adopt_io.h"
#include "daemon/log.h"
#include "state/state.h"
#include "fs/statx.h"
#include "ns/setid.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

void vy_session_conn(struct fuse_conn_info *conn, size_t max_write)
{
	conn->max_write = (unsigned)max_write;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

/* FUSE_HANDLE_KILLPRIV_V2. Without it the kernel asks for the
 * security.capability xattr before every write (a second round trip per
 * write, measured: 100 writes, 100 GETXATTR). With it the kernel marks
 * inodes without suid/sgid S_NOSEC and asks nothing; the filesystem clears
 * suid/sgid itself (vy_session_kill_suid). libfuse 3.14 cannot ask for it,
 * so the INIT reply gets the flag on its way out, when the kernel offered
 * it. One session per process. */
static _Atomic uint64_t init_unique;
static atomic_bool init_offered, init_pending;

/* FUSE_ALLOW_IDMAP (Linux 6.12): the kernel takes idmapped mounts of the
 * filesystem (containers with user namespaces make them), and from then on
 * names the caller only in requests that make an inode; every other one
 * carries uid and gid -1, on every mount of it. What vyrefs decides by the
 * caller it then takes from the kernel's own word (the kill-suid flags of
 * KILLPRIV_V2) or from /proc/PID (vy_session_caller). Asked for in the
 * INIT reply, as KILLPRIV_V2 is, when the kernel offers both. */
#ifndef FUSE_ALLOW_IDMAP
#define FUSE_ALLOW_IDMAP (1ULL << 40)
#endif
#ifndef FUSE_WRITE_KILL_SUIDGID
#define FUSE_WRITE_KILL_SUIDGID (1 << 2)
#endif
#ifndef FATTR_KILL_SUIDGID
#define FATTR_KILL_SUIDGID (1 << 11)
#endif
static atomic_bool idmap_offered;

/* The kernel's word on the request this worker runs (a worker reads a
 * request and runs it before it reads the next): for a write, or a
 * truncate, whether the caller lacks CAP_FSETID (its set-id bits go).
 * Unknown (-1) for anything else, and in threads that are not workers. */
static __thread int kernel_kills = -1;

/* The request this thread runs is a resend (survive=on: the dead daemon
 * had read it, and may have done part of it). */
static __thread bool resent_now;

bool vy_session_resent(void)
{
	return resent_now;
}

static void note_kill_flags(const struct fuse_in_header *in, ssize_t n)
{
	kernel_kills = -1;
	if (!atomic_load(&init_offered) || n < (ssize_t)sizeof(*in))
		return;
	const void *arg = in + 1;
	size_t len = (size_t)n - sizeof(*in);
	if (in->opcode == FUSE_WRITE && len >= sizeof(struct fuse_write_in)) {
		const struct fuse_write_in *w = arg;
		kernel_kills = (w->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
	} else if (in->opcode == FUSE_SETATTR && len >= sizeof(struct fuse_setattr_in)) {
		const struct fuse_setattr_in *a = arg;
		if (a->valid & FATTR_SIZE)
			kernel_kills = (a->valid & FATTR_KILL_SUIDGID) != 0;
	}
}
#ifndef FUSE_HAS_RESEND
#define FUSE_HAS_RESEND (1ULL << 39) /* Linux 6.9, protocol 7.40 */
#endif

/* survive=on: a kernel without FUSE_NOTIFY_RESEND cannot hand a successor
 * the requests the dead daemon had read; their programs would wait until
 * the mount ends. Said once, at the first daemon's INIT. */
static void check_resend(const struct fuse_init_in *arg)
{
	uint64_t flags = arg->flags;
	if (arg->flags & FUSE_INIT_EXT)
		flags |= (uint64_t)arg->flags2 << 32;
	if (!(flags & FUSE_HAS_RESEND))
		vy_log(LOG_WARNING, "survive=on: this kernel (FUSE %u.%u) cannot resend the requests a dead daemon had read; "
				    "a program caught in one at a death waits until the mount ends (Fix: Linux 6.9 or later)",
		       arg->major, arg->minor);
}

/* survive=on: where the first daemon keeps the INIT exchange (state/),
 * and the kernel's request until its reply goes with it. */
static struct vy_state *record;
static uint8_t init_req[VY_STATE_INIT_MAX];
static uint32_t init_req_len;

void vy_session_record_init(struct vy_state *st)
{
	record = st;
}

static const vy_session_hooks *hooks;

/* Requests read and not yet answered, and a quiesce waiting for none
 * (vy_session_quiesce). */
static _Atomic long inflight;
static atomic_bool stopping;
static pthread_mutex_t quiet_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t quiet_cond = PTHREAD_COND_INITIALIZER;

/* Requests the kernel expects no reply to (and INIT, whose reply an
 * adopted session swallows). */
static bool gets_reply(uint32_t opcode)
{
	return opcode != FUSE_FORGET && opcode != FUSE_BATCH_FORGET && opcode != FUSE_INTERRUPT &&
	       opcode != FUSE_NOTIFY_REPLY && opcode != FUSE_INIT;
}

/* A worker of a quiesced session reads nothing more. */
static void park_if_stopping(void)
{
	if (!atomic_load(&stopping))
		return;
	pthread_mutex_lock(&quiet_lock);
	for (;;)
		pthread_cond_wait(&quiet_cond, &quiet_lock); /* the process exits under it */
}

long vy_session_quiesce(unsigned ms)
{
	struct timespec until;
	if (clock_gettime(CLOCK_REALTIME, &until) != 0)
		return atomic_load(&inflight);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&quiet_lock);
	atomic_store(&stopping, true);
	while (atomic_load(&inflight) > 0 && pthread_cond_timedwait(&quiet_cond, &quiet_lock, &until) == 0)
		;
	long left = atomic_load(&inflight);
	pthread_mutex_unlock(&quiet_lock);
	return left;
}

static void answered_one(void)
{
	if (atomic_fetch_sub(&inflight, 1) == 1 && atomic_load(&stopping)) {
		pthread_mutex_lock(&quiet_lock);
		pthread_cond_broadcast(&quiet_cond);
		pthread_mutex_unlock(&quiet_lock);
	}
}

void vy_session_hook(const vy_session_hooks *h)
{
	hooks = h;
}


/* A resent request the dead daemon had answered (its reply kept with its
 * changes): the kept reply goes to the kernel under the resent unique,
 * and the request is not run again. */
static bool answered_again(int fd, const struct fuse_in_header *in, ssize_t n)
{
	if (!hooks || n < (ssize_t)sizeof(*in) || !(in->unique & FUSE_UNIQUE_RESEND))
		return false;
	uint8_t reply[1024];
	size_t got = hooks->resent(in->unique & ~FUSE_UNIQUE_RESEND, reply, sizeof(reply));
	struct fuse_out_header oh;
	if (got < sizeof(oh))
		return false;
	memcpy(&oh, reply, sizeof(oh));
	oh.unique = in->unique; /* the kernel finds the request by it, bit 63 included */
	oh.len = (uint32_t)got;
	memcpy(reply, &oh, sizeof(oh));
	ssize_t w;
	do
		w = write(fd, reply, got);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)got) /* ENOENT: the caller is gone (interrupted); nothing waits */
		vy_log(LOG_NOTICE, "takeover: the kept answer to resent request %llu did not reach the kernel: %s",
		       (unsigned long long)(in->unique & ~FUSE_UNIQUE_RESEND), w < 0 ? strerror(errno) : "short write");
	vy_adopt_io_reply();
	return true;
}

/* survive=on: the kernel copies a request into the reader's buffer
 * through get_user_pages, which fails for a page not yet present once a
 * SIGKILL is pending; the kernel then ends that request with EIO rather
 * than keep it for the successor's resend (a new worker's first write
 * across a kill: fio saw EIO in 1 run of 8). So each reader's buffer is
 * made present before its first read; libfuse reuses it for every read. */
static void buffer_present(void *buf, size_t len)
{
	static __thread void *done;
	static __thread size_t done_len;
	if (buf == done && len <= done_len)
		return;
	memset(buf, 0, len);
	done = buf;
	done_len = len;
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	(void)userdata;
	ssize_t n;
	park_if_stopping();
	if (hooks)
		buffer_present(buf, len);
	do
		n = vy_adopt_io_read(fd, buf, len);
	while (answered_again(fd, buf, n));
	const struct fuse_in_header *in = buf;
	if (n >= (ssize_t)sizeof(*in) && gets_reply(in->opcode))
		atomic_fetch_add(&inflight, 1);
	if (n >= (ssize_t)sizeof(*in) && in->opcode == FUSE_TMPFILE) {
		/* O_TMPFILE: libfuse 3.14 has no operation for it and would
		 * answer ENOSYS. Its body is CREATE's (fuse_create_in, then the
		 * name, which is "/": no real create can name that), and so is
		 * the reply's; the create operation makes an unnamed inode for
		 * that name (vy_session_tmpfile_name). */
		((struct fuse_in_header *)buf)->opcode = FUSE_CREATE;
	}
	vy_statx_request(buf, n); /* FUSE_STATX: a GETATTR whose reply gets btime (statx.h) */
	note_kill_flags(in, n);
	resent_now = n >= (ssize_t)sizeof(*in) && (in->unique & FUSE_UNIQUE_RESEND);
	if (hooks && n >= (ssize_t)sizeof(*in))
		hooks->read(in);
	if (n >= (ssize_t)(sizeof(*in) + sizeof(struct fuse_init_in)) && in->opcode == FUSE_INIT) {
		const struct fuse_init_in *arg = (const void *)(in + 1);
		atomic_store(&init_offered, (arg->flags & FUSE_HANDLE_KILLPRIV_V2) != 0);
		atomic_store(&idmap_offered, (arg->flags & FUSE_HANDLE_KILLPRIV_V2) && (arg->flags & FUSE_INIT_EXT) &&
						     n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags2) +
								     sizeof(uint32_t)) &&
						     (arg->flags2 & (uint32_t)(FUSE_ALLOW_IDMAP >> 32)));
		atomic_store(&init_unique, in->unique);
		atomic_store(&init_pending, true);
		if (record && !vy_adopt_active() && (size_t)n <= sizeof(init_req)) {
			check_resend(arg);
			memcpy(init_req, buf, (size_t)n);
			init_req_len = (uint32_t)n; /* read before its reply is written: one thread */
		}
	}
	return n;
}

/* The first daemon's INIT exchange, the reply as the kernel gets it, into
 * the region. */
static void keep_init_reply(const struct iovec *iov, int count)
{
	uint8_t out[VY_STATE_INIT_MAX];
	size_t got = 0;
	for (int i = 1; i < count; i++) {
		if (iov[i].iov_len > sizeof(out) - got)
			return; /* larger than any INIT reply: not kept, a successor refuses */
		memcpy(out + got, iov[i].iov_base, iov[i].iov_len);
		got += iov[i].iov_len;
	}
	vy_error e;
	if (init_req_len && vy_state_set_init(record, init_req, init_req_len, out, (uint32_t)got, &e) != VY_OK)
		vy_log(LOG_ERR, "cannot keep the INIT exchange for a successor: %s", e.msg);
}

static void (*on_answering)(void);

void vy_session_on_answering(void (*fn)(void))
{
	on_answering = fn;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	const struct fuse_out_header *out = iov[0].iov_base;
	bool init = false;
	if (atomic_load(&init_pending) && iov[0].iov_len >= sizeof(*out) && out->unique == atomic_load(&init_unique)) {
		atomic_store(&init_pending, false);
		init = true;
		if (atomic_load(&init_offered) && count >= 2 && out->error == 0 &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
			struct fuse_init_out *arg = iov[1].iov_base;
			arg->flags |= FUSE_HANDLE_KILLPRIV_V2;
			/* vyrefs always mounts with default_permissions, which the
			 * kernel requires of an idmapped mount. */
			if (atomic_load(&idmap_offered) && (arg->flags & FUSE_INIT_EXT) &&
			    iov[1].iov_len >= offsetof(struct fuse_init_out, flags2) + sizeof(uint32_t))
				arg->flags2 |= (uint32_t)(FUSE_ALLOW_IDMAP >> 32);
		}
		if (vy_adopt_active()) /* our replay of the kernel's INIT: the kernel never asked */
			return vy_adopt_init_reply(iov, count);
		if (record)
			keep_init_reply(iov, count);
	}
	/* Not a notification (unique 0); INIT's is not counted. */
	bool reply = iov[0].iov_len >= sizeof(*out) && out->unique != 0;
	if (reply) {
		vy_session_replying();
		vy_adopt_io_reply();
		if (hooks)
			hooks->reply(out->unique, iov, count);
	}
	uint64_t unique = reply ? out->unique : 0;
	ssize_t res;
	if (!vy_statx_reply(fd, iov, count, &res))
		res = writev(fd, iov, count);
	if (reply && hooks)
		hooks->sent(unique);
	if (reply && !init)
		answered_one();
	if (init && res >= 0 && on_answering)
		on_answering(); /* the INIT reply is the kernel's: the mount answers */
	return res;
}

static const struct fuse_custom_io session_io = {.read = io_read, .writev = io_writev};

int vy_session_mount(struct fuse_session *se, const char *mountpoint)
{
	if (fuse_session_mount(se, mountpoint) != 0)
		return -1;
	if (fuse_session_custom_io(se, &session_io, fuse_session_fd(se)) != 0) {
		fuse_session_unmount(se);
		return -1;
	}
	return 0;
}

int vy_session_adopt(struct fuse_session *se, int fuse_fd, const void *init_req, size_t init_req_len,
		     const void *init_reply, size_t init_reply_len)
{
	if (vy_adopt_io_start(init_req, init_req_len, init_reply, init_reply_len) != 0 ||
	    fuse_session_custom_io(se, &session_io, fuse_fd) != 0)
		return -1;
	/* The replayed INIT now, before anything serves: libfuse then knows
	 * the protocol, so the map server's adopted clients are never
	 * answered before it can notify (a vy_sync drops the kernel's pages
	 * by notification; before INIT libfuse sends none, and the pages
	 * stayed stale: issue "survive 2", item 8a). */
	struct fuse_buf buf = {0};
	int n = fuse_session_receive_buf(se, &buf);
	if (n > 0)
		fuse_session_process_buf(se, &buf);
	free(buf.mem);
	return n > 0 ? 0 : -1;
}

uint64_t vy_session_first_answer_ns(void)
{
	return vy_adopt_first_answer_ns();
}

/* One id of the caller's from /proc/PID/status: the fs id (the fourth) of
 * the line `key` ("Uid:" or "Gid:"); -1 where it cannot be read (a caller
 * gone, or in a pid namespace the kernel sends as pid 0). The caller waits
 * in its system call meanwhile, so its pid is its own. */
static uint32_t proc_fs_id(pid_t pid, const char *key)
{
	if (pid <= 0)
		return (uint32_t)-1;
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return (uint32_t)-1;
	unsigned long r, e, sv, fs;
	uint32_t id = (uint32_t)-1;
	size_t klen = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen)) {
			if (sscanf(line + klen, "%lu %lu %lu %lu", &r, &e, &sv, &fs) == 4 && fs < UINT32_MAX)
				id = (uint32_t)fs;
			break;
		}
	fclose(f);
	return id;
}

uid_t vy_session_caller_uid(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	return c->uid != (uid_t)-1 ? c->uid : (uid_t)proc_fs_id(c->pid, "Uid:");
}

gid_t vy_session_caller_gid(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	return c->gid != (gid_t)-1 ? c->gid : (gid_t)proc_fs_id(c->pid, "Gid:");
}

/* Whether the request's caller is in group `gid`: its fs gid or one of its
 * supplementary groups (read from /proc; unread, the fs gid alone). */
static bool caller_in_group(fuse_req_t req, gid_t gid)
{
	if (gid != (gid_t)-1 && vy_session_caller_gid(req) == gid)
		return true;
	gid_t small[64], *list = small;
	int n = fuse_req_getgroups(req, 64, small);
	if (n > 64) {
		list = malloc((size_t)n * sizeof(*list));
		int m = list ? fuse_req_getgroups(req, n, list) : -ENOMEM;
		n = m < n ? m : n;
	}
	bool in = false;
	for (int i = 0; i < n && !in; i++)
		in = list[i] == gid;
	if (list != small)
		free(list);
	return in;
}

bool vy_session_in_group(fuse_req_t req, gid_t gid)
{
	return caller_in_group(req, gid);
}

bool vy_session_may_write(fuse_req_t req, mode_t mode, uid_t uid, gid_t gid)
{
	uid_t caller = vy_session_caller_uid(req);
	if (caller == 0)
		return true;
	if (caller == uid && caller != (uid_t)-1)
		return mode & S_IWUSR;
	if (caller_in_group(req, gid))
		return mode & S_IWGRP;
	return mode & S_IWOTH;
}

typedef struct group_ask {
	fuse_req_t req;
	gid_t gid;
} group_ask;

static bool ask_group(void *ctx)
{
	const group_ask *a = ctx;
	return caller_in_group(a->req, a->gid);
}

mode_t vy_session_kill_suid(fuse_req_t req, mode_t mode, gid_t gid, bool chown)
{
	/* The kernel says whether a writer lacks CAP_FSETID (KILLPRIV_V2);
	 * elsewhere uid 0 stands in for it. The groups are read only if the
	 * rule needs them. */
	group_ask a = {.req = req, .gid = gid};
	bool privileged = !chown && kernel_kills >= 0 ? !kernel_kills : vy_session_caller_uid(req) == 0;
	return vy_mode_kill_suid(mode, privileged, chown, ask_group, &a);
}
