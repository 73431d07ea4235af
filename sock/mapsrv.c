/* The map server: an accepting thread, and a thread per connection that
 * answers HELLO, MAP, SYNC, UNMAP and COPY in order (proto/proto.h). A
 * malformed or unknown request, a second HELLO or more fds than the
 * request takes gets an error reply and ends the connection; a client that
 * stalls in the middle of a message is cut off after MSG_MS, and one that
 * holds no mapping and says nothing for IDLE_MS is closed. Connections are
 * bounded per user and in all, with a reserve for root and the mounting
 * user; a connection that ends releases its thread and fd at once. */
#include "fs/file.h"
#include "fs/backed.h"
#include "sock/mapsrv_impl.h"
#include "persist/format.h"
#include "persist/replay_kernel.h"
#include "sock/clientfd.h"
#include "core/transfer.h"
#include "core/grow.h"
#include "sock/copysrv.h"
#include "daemon/log.h"
#include "daemon/mountinfo.h"
#include "fs/readahead.h"
#include "fs/wbehind.h"
#include "proto/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <dirent.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CONNS_MAX 256     /* a thread each */
#define CONNS_RESERVED 32 /* of them, for root and the mounting user only */
#define CONNS_PER_UID 64  /* any other user */
#define MAPS_MAX VY_P_MAPCONN_MAPS_MAX /* per connection (1024) */
#define MSG_MS 5000       /* a message that has begun ends within this */
#define IDLE_MS 60000     /* a connection with no mapping, silent this long, is closed */
#define FDS_RESERVE 256   /* fds kept free for FUSE work: no connection is taken into them */
#define REFUSAL_LOG_S 10  /* a refused connection is logged once in this many seconds */
#define STOP_WAIT_S 2     /* unmounting waits this long for connections to end */



static vy_err reply(conn *c, const vy_msg *m, const void *out, size_t len)
{
	return vy_mapconn_reply_with(c, m, out, len, NULL);
}

static vy_err op_map(conn *c, vy_msg *m)
{
	vy_fs *fs = c->srv->fs;
	vy_client_map_out out = {0};
	vy_error e;
	vy_err rc = VY_OK;
	int fd = vy_msg_take_fd(m, 0);
	vy_export x = {0};
	vy_inode *in = NULL;
	vy_client_map_in req = {0};
	if (m->len == sizeof(req))
		memcpy(&req, m->body, sizeof(req));
	bool readonly = req.flags & VY_CLIENT_MAP_READONLY;
	if (fd < 0 || m->len != sizeof(req))
		rc = vy_fail(&e, VY_EINVAL, "pass the file's fd with the request (libvyrefs does)",
			     "a MAP request without a file descriptor");
	else if (req.flags & ~VY_CLIENT_MAP_READONLY)
		rc = vy_fail(&e, VY_EINVAL, "use libvyrefs of this vyrefs version", "MAP flags %#x", req.flags);
	else if (c->nmaps >= MAPS_MAX)
		rc = vy_fail(&e, VY_EBUSY, "unmap files first", "one connection may map %d files", MAPS_MAX);
	else if (readonly && !c->srv->fs->dev[0].core->dev->share->export_fd_readonly)
		rc = vy_fail(&e, VY_ENOTSUP,
			     "copy the file into one of your own (vyrefs cp FILE MOUNT/yours, a copy on the device) and "
			     "map that, or ask its owner for write permission",
			     "the %s backend cannot map a file read-only: a program given the file's memory sets its own "
			     "access to it, so a reader would be handed write access",
			     c->srv->fs->dev[0].core->dev->info.backend);
	/* A mapping can read and write: the fd must have been opened so; a
	 * read-only one's, for reading. */
	if (rc == VY_OK)
		rc = vy_clientfd_mount_file(fs, c->srv->dev, fd, readonly ? VY_FD_READ : VY_FD_READ | VY_FD_WRITE, &in,
					    &e);
	if (fd >= 0)
		close(fd);
	vy_buffer_view v = {0};
	/* backing=DIR: a mapping reaches every byte: all of it loaded. */
	if (rc == VY_OK && in->tier) {
		rc = vy_backed_prepare(fs, in) ? vy_fail(&e, VY_EBUSY, "open the file again",
							 "the file is gone from the backing directory")
					       : vy_backed_load_room(fs, in, 0, in->size, &e);
		if (rc != VY_OK)
			vy_clientfd_let_go(fs, in);
	}
	if (rc == VY_OK) {
		pthread_rwlock_wrlock(&in->lock);
		rc = vy_backed_whole(fs, in, &e);
		/* Every byte written so far on the device, no readahead copy
		 * left to go stale, and memory of its own. */
		if (rc == VY_OK && !in->buf)
			rc = vy_fail(&e, VY_EINVAL, "give the file its size first, e.g. truncate -s 64M FILE",
				     "the file is empty: it has no device memory to map");
		int ord = vy_fs_core(fs, in)->dev->info.ordinal, first = fs->dev[0].core->dev->info.ordinal;
		if (rc == VY_OK && c->minor < 2 && ord != first)
			rc = vy_fail(&e, VY_EINVAL, "use libvyrefs 2.2 or newer (it maps each file on its own device)",
				     "the file is on device %d; a protocol 2.%u client would map it on device %d", ord,
				     c->minor, first);
		if (rc == VY_OK)
			rc = vy_file_share(fs, in, &e);
		if (rc == VY_OK && c->minor < 3 && in->lead)
			rc = vy_fail(&e, VY_EINVAL, "use libvyrefs 2.3 or newer (it maps a placed file at its byte 0)",
				     "the file's byte 0 is %u bytes into its memory (placed for its format); a protocol "
				     "2.%u client would map it %u bytes early",
				     in->lead, c->minor, in->lead);
		/* Past the end of the file the memory may hold what a pooled
		 * buffer held before: another file's bytes. Zeros leave. */
		if (rc == VY_OK)
			rc = vy_clear_past(vy_fs_core(fs, in), in->buf, in->size, &e);
		if (rc == VY_OK)
			rc = vy_store_export(vy_fs_core(fs, in)->store, in->buf,
					     VY_EXPORT_UNTRUSTED | (readonly ? VY_EXPORT_READONLY : 0), &v, &x, &e);
		if (rc == VY_OK && !vy_grow((void **)&c->maps, &c->capmaps, c->nmaps, sizeof(*c->maps))) {
			vy_store_unexport(vy_fs_core(fs, in)->store, in->buf, NULL);
			vy_export_close(&x);
			rc = vy_fail(&e, VY_ENOMEM, "free host memory", "cannot record a mapping");
		}
		/* survive=on: the connection's socket to the keeper, so the
		 * client's connection outlives this daemon with the mapping. */
		if (rc == VY_OK && !vy_mapconn_keep(c))
			vy_log(LOG_WARNING, "client socket: a mapping of inode %" PRIu64 " will not survive this daemon's "
					    "death (its connection could not be handed to the keeper)", in->ino);
		if (rc == VY_OK) {
			/* mapped_bytes is the memory mapped, however many
			 * mappings share it. */
			if (v.alloc > in->mapped_counted) {
				vy_telemetry_add(vy_fs_core(fs, in)->tel, mapped_bytes, v.alloc - in->mapped_counted);
				in->mapped_counted = v.alloc;
			}
			in->maps++;
			out.id = ++c->next_id;
			out.size = in->size;
			out.bytes = v.alloc;
			out.nchunks = x.n;
			out.ordinal = vy_fs_core(fs, in)->dev->info.ordinal;
			out.lead = v.lead;
			c->maps[c->nmaps++] =
				(mapping){.id = out.id, .in = in, .buf = in->buf, .bytes = v.alloc, .readonly = readonly};
			c->req.ref = out.id;
			c->req.readonly = readonly;
			vy_telemetry_add(vy_fs_core(fs, in)->tel, maps, 1);
		}
		pthread_rwlock_unlock(&in->lock);
		if (rc != VY_OK)
			vy_clientfd_let_go(fs, in);
	}
	vy_mapconn_status_of(&out.st, rc, &e);
	vy_err sent = vy_mapconn_reply_with(c, m, &out, c->minor < 3 ? VY_CLIENT_MAP_OUT_V22 : sizeof(out),
					    rc == VY_OK ? &x : NULL);
	vy_export_close(&x); /* the client has its own now */
	return sent;
}


static size_t find_map(conn *c, const vy_msg *m, bool *ok)
{
	vy_client_ref_in in;
	size_t i = 0;
	*ok = false;
	if (m->len != sizeof(in))
		return 0;
	memcpy(&in, m->body, sizeof(in));
	*ok = vy_mapconn_find(c, in.id, &i);
	return i;
}

/* SYNC (drop cached pages) or UNMAP of one mapping of this connection. */
static vy_err op_ref(conn *c, vy_msg *m, bool unmap)
{
	bool ok;
	size_t i = find_map(c, m, &ok);
	vy_error e;
	if (!ok)
		return vy_mapconn_reply_status(c, m, vy_fail(&e, VY_EINVAL, "name a mapping of this connection", "no such mapping"), &e);
	if (unmap)
		vy_mapconn_unmap_at(c, i);
	else
		vy_mapconn_drop_cache(c->srv, c->maps[i].in);
	return vy_mapconn_reply_status(c, m, VY_OK, NULL);
}

typedef struct copy_ctx {
	conn *c;
	const vy_msg *m;
	unsigned ticks;
} copy_ctx;

/* Progress to the client; true when it went away (the copy stops). */
static bool copy_tick(void *ctx, uint64_t done, uint64_t total)
{
	copy_ctx *x = ctx;
	vy_client_progress p = {.done = done, .total = total};
	vy_chan ch = {.sock = x->c->sock, .mb_fd = -1};
	const void *parts[1] = {&p};
	size_t lens[1] = {sizeof(p)};
	vy_error e;
	/* Unmounting: the copy stops, whatever its client does. */
	pthread_mutex_lock(&x->c->srv->lock);
	bool stopping = x->c->srv->stopping;
	pthread_mutex_unlock(&x->c->srv->lock);
	if (stopping)
		return true;
	/* Progress every 200 ms, when the socket has room: a client that
	 * reads none does not hold this thread in a send. A look for a client
	 * gone at every tick. */
	struct pollfd out = {.fd = x->c->sock, .events = POLLOUT};
	if (++x->ticks % 4 == 0 && poll(&out, 1, 0) > 0 && (out.revents & POLLOUT) &&
	    vy_chan_send(&ch, VY_OP_CLIENT_PROGRESS, x->m->h.unique, parts, lens, 1, NULL, 0, &e) != VY_OK)
		return true;
	struct pollfd pf = {.fd = x->c->sock, .events = POLLIN};
	char b;
	return poll(&pf, 1, 0) > 0 && ((pf.revents & (POLLHUP | POLLERR)) || recv(x->c->sock, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0);
}

static vy_err op_copy(conn *c, vy_msg *m)
{
	vy_client_copy_in in = {0};
	vy_client_copy_out out = {0};
	vy_error e;
	vy_err rc = VY_OK;
	int mine = vy_msg_take_fd(m, 0), other = vy_msg_take_fd(m, 1);
	vy_inode *ino = NULL;
	if (mine < 0 || other < 0 || m->len != sizeof(in))
		rc = vy_fail(&e, VY_EINVAL, "pass both files' fds with the request (libvyrefs does)",
			     "a COPY request without its two file descriptors");
	if (rc == VY_OK) {
		memcpy(&in, m->body, sizeof(in));
		if (in.direction > VY_COPY_OUT)
			rc = vy_fail(&e, VY_EINVAL, "use libvyrefs of this vyrefs version", "copy direction %u", in.direction);
	}
	bool into = in.direction == VY_COPY_INTO;
	/* Into the mount: the other file is read and the mount's written;
	 * out: the reverse. Each fd as its client opened it. The mount's file
	 * first: its refusals (EACCES, EPERM) stand before the other's EXDEV,
	 * on which the client copies the plain way. */
	if (rc == VY_OK)
		rc = vy_clientfd_mount_file(c->srv->fs, c->srv->dev, mine, into ? VY_FD_WRITE : VY_FD_READ, &ino, &e);
	if (rc == VY_OK)
		rc = vy_clientfd_other(other, c->srv->dev, into ? VY_FD_READ : VY_FD_WRITE, &e);
	if (mine >= 0)
		close(mine);
	/* Who the client is, from the kernel, as of now (a connection adopted
	 * across a takeover too): the copy writes as she would. */
	vy_clientcred cred;
	int err = rc == VY_OK ? vy_clientcred_of(c->sock, &cred) : 0;
	if (err)
		rc = vy_fail(&e, VY_EINVAL, "copy with cp instead (the daemon acts only as a client it can name)",
			     "cannot read the client's credentials: %s", strerror(err));
	if (rc == VY_OK && !into && c->fsize_err) {
		/* Not read when she connected: no limit is known, so no copy
		 * out (a child writing after its parent went would have none). */
		rc = vy_fail(&e, VY_EPERM, "copy from the process that connected, while it runs, or with cp",
			     "the file size limit of the process that connected (pid %d) could not be read when it "
			     "connected (%s): a copy out is refused", (int)cred.pid, strerror(c->fsize_err));
	}
	if (rc == VY_OK && !into) {
		/* Her RLIMIT_FSIZE, as her own write would meet it: taken when
		 * she connected. */
		pthread_rwlock_rdlock(&ino->lock);
		uint64_t size = ino->size;
		pthread_rwlock_unlock(&ino->lock);
		uint64_t limit = c->fsize;
		if (size > limit)
			rc = vy_fail(&e, VY_EOVERFLOW, "raise your file size limit (ulimit -f), or copy a smaller file",
				     "the copy would write %llu bytes; your file size limit is %llu",
				     (unsigned long long)size, (unsigned long long)limit);
	}
	if (rc != VY_OK && ino) {
		vy_clientfd_let_go(c->srv->fs, ino);
		ino = NULL;
	}
	if (rc == VY_OK) {
		copy_ctx ctx = {.c = c, .m = m};
		vy_copysrv_job job = {.in = ino, .other = other, .into = into, .size = in.size, .threads = in.threads,
				      .cred = &cred, .tick = copy_tick, .ctx = &ctx};
		other = -1; /* the copy's now */
		rc = vy_copysrv_run(c->srv->fs, &job, &out.done, &out.total, &e);
		vy_clientfd_let_go(c->srv->fs, ino);
	}
	vy_clientfd_close(other);
	vy_mapconn_status_of(&out.st, rc, &e);
	return reply(c, m, &out, sizeof(out));
}

static vy_err op_hello(conn *c, vy_msg *m)
{
	vy_fs *fs = c->srv->fs;
	vy_hello_in in;
	vy_client_hello_out out = {.major = VY_PROTO_MAJOR, .minor = VY_PROTO_MINOR};
	vy_error e;
	vy_err rc = VY_OK;
	if (m->len != sizeof(in)) {
		rc = vy_fail(&e, VY_EINVAL, "use libvyrefs of this vyrefs version", "a malformed HELLO");
	} else {
		memcpy(&in, m->body, sizeof(in));
		c->minor = in.minor;
		if (in.major != VY_PROTO_MAJOR)
			rc = vy_fail(&e, VY_EINVAL, "use libvyrefs of this vyrefs version",
				     "protocol %u.%u asked, this vyrefs speaks %u.%u", in.major, in.minor, VY_PROTO_MAJOR,
				     VY_PROTO_MINOR);
	}
	/* MAP says if it cannot share; COPY needs no sharing. Every device of
	 * a mount has one backend; MAP names each file's device. */
	const vy_device_info *d = &fs->dev[0].core->dev->info;
	out.backend = strcmp(d->backend, "cuda") ? VY_BACKEND_HOST : VY_BACKEND_CUDA;
	out.ordinal = d->ordinal;
	out.share_granularity = d->share_granularity;
	vy_mapconn_status_of(&out.st, rc, &e);
	vy_err sent = reply(c, m, &out, sizeof(out));
	return rc != VY_OK ? rc : sent;
}

/* The fds each request carries: MAP the file, COPY the two files. */
static unsigned fds_of(uint16_t opcode)
{
	return opcode == VY_OP_CLIENT_MAP ? 1 : opcode == VY_OP_CLIENT_COPY ? 2 : 0;
}

/* End a connection: its mappings, its socket and its record, at once. */
/* A connection's mappings ended, and its record and keeper slot with them. */
static void conn_unmap_all(conn *c)
{
	while (c->nmaps)
		vy_mapconn_unmap_at(c, c->nmaps - 1);
	vy_mapconn_forget(c);
	free(c->maps);
	c->maps = NULL;
}

static void conn_end(conn *c)
{
	conn_unmap_all(c);
	vy_mapsrv *srv = c->srv;
	pthread_mutex_lock(&srv->lock);
	for (conn **p = &srv->conns; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	srv->nconns--;
	/* Unread bytes at close would reset the connection under the
	 * client's reading of our last reply: drain a bounded amount. */
	shutdown(c->sock, SHUT_WR);
	char sink[4096];
	for (int i = 0; i < 16 && recv(c->sock, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	close(c->sock);
	free(c);
	pthread_cond_broadcast(&srv->gone);
	pthread_mutex_unlock(&srv->lock);
}

static void *serve_conn(void *arg)
{
	conn *c = arg;
	pthread_setname_np(pthread_self(), "vy-mapconn");
	/* A client's requests are a few bytes, with at most two fds: a larger
	 * length is refused before anything is allocated for it, and the
	 * kernel closes fds past two before they reach this process. */
	vy_chan ch = {.sock = c->sock, .mb_fd = -1, .max_len = 4096, .max_fds = 2, .msg_ms = MSG_MS, .peer = "a client"};
	bool hello = c->adopted; /* it said HELLO to the dead daemon */
	for (bool go = !c->adopted || vy_mapconn_resume(c); go;) {
		vy_msg m;
		vy_msg_header h;
		vy_error e;
		uint8_t body[VY_CHAN_PEEK_MAX];
		size_t got;
		/* Silent and holding nothing: a slot someone else may want. */
		if (vy_chan_peek(&ch, c->nmaps ? -1 : IDLE_MS, &h, body, sizeof(body), &got, &e) != VY_OK)
			break; /* closed, idle, or not our framing */
		/* The unique is kept with the request (vy_p_mapconn): one the
		 * state's loader would refuse (bit 63, or 0) ends the connection
		 * before anything is kept, as any framing error does (issue
		 * "survive 2": kept, it emptied the mount at the next takeover). */
		if (h.unique == 0 || (h.unique >> 63)) {
			vy_log(LOG_NOTICE, "client socket: uid %u sent request id %#" PRIx64 " (0 and bit 63 are not a "
					   "client's); its connection ends (Fix: use libvyrefs)",
			       (unsigned)c->uid, h.unique);
			break;
		}
		/* Seen, not yet taken: a kept connection says so first, so a
		 * successor that finds the socket empty knows it was taken. */
		vy_client_ref_in ref = {0};
		if ((h.opcode == VY_OP_CLIENT_SYNC || h.opcode == VY_OP_CLIENT_UNMAP) && got >= sizeof(ref))
			memcpy(&ref, body, sizeof(ref));
		c->req = (vy_mapconn_req){.unique = h.unique, .ref = ref.id, .opcode = h.opcode, .phase = 1};
		if (c->slot)
			vy_mapconn_record(c);
		if (vy_chan_take(&ch, &h, &m, &e) != VY_OK)
			break;
		vy_err rc;
		uint16_t op = m.h.opcode;
		if (m.nfds > fds_of(op)) {
			rc = vy_mapconn_reply_status(c, &m,
					  vy_fail(&e, VY_EINVAL, "use libvyrefs (client/vyrefs.h)",
						  "request %u carried %u file descriptors; it takes %u", op, m.nfds, fds_of(op)),
					  &e);
			rc = VY_EINVAL;
		} else if (!hello && op != VY_OP_CLIENT_HELLO) {
			rc = vy_mapconn_reply_status(c, &m,
					  vy_fail(&e, VY_EINVAL, "use libvyrefs (client/vyrefs.h)", "request %u before HELLO", op),
					  &e);
			rc = VY_EINVAL;
		} else {
			switch (op) {
			case VY_OP_CLIENT_HELLO:
				if (hello) {
					vy_mapconn_reply_status(c, &m, vy_fail(&e, VY_EINVAL, "say HELLO once a connection", "a second HELLO"),
						     &e);
					rc = VY_EINVAL;
				} else {
					rc = op_hello(c, &m);
					hello = rc == VY_OK;
				}
				break;
			case VY_OP_CLIENT_MAP:
				rc = op_map(c, &m);
				break;
			case VY_OP_CLIENT_SYNC:
				rc = op_ref(c, &m, false);
				break;
			case VY_OP_CLIENT_UNMAP:
				rc = op_ref(c, &m, true);
				break;
			case VY_OP_CLIENT_COPY:
				rc = op_copy(c, &m);
				break;
			default:
				vy_mapconn_reply_status(c, &m, vy_fail(&e, VY_EINVAL, "use libvyrefs (client/vyrefs.h)", "unknown request %u", op),
					     &e);
				rc = VY_EINVAL;
				break;
			}
		}
		vy_msg_free(&m);
		go = rc == VY_OK;
	}
	conn_end(c);
	return NULL;
}

bool vy_mapsrv_conn_start(vy_mapsrv *srv, conn *c)
{
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	c->srv = srv;
	c->next = srv->conns;
	srv->conns = c;
	srv->nconns++;
	bool ok = pthread_create(&c->thread, &attr, serve_conn, c) == 0;
	if (!ok) {
		srv->conns = c->next;
		srv->nconns--;
	}
	pthread_attr_destroy(&attr);
	return ok;
}

/* Connections of `uid` now. Lock held. */
static unsigned conns_of(vy_mapsrv *srv, uid_t uid)
{
	unsigned n = 0;
	for (conn *c = srv->conns; c; c = c->next)
		n += c->uid == uid;
	return n;
}

/* Whether `fds` more may be taken without eating into the reserve kept
 * for FUSE work: the lowest free fd says how full the table is. */
static bool fds_to_spare(int probe_from)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return true;
	int probe = fcntl(probe_from, F_DUPFD_CLOEXEC, 0);
	if (probe < 0)
		return false;
	close(probe);
	return (rlim_t)probe + FDS_RESERVE < rl.rlim_cur;
}

/* Why a connection from `uid` is refused now, or NULL. Lock held. */
static const char *refusal(vy_mapsrv *srv, int s, uid_t uid)
{
	bool trusted = uid == 0 || uid == getuid();
	if (!fds_to_spare(s))
		return "no file descriptor to spare";
	if (srv->nconns >= CONNS_MAX)
		return "every connection slot is taken";
	if (!trusted && srv->nconns >= CONNS_MAX - CONNS_RESERVED)
		return "the slots left are kept for root and the mounting user";
	if (!trusted && conns_of(srv, uid) >= CONNS_PER_UID)
		return "this user has the most connections one user may have";
	return NULL;
}

/* Log refusals once in REFUSAL_LOG_S, with how many there were. Lock held. */
static void log_refusal(vy_mapsrv *srv, uid_t uid, const char *why)
{
	srv->refused++;
	time_t now = time(NULL);
	if (srv->refusal_logged && now - srv->refusal_logged < REFUSAL_LOG_S)
		return;
	vy_log(LOG_WARNING, "client socket: refused %u connection(s) in %d s, the last from uid %u: %s (%u open, at most %d)",
	       srv->refused, REFUSAL_LOG_S, (unsigned)uid, why, srv->nconns, CONNS_MAX);
	srv->refused = 0;
	srv->refusal_logged = now;
}

static void *accept_loop(void *arg)
{
	vy_mapsrv *srv = arg;
	pthread_setname_np(pthread_self(), "vy-mapsrv"); /* not a FUSE worker (tests count those) */
	for (;;) {
		int s = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		/* Now, while the process that connected is likely there. */
		uint64_t fsize = UINT64_MAX;
		int fsize_err = s >= 0 ? vy_clientcred_fsize_of_peer(s, &fsize) : 0;
		pthread_mutex_lock(&srv->lock);
		if (srv->stopping) {
			pthread_mutex_unlock(&srv->lock);
			if (s >= 0)
				close(s);
			return NULL;
		}
		if (s < 0) {
			pthread_mutex_unlock(&srv->lock);
			if (errno != EINTR && errno != ECONNABORTED && errno != EMFILE && errno != ENFILE)
				return NULL;
			if (errno == EMFILE || errno == ENFILE)
				usleep(10000);
			continue;
		}
		struct ucred cred;
		socklen_t len = sizeof(cred);
		const char *why = getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ? "its credentials are unknown"
											     : refusal(srv, s, cred.uid);
		conn *c = why ? NULL : calloc(1, sizeof(*c));
		if (c) {
			*c = (conn){.srv = srv, .sock = s, .uid = cred.uid, .fsize = fsize, .fsize_err = fsize_err};
			if (!vy_mapsrv_conn_start(srv, c)) {
				free(c);
				c = NULL;
				why = "no thread could be started for it";
			}
		}
		if (!c) {
			vy_telemetry_add(srv->fs->dev[0].core->tel, client_refusals, 1);
			log_refusal(srv, why ? cred.uid : 0, why ? why : "no memory for it");
			close(s);
		}
		pthread_mutex_unlock(&srv->lock);
	}
}

/* Where the socket lives. A root daemon: /run/vyrefs/, which only root
 * may write, so no one can put a socket of theirs at a name a client is
 * told; without allow_other only the mounting user may connect (0600), as
 * only they may use the mount. A user's daemon: $XDG_RUNTIME_DIR/vyrefs/
 * when the mount is theirs alone. Else an abstract socket (every user can
 * reach it; clients check who answers, by SO_PEERCRED). */
static bool socket_path(vy_mapsrv *srv, struct sockaddr_un *addr, const char *leaf, char *dir)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (getuid() == 0)
		snprintf(dir, PATH_MAX, "/run/vyrefs");
	else if (xdg && xdg[0] == '/' && !srv->fs->cfg.allow_other)
		snprintf(dir, PATH_MAX, "%s/vyrefs", xdg);
	else
		return false;
	struct stat st;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return false;
	/* Ours, and writable by us alone: no one else chose what is in it. */
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022))
		return false;
	int n = snprintf(addr->sun_path, sizeof(addr->sun_path), "%s/%s.sock", dir, leaf);
	return n > 0 && (size_t)n < sizeof(addr->sun_path);
}

/* The sockets a dead daemon of this mount left in `dir`: every one named
 * for this mount's keeper (`prefix`) but ours. A successor removes them,
 * so the unmount, which removes its own, leaves none (issue "edges", 4).
 * A keeper's pid is no other live keeper's: a name with it is this
 * mount's, or a crashed mount's of long ago. */
static void sweep_predecessors(const char *dir, const char *prefix, const char *mine)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	struct dirent *de;
	struct stat st;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix)) && strcmp(de->d_name, mine) &&
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode) &&
		    unlinkat(dfd, de->d_name, 0) != 0)
			vy_log(LOG_WARNING, "client socket: cannot remove %s/%s, a dead daemon's: %s", dir, de->d_name,
			       strerror(errno));
	closedir(d);
}

vy_err vy_mapsrv_start(vy_fs *fs, const char *mountpoint, vy_error *e)
{
	vy_mapsrv *srv = calloc(1, sizeof(*srv));
	if (!srv || pthread_mutex_init(&srv->lock, NULL) != 0 || pthread_cond_init(&srv->gone, NULL) != 0) {
		free(srv);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the map server");
	}
	srv->fs = fs;
	vy_err rc = VY_OK;
	/* The mount's device number (asking the kernel for the mountpoint's
	 * attributes would send a request to ourselves). */
	if (!vy_mountinfo_find(mountpoint, "fuse", &srv->dev))
		rc = vy_fail(e, VY_ENODEV, "report this bug", "the mount on %s is not in /proc/self/mountinfo", mountpoint);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	unsigned rnd = 0;
	int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (rfd >= 0) {
		if (read(rfd, &rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd))
			rnd = 0;
		close(rfd);
	}
	/* Under survive=on, named for the keeper too: a successor finds the
	 * names its predecessors bound (sweep_predecessors). */
	char leaf[64], prefix[32] = "", dir[PATH_MAX];
	int keeper = atomic_load(&fs->keeper_pid);
	if (keeper > 0)
		snprintf(prefix, sizeof(prefix), "vyrefs-k%d-", keeper);
	snprintf(leaf, sizeof(leaf), "%s%d-%08x", keeper > 0 ? prefix : "vyrefs-", (int)getpid(), rnd);
	socklen_t alen;
	srv->on_disk = socket_path(srv, &addr, leaf, dir);
	if (srv->on_disk) {
		snprintf(srv->name, sizeof(srv->name), "%s", addr.sun_path);
		unlink(addr.sun_path); /* a socket of a daemon of this pid that died */
		alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(addr.sun_path) + 1);
	} else {
		snprintf(srv->name, sizeof(srv->name), "@%s", leaf);
		memcpy(addr.sun_path + 1, leaf, strlen(leaf));
		alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(leaf));
	}
	srv->listen_fd = -1;
	if (rc == VY_OK) {
		srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (srv->listen_fd < 0 || bind(srv->listen_fd, (struct sockaddr *)&addr, alen) != 0 ||
		    (srv->on_disk && chmod(addr.sun_path, fs->cfg.allow_other ? 0666 : 0600) != 0) ||
		    listen(srv->listen_fd, 64) != 0)
			rc = vy_fail(e, VY_ENODEV, "check that unix sockets can be made here", "cannot listen on %s: %s",
				     srv->name, strerror(errno));
	}
	if (rc == VY_OK && srv->on_disk && prefix[0]) {
		char mine[80];
		snprintf(mine, sizeof(mine), "%s.sock", leaf);
		sweep_predecessors(dir, prefix, mine);
	}
	if (rc == VY_OK && pthread_create(&srv->acceptor, NULL, accept_loop, srv) != 0)
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot start the map server's thread");
	if (rc != VY_OK) {
		if (srv->listen_fd >= 0)
			close(srv->listen_fd);
		if (srv->on_disk)
			unlink(srv->name);
		pthread_cond_destroy(&srv->gone);
		pthread_mutex_destroy(&srv->lock);
		free(srv);
		return rc;
	}
	fs->mapsrv = srv;
	return VY_OK;
}

bool vy_mapsrv_stop(vy_fs *fs)
{
	vy_mapsrv *srv = fs->mapsrv;
	if (!srv)
		return vy_copysrv_quiet(fs, 0);
	pthread_mutex_lock(&srv->lock);
	srv->stopping = true;
	shutdown(srv->listen_fd, SHUT_RDWR); /* wakes accept */
	pthread_mutex_unlock(&srv->lock);
	pthread_join(srv->acceptor, NULL);
	/* Every connection's thread sees its socket end and ends it; a copy
	 * stops at its next tick, without waiting on its client's fd. */
	pthread_mutex_lock(&srv->lock);
	for (conn *c = srv->conns; c; c = c->next)
		shutdown(c->sock, SHUT_RDWR);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += STOP_WAIT_S;
	while (srv->conns && pthread_cond_timedwait(&srv->gone, &srv->lock, &until) != ETIMEDOUT)
		;
	bool stuck = srv->conns != NULL;
	pthread_mutex_unlock(&srv->lock);
	fs->mapsrv = NULL;
	if (stuck) {
		/* A connection's thread is stuck in a client's fd (fstatfs of
		 * a filesystem that does not answer): its record stays, and
		 * the process exits without teardown. */
		vy_log(LOG_WARNING, "client socket: a connection is stuck in its client's file; not waiting for it");
		if (srv->on_disk)
			unlink(srv->name);
		return false;
	}
	close(srv->listen_fd);
	if (srv->on_disk)
		unlink(srv->name);
	pthread_cond_destroy(&srv->gone);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
	return vy_copysrv_quiet(fs, 1000);
}

void vy_mapsrv_adopt(vy_fs *fs, vy_kept_conns *kc)
{
	vy_mapsrv *srv = fs->mapsrv;
	if (srv) {
		pthread_mutex_lock(&srv->lock);
		srv->adopting = true;
		srv->adopter = pthread_self();
		pthread_mutex_unlock(&srv->lock);
	}
	for (size_t i = 0; i < kc->n; i++) {
		conn *c = vy_mapconn_take_back(fs, srv, &kc->c[i]);
		if (!c)
			continue;
		pthread_mutex_lock(&srv->lock);
		bool started = vy_mapsrv_conn_start(srv, c);
		pthread_mutex_unlock(&srv->lock);
		if (started)
			continue;
		vy_log(LOG_WARNING, "takeover: client connection %u: no thread to serve it; its mappings end", c->slot);
		conn_unmap_all(c);
		close(c->sock);
		free(c);
	}
	if (srv) {
		pthread_mutex_lock(&srv->lock);
		srv->adopting = false;
		pthread_mutex_unlock(&srv->lock);
	}
}

const char *vy_mapsrv_name(vy_fs *fs)
{
	return fs->mapsrv ? fs->mapsrv->name : NULL;
}

dev_t vy_mapsrv_dev(vy_fs *fs)
{
	return fs->mapsrv ? fs->mapsrv->dev : 0;
}
