/* The map server: an accepting thread, and a thread per connection that
 * answers HELLO, MAP, SYNC and UNMAP in order (proto/proto.h). A malformed
 * or unknown request gets an error reply and ends the connection; a client
 * that stalls in the middle of a message holds only its own thread. */
#include "fs/file.h"
#include "fs/mapsrv.h"
#include "core/grow.h"
#include "core/transfer.h"
#include "fs/copysrv.h"
#include "fs/log.h"
#include "fs/mountinfo.h"
#include "fs/readahead.h"
#include "fs/wbehind.h"
#include "proto/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#define CONNS_MAX 256 /* a thread each */
#define MAPS_MAX 1024 /* per connection */

typedef struct mapping {
	uint64_t id;
	vy_inode *in; /* held like an open file */
	vy_handle buf;
	uint64_t bytes;
} mapping;

typedef struct conn {
	struct vy_mapsrv *srv;
	int sock;
	pthread_t thread;
	bool done;
	mapping *maps;
	size_t nmaps, capmaps;
	uint64_t next_id;
	uint32_t minor; /* the client's protocol minor (HELLO) */
	struct conn *next;
} conn;

struct vy_mapsrv {
	vy_fs *fs;
	int listen_fd;
	pthread_t acceptor;
	pthread_mutex_t lock; /* conns, stopping */
	conn *conns;
	unsigned nconns;
	bool stopping;
	dev_t dev; /* the mount's device number */
	char name[64];
};

/* A reply, and after it `xlen` more bytes and `x`'s fds (a MAP's memory). */
static vy_err reply_with(conn *c, const vy_msg *m, const void *out, size_t len, const vy_export *x)
{
	vy_chan ch = {.sock = c->sock, .mb_fd = -1};
	const void *parts[2] = {out, x ? x->chunk : NULL};
	size_t lens[2] = {len, x ? x->n * sizeof(uint64_t) : 0};
	vy_error e;
	return vy_chan_send(&ch, m->h.opcode | VY_OP_REPLY, m->h.unique, parts, lens, x ? 2 : 1, x ? x->fd : NULL,
			    x ? x->n : 0, &e);
}

static vy_err reply(conn *c, const vy_msg *m, const void *out, size_t len)
{
	return reply_with(c, m, out, len, NULL);
}

static void status_of(vy_status *st, vy_err rc, const vy_error *e)
{
	st->rc = (int32_t)rc;
	st->step = -1;
	snprintf(st->msg, sizeof(st->msg), "%s", rc == VY_OK ? "" : e->msg);
}

static vy_err reply_status(conn *c, const vy_msg *m, vy_err rc, const vy_error *e)
{
	vy_status st;
	status_of(&st, rc, e);
	return reply(c, m, &st, sizeof(st));
}

/* The inode a client's fd names, held like an open file; or why not. The
 * fd must be open for writing (a mapping can write), or for reading when
 * `reading` (a copy out of the file). */
static vy_err inode_of_fd(vy_mapsrv *srv, int fd, bool reading, vy_inode **out, vy_error *e)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return vy_fail(e, VY_EINVAL, "pass an open file descriptor", "fstat of the passed fd: %s", strerror(errno));
	if (st.st_dev != srv->dev)
		return vy_fail(e, VY_EINVAL, "map a file in this vyrefs mount",
			       "the passed file is not on this mount (device %u:%u, the mount is %u:%u)",
			       major(st.st_dev), minor(st.st_dev), major(srv->dev), minor(srv->dev));
	int flags = fcntl(fd, F_GETFL);
	if (reading && (flags < 0 || (flags & O_ACCMODE) == O_WRONLY))
		return vy_fail(e, VY_EACCES, "open the file for reading", "the file was opened write-only");
	if (!reading && (flags < 0 || (flags & O_ACCMODE) == O_RDONLY))
		return vy_fail(e, VY_EACCES, "open the file for writing (O_RDWR): a mapping can write it",
			       "the file was opened read-only; device memory cannot be mapped read-only");
	vy_fs *fs = srv->fs;
	pthread_mutex_lock(&fs->ns);
	vy_inode *in = vy_u64map_get(&fs->inodes, (uint64_t)st.st_ino);
	vy_err rc = VY_OK;
	if (!in || in->kind != VY_FILE)
		rc = vy_fail(e, VY_EINVAL, "map a regular file", "inode %llu is not a regular file of this mount",
			     (unsigned long long)st.st_ino);
	else
		in->opens++;
	pthread_mutex_unlock(&fs->ns);
	*out = in;
	return rc;
}

static void let_go(vy_fs *fs, vy_inode *in)
{
	pthread_mutex_lock(&fs->ns);
	in->opens--;
	vy_inode_reap(fs, in);
	pthread_mutex_unlock(&fs->ns);
}

/* The kernel may cache pages of what the device holds now: drop them, so
 * cat shows what the client wrote. */
static void drop_cache(vy_mapsrv *srv, vy_inode *in)
{
	/* Readahead copies too: they may predate what the client wrote. */
	pthread_rwlock_rdlock(&in->lock);
	vy_readahead_forget(in);
	pthread_rwlock_unlock(&in->lock);
	pthread_mutex_lock(&srv->lock);
	bool stopping = srv->stopping;
	pthread_mutex_unlock(&srv->lock);
	if (!stopping && srv->fs->se)
		fuse_lowlevel_notify_inval_inode(srv->fs->se, in->ino, 0, 0);
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
	if (fd < 0 || m->len != sizeof(vy_client_map_in))
		rc = vy_fail(&e, VY_EINVAL, "pass the file's fd with the request (libvyrefs does)",
			     "a MAP request without a file descriptor");
	else if (c->nmaps >= MAPS_MAX)
		rc = vy_fail(&e, VY_EBUSY, "unmap files first", "one connection may map %d files", MAPS_MAX);
	if (rc == VY_OK)
		rc = inode_of_fd(c->srv, fd, false, &in, &e);
	if (fd >= 0)
		close(fd);
	vy_buffer_view v = {0};
	if (rc == VY_OK) {
		pthread_rwlock_wrlock(&in->lock);
		/* Every byte written so far on the device, no readahead copy
		 * left to go stale, and memory of its own. */
		if (!in->buf)
			rc = vy_fail(&e, VY_EINVAL, "give the file its size first, e.g. truncate -s 64M FILE",
				     "the file is empty: it has no device memory to map");
		int ord = vy_fs_core(fs, in)->dev->info.ordinal, first = fs->dev[0].core->dev->info.ordinal;
		if (rc == VY_OK && c->minor < 2 && ord != first)
			rc = vy_fail(&e, VY_EINVAL, "use libvyrefs 2.2 or newer (it maps each file on its own device)",
				     "the file is on device %d; a protocol 2.%u client would map it on device %d", ord,
				     c->minor, first);
		if (rc == VY_OK)
			rc = vy_file_share(fs, in, &e);
		/* Past the end of the file the memory may hold what a pooled
		 * buffer held before: another file's bytes. Zeros leave. */
		if (rc == VY_OK)
			rc = vy_clear_past(vy_fs_core(fs, in), in->buf, in->size, &e);
		if (rc == VY_OK)
			rc = vy_store_export(vy_fs_core(fs, in)->store, in->buf, true, &v, &x, &e);
		if (rc == VY_OK && !vy_grow((void **)&c->maps, &c->capmaps, c->nmaps, sizeof(*c->maps))) {
			vy_store_unexport(vy_fs_core(fs, in)->store, in->buf, NULL);
			vy_export_close(&x);
			rc = vy_fail(&e, VY_ENOMEM, "free host memory", "cannot record a mapping");
		}
		if (rc == VY_OK) {
			in->maps++;
			out.id = ++c->next_id;
			out.size = in->size;
			out.bytes = v.alloc;
			out.nchunks = x.n;
			out.ordinal = vy_fs_core(fs, in)->dev->info.ordinal;
			c->maps[c->nmaps++] = (mapping){.id = out.id, .in = in, .buf = in->buf, .bytes = v.alloc};
			vy_telemetry_add(&vy_fs_core(fs, in)->tel, maps, 1);
			vy_telemetry_add(&vy_fs_core(fs, in)->tel, mapped_bytes, v.alloc);
		}
		pthread_rwlock_unlock(&in->lock);
		if (rc != VY_OK)
			let_go(fs, in);
	}
	status_of(&out.st, rc, &e);
	vy_err sent = reply_with(c, m, &out, sizeof(out), rc == VY_OK ? &x : NULL);
	vy_export_close(&x); /* the client has its own now */
	return sent;
}

/* End mapping i of the connection. */
static void unmap_at(conn *c, size_t i)
{
	vy_fs *fs = c->srv->fs;
	mapping mp = c->maps[i];
	c->maps[i] = c->maps[--c->nmaps];
	pthread_rwlock_wrlock(&mp.in->lock);
	mp.in->maps--;
	/* A mapped file does not move: its device is the one it was mapped on. */
	vy_core *core = vy_fs_core(fs, mp.in);
	vy_store_unexport(core->store, mp.buf, NULL);
	pthread_rwlock_unlock(&mp.in->lock);
	vy_telemetry_add(&core->tel, mapped_bytes, (uint64_t)0 - mp.bytes);
	drop_cache(c->srv, mp.in);
	let_go(fs, mp.in);
}

static size_t find_map(conn *c, const vy_msg *m, bool *ok)
{
	vy_client_ref_in in;
	*ok = false;
	if (m->len != sizeof(in))
		return 0;
	memcpy(&in, m->body, sizeof(in));
	for (size_t i = 0; i < c->nmaps; i++)
		if (c->maps[i].id == in.id) {
			*ok = true;
			return i;
		}
	return 0;
}

static vy_err op_sync(conn *c, vy_msg *m)
{
	bool ok;
	size_t i = find_map(c, m, &ok);
	vy_error e;
	if (!ok)
		return reply_status(c, m, vy_fail(&e, VY_EINVAL, "name a mapping of this connection", "no such mapping"), &e);
	drop_cache(c->srv, c->maps[i].in);
	return reply_status(c, m, VY_OK, NULL);
}

static vy_err op_unmap(conn *c, vy_msg *m)
{
	bool ok;
	size_t i = find_map(c, m, &ok);
	vy_error e;
	if (!ok)
		return reply_status(c, m, vy_fail(&e, VY_EINVAL, "name a mapping of this connection", "no such mapping"), &e);
	unmap_at(c, i);
	return reply_status(c, m, VY_OK, NULL);
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
	/* Progress every 200 ms; a look for a client gone at every tick. */
	if (++x->ticks % 4 == 0 &&
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
	struct stat st;
	int flags = other >= 0 ? fcntl(other, F_GETFL) : -1;
	if (rc == VY_OK && (fstat(other, &st) != 0 || !S_ISREG(st.st_mode)))
		rc = vy_fail(&e, VY_EINVAL, "copy regular files", "the other file is not a regular file");
	else if (rc == VY_OK && st.st_dev == c->srv->dev)
		rc = vy_fail(&e, VY_EINVAL, "copy within the mount with cp (copy_file_range: device to device)",
			     "both files are on this mount");
	else if (rc == VY_OK && (flags < 0 || (flags & O_ACCMODE) == (into ? O_WRONLY : O_RDONLY)))
		rc = vy_fail(&e, VY_EACCES, into ? "open the source for reading" : "open the destination for writing",
			     "the other file's descriptor cannot be %s", into ? "read" : "written");
	if (rc == VY_OK)
		rc = inode_of_fd(c->srv, mine, !into, &ino, &e);
	if (mine >= 0)
		close(mine);
	if (rc == VY_OK) {
		copy_ctx ctx = {.c = c, .m = m};
		vy_copysrv_job job = {.in = ino, .other = other, .into = into, .size = in.size, .threads = in.threads,
				      .tick = copy_tick, .ctx = &ctx};
		rc = vy_copysrv_run(c->srv->fs, &job, &out.done, &out.total, &e);
		let_go(c->srv->fs, ino);
	}
	if (other >= 0)
		close(other);
	status_of(&out.st, rc, &e);
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
	status_of(&out.st, rc, &e);
	vy_err sent = reply(c, m, &out, sizeof(out));
	return rc != VY_OK ? rc : sent;
}

static void *serve_conn(void *arg)
{
	conn *c = arg;
	pthread_setname_np(pthread_self(), "vy-mapconn");
	/* A client's requests are a few bytes: a larger length is refused
	 * before anything is allocated for it. */
	vy_chan ch = {.sock = c->sock, .mb_fd = -1, .max_len = 4096};
	bool hello = false;
	for (;;) {
		vy_msg m;
		vy_error e;
		if (vy_chan_recv(&ch, -1, 0, &m, &e) != VY_OK)
			break; /* closed, or not our framing */
		vy_err rc;
		switch (hello ? m.h.opcode : (m.h.opcode == VY_OP_CLIENT_HELLO ? VY_OP_CLIENT_HELLO : 0)) {
		case VY_OP_CLIENT_HELLO:
			rc = hello ? VY_EINVAL : op_hello(c, &m);
			hello = rc == VY_OK;
			break;
		case VY_OP_CLIENT_MAP:
			rc = op_map(c, &m);
			break;
		case VY_OP_CLIENT_SYNC:
			rc = op_sync(c, &m);
			break;
		case VY_OP_CLIENT_UNMAP:
			rc = op_unmap(c, &m);
			break;
		case VY_OP_CLIENT_COPY:
			rc = op_copy(c, &m);
			break;
		default:
			rc = reply_status(c, &m,
					  vy_fail(&e, VY_EINVAL, "use libvyrefs (client/vyrefs.h)",
						  hello ? "unknown request %u" : "request %u before HELLO", m.h.opcode),
					  &e);
			rc = VY_EINVAL;
			break;
		}
		vy_msg_free(&m);
		if (rc != VY_OK)
			break;
	}
	while (c->nmaps)
		unmap_at(c, c->nmaps - 1);
	free(c->maps);
	c->maps = NULL;
	pthread_mutex_lock(&c->srv->lock);
	shutdown(c->sock, SHUT_RDWR);
	c->done = true;
	pthread_mutex_unlock(&c->srv->lock);
	return NULL;
}

/* Join and free connections that ended. Lock held. */
static void reap_conns(vy_mapsrv *srv, bool all)
{
	for (conn **p = &srv->conns; *p;) {
		conn *c = *p;
		if (!c->done && !all) {
			p = &c->next;
			continue;
		}
		*p = c->next;
		srv->nconns--;
		if (!c->done)
			shutdown(c->sock, SHUT_RDWR);
		pthread_mutex_unlock(&srv->lock);
		pthread_join(c->thread, NULL);
		pthread_mutex_lock(&srv->lock);
		close(c->sock);
		free(c);
	}
}

static void *accept_loop(void *arg)
{
	vy_mapsrv *srv = arg;
	pthread_setname_np(pthread_self(), "vy-mapsrv"); /* not a FUSE worker (tests count those) */
	for (;;) {
		int s = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);
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
		reap_conns(srv, false);
		conn *c = srv->nconns < CONNS_MAX ? calloc(1, sizeof(*c)) : NULL;
		if (c) {
			c->srv = srv;
			c->sock = s;
			if (pthread_create(&c->thread, NULL, serve_conn, c) == 0) {
				c->next = srv->conns;
				srv->conns = c;
				srv->nconns++;
			} else {
				free(c);
				c = NULL;
			}
		}
		if (!c) {
			vy_log(LOG_WARNING, "map server: refusing a connection (%u open, at most %d)", srv->nconns,
			       CONNS_MAX);
			close(s);
		}
		pthread_mutex_unlock(&srv->lock);
	}
}

vy_err vy_mapsrv_start(vy_fs *fs, const char *mountpoint, vy_error *e)
{
	vy_mapsrv *srv = calloc(1, sizeof(*srv));
	if (!srv || pthread_mutex_init(&srv->lock, NULL) != 0) {
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
	/* Abstract: no file to leave behind or to guard; a client proves
	 * itself with the fd it passes. */
	unsigned rnd = 0;
	int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (rfd >= 0) {
		if (read(rfd, &rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd))
			rnd = 0;
		close(rfd);
	}
	snprintf(srv->name, sizeof(srv->name), "vyrefs-%d-%08x", (int)getpid(), rnd);
	size_t n = strlen(srv->name);
	memcpy(addr.sun_path + 1, srv->name, n);
	srv->listen_fd = -1;
	if (rc == VY_OK) {
		srv->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (srv->listen_fd < 0 ||
		    bind(srv->listen_fd, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0 ||
		    listen(srv->listen_fd, 64) != 0)
			rc = vy_fail(e, VY_ENODEV, "check that unix sockets can be made here",
				     "cannot listen on @%s: %s", srv->name, strerror(errno));
	}
	if (rc == VY_OK && pthread_create(&srv->acceptor, NULL, accept_loop, srv) != 0)
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot start the map server's thread");
	if (rc != VY_OK) {
		if (srv->listen_fd >= 0)
			close(srv->listen_fd);
		pthread_mutex_destroy(&srv->lock);
		free(srv);
		return rc;
	}
	fs->mapsrv = srv;
	return VY_OK;
}

void vy_mapsrv_stop(vy_fs *fs)
{
	vy_mapsrv *srv = fs->mapsrv;
	if (!srv)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->stopping = true;
	shutdown(srv->listen_fd, SHUT_RDWR); /* wakes accept */
	pthread_mutex_unlock(&srv->lock);
	pthread_join(srv->acceptor, NULL);
	pthread_mutex_lock(&srv->lock);
	reap_conns(srv, true);
	pthread_mutex_unlock(&srv->lock);
	close(srv->listen_fd);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
	fs->mapsrv = NULL;
}

const char *vy_mapsrv_name(vy_fs *fs)
{
	return fs->mapsrv ? fs->mapsrv->name : NULL;
}
