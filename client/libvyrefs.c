/* libvyrefs: the client side of the map server (fs/mapsrv.c). It reuses
 * the core's device backends (core/device_*.c) to import memory, and the
 * channel (proto/channel.c) to talk to the daemon; everything but the
 * functions of vyrefs.h is hidden in the shared library. */
#include "client/vyrefs.h"
#include "client/mapping.h"
#include "core/span.h"
#include "core/device.h"
#include "proto/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))

struct vy_mapping {
	int sock;
	uint64_t id, size;
	vy_span span; /* the file's memory, its allocations back to back */
	vy_device *dev;
	int ordinal; /* -1: host */
};

static _Thread_local char last_error[VY_ERROR_MSG_MAX + 128];

/* One device per backend and ordinal, opened on first use and kept: a
 * context is costly, and mappings share it. */
static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static vy_device *host_dev, *cuda_devs[64];

#define fail vy_client_fail
#define fail_vy vy_client_fail_vy

int vy_client_fail(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return -err;
}

int vy_client_fail_vy(const vy_error *e)
{
	snprintf(last_error, sizeof(last_error), "vyrefs: %s", e->msg);
	int err = vy_err_errno(e->code);
	return -(err ? err : EIO);
}

API const char *vy_last_error(void)
{
	return last_error;
}

/* The root of the mount holding `file`: the topmost directory on its
 * device. Only there is .vyre/ the daemon's (a user may make a .vyre of
 * their own deeper down, to point a client elsewhere). */
int vy_client_mount_root(const char *file, dev_t dev, char *root, size_t cap)
{
	char *real = realpath(file, NULL);
	if (!real)
		return fail(errno, "vyrefs: cannot resolve %s: %s (Fix: check the path)", file, strerror(errno));
	char *slash = strrchr(real, '/');
	if (slash == real)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	for (;;) {
		char *up = strrchr(real, '/');
		if (!up || !strcmp(real, "/"))
			break;
		char parent[PATH_MAX];
		snprintf(parent, sizeof(parent), "%.*s", up == real ? 1 : (int)(up - real), real);
		struct stat st;
		if (stat(parent, &st) != 0 || st.st_dev != dev)
			break;
		snprintf(real, strlen(real) + 1, "%s", parent);
	}
	int n = snprintf(root, cap, "%s", real);
	free(real);
	return n > 0 && (size_t)n < cap ? 0 : fail(ENAMETOOLONG, "vyrefs: the mount's path is too long");
}

int vy_client_connect(const char *file, dev_t dev, int *out)
{
	char root[PATH_MAX], path[PATH_MAX + 32], name[128] = "";
	int rc = vy_client_mount_root(file, dev, root, sizeof(root));
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/.vyre/socket", strcmp(root, "/") ? root : "");
	FILE *f = fopen(path, "re");
	if (!f || !fgets(name, sizeof(name), f) || (name[0] != '@' && name[0] != '/')) {
		int err = errno ? errno : ENOTSUP;
		if (f)
			fclose(f);
		return fail(err == ENOENT ? ENOTSUP : err,
			    "vyrefs: %s is not on a vyrefs mount that maps files (no %s) (Fix: map files of a mount of "
			    "vyrefs 0.2 or newer, on a GPU with virtual memory management)",
			    file, path);
	}
	fclose(f);
	name[strcspn(name, "\n")] = '\0';
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	size_t n = strlen(name + 1);
	if (n == 0 || n >= sizeof(addr.sun_path) - 1)
		return fail(EINVAL, "vyrefs: %s names no socket (Fix: remount)", path);
	memcpy(addr.sun_path + 1, name + 1, n);
	if (name[0] == '/') /* a path: sun_path is the whole name (same length) */
		memcpy(addr.sun_path, name, n + 1);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return fail(errno, "vyrefs: socket: %s", strerror(errno));
	if (connect(s, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) != 0) {
		int err = errno;
		close(s);
		return fail(err, "vyrefs: cannot reach the daemon of %s at %s: %s (Fix: check that the mount is alive: "
				 "ls %s)",
			    root, name, strerror(err), root);
	}
	*out = s;
	return 0;
}

#define call(sock, op, in, len, fd, min, r) \
	vy_client_call((sock), (op), (in), (len), &(int){(fd)}, (fd) >= 0 ? 1 : 0, (min), NULL, NULL, (r))

int vy_client_call(int sock, uint16_t op, const void *in, size_t len, const int *fds, unsigned nfds, size_t min,
		   void (*progress)(uint64_t, uint64_t, void *), void *ctx, vy_msg *r)
{
	vy_chan ch = {.sock = sock, .mb_fd = -1};
	const void *parts[1] = {in};
	size_t lens[1] = {len};
	vy_error e;
	if (vy_chan_send(&ch, op, 1, parts, lens, 1, nfds ? fds : NULL, nfds, &e) != VY_OK)
		return fail_vy(&e);
	for (;;) {
		/* A copy's progress comes first; a map's answer within a minute. */
		if (vy_chan_recv(&ch, progress ? -1 : 60000, 0, r, &e) != VY_OK)
			return fail_vy(&e);
		if (r->h.opcode != VY_OP_CLIENT_PROGRESS)
			break;
		vy_client_progress p;
		if (r->len == sizeof(p) && progress) {
			memcpy(&p, r->body, sizeof(p));
			progress(p.done, p.total, ctx);
		}
		vy_msg_free(r);
	}
	if (r->h.opcode != (op | VY_OP_REPLY) || r->len < min || r->len < sizeof(vy_status)) {
		vy_msg_free(r);
		return fail(EPROTO, "vyrefs: the daemon answered out of turn (Fix: use libvyrefs of the mount's version)");
	}
	vy_status st;
	memcpy(&st, r->body, sizeof(st));
	st.msg[sizeof(st.msg) - 1] = '\0';
	if (st.rc != VY_OK) {
		vy_err code = st.rc > 0 && st.rc <= VY_ERR_LAST ? (vy_err)st.rc : VY_EINTERNAL;
		vy_msg_free(r);
		snprintf(last_error, sizeof(last_error), "vyrefs: %s", st.msg);
		int err = vy_err_errno(code);
		return -(err ? err : EIO);
	}
	return 0;
}

static int open_device(uint32_t backend, int ordinal, vy_device **out)
{
	vy_error e;
	int rc = 0;
	pthread_mutex_lock(&devs_lock);
	vy_device **slot = backend == VY_BACKEND_CUDA ? (ordinal >= 0 && ordinal < 64 ? &cuda_devs[ordinal] : NULL)
						      : &host_dev;
	if (!slot) {
		rc = fail(ENODEV, "vyrefs: device %d is out of range", ordinal);
	} else if (!*slot) {
		vy_err r = backend == VY_BACKEND_CUDA ? vy_device_cuda_open(ordinal, slot, &e)
						      : vy_device_host_open(1, slot, &e);
		if (r != VY_OK)
			rc = fail_vy(&e);
		else if (!(*slot)->share) {
			vy_device_close(*slot);
			*slot = NULL;
			rc = fail(ENOTSUP, "vyrefs: this process's device cannot import memory (Fix: use a GPU with virtual "
					   "memory management and a driver for CUDA 12 or newer)");
		}
	}
	if (!rc)
		*out = *slot;
	pthread_mutex_unlock(&devs_lock);
	return rc;
}

API int vy_map(const char *path, int flags, vy_mapping **out)
{
	if (!path || !out || flags != 0)
		return fail(EINVAL, "vyrefs: vy_map needs a path, an out pointer and flags 0 (Fix: call vy_map(path, 0, &m))");
	*out = NULL;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return fail(errno, "vyrefs: cannot open %s for writing: %s (Fix: a mapping can write the file, so it "
				   "needs write permission)",
			    path, strerror(errno));
	struct stat st;
	int sock = -1, rc = fstat(fd, &st) ? fail(errno, "vyrefs: fstat %s: %s", path, strerror(errno)) : 0;
	if (!rc && !S_ISREG(st.st_mode))
		rc = fail(EINVAL, "vyrefs: %s is not a regular file (Fix: map a file)", path);
	if (!rc)
		rc = vy_client_connect(path, st.st_dev, &sock);
	vy_msg r = {0};
	uint32_t backend = 0, minor = 0;
	int ordinal = -1;
	if (!rc) {
		vy_hello_in in = {.major = VY_PROTO_MAJOR, .minor = VY_PROTO_MINOR};
		rc = call(sock, VY_OP_CLIENT_HELLO, &in, sizeof(in), -1, sizeof(vy_client_hello_out), &r);
		if (!rc) {
			vy_client_hello_out h;
			memcpy(&h, r.body, sizeof(h));
			backend = h.backend;
			ordinal = h.ordinal;
			minor = h.minor;
			vy_msg_free(&r);
		}
	}
	vy_client_map_out mo = {0};
	uint64_t chunk[VY_CHUNKS_MAX];
	vy_msg mem = {0}; /* the reply, kept for its fds */
	if (!rc) {
		vy_client_map_in in = {0};
		rc = call(sock, VY_OP_CLIENT_MAP, &in, sizeof(in), fd, sizeof(mo), &mem);
		if (!rc) {
			memcpy(&mo, mem.body, sizeof(mo));
			if (mo.nchunks == 0 || mo.nchunks > VY_CHUNKS_MAX || mem.nfds != mo.nchunks ||
			    mem.len != sizeof(mo) + mo.nchunks * sizeof(uint64_t))
				rc = fail(EPROTO, "vyrefs: the daemon sent no memory (Fix: use libvyrefs of the mount's version)");
			else
				memcpy(chunk, (char *)mem.body + sizeof(mo), mo.nchunks * sizeof(uint64_t));
			if (!rc && minor >= 2)
				ordinal = mo.ordinal; /* a mount over several devices names the file's */
		}
	}
	close(fd); /* the daemon holds the file now */
	vy_mapping *m = NULL;
	if (!rc && !(m = calloc(1, sizeof(*m))))
		rc = fail(ENOMEM, "vyrefs: out of memory");
	if (!rc)
		rc = open_device(backend, ordinal, &m->dev);
	if (!rc) {
		vy_error e;
		if (vy_span_import(m->dev, mem.fds, chunk, mo.nchunks, &m->span, &e) != VY_OK)
			rc = fail_vy(&e);
	}
	vy_msg_free(&mem); /* closes the fds: the mappings hold the memory */
	if (rc) {
		free(m);
		if (sock >= 0)
			close(sock); /* the daemon ends a mapping it made */
		return rc;
	}
	m->sock = sock;
	m->id = mo.id;
	m->size = mo.size;
	m->ordinal = backend == VY_BACKEND_CUDA ? ordinal : -1;
	*out = m;
	return 0;
}

API uint64_t vy_mapping_ptr(const vy_mapping *m)
{
	return m ? m->span.ptr : 0;
}

API uint64_t vy_mapping_size(const vy_mapping *m)
{
	return m ? m->size : 0;
}

API int vy_mapping_device(const vy_mapping *m)
{
	return m ? m->ordinal : -1;
}

API int vy_sync(vy_mapping *m)
{
	if (!m)
		return fail(EINVAL, "vyrefs: vy_sync of no mapping (Fix: pass what vy_map gave)");
	vy_error e;
	if (m->dev->ops->synchronize(m->dev, &e) != VY_OK)
		return fail_vy(&e);
	vy_client_ref_in in = {.id = m->id};
	vy_msg r;
	int rc = call(m->sock, VY_OP_CLIENT_SYNC, &in, sizeof(in), -1, sizeof(vy_status), &r);
	if (!rc)
		vy_msg_free(&r);
	return rc;
}

API int vy_unmap(vy_mapping *m)
{
	if (!m)
		return 0;
	int rc = vy_sync(m);
	vy_error e;
	if (vy_span_release(m->dev, &m->span, &e) != VY_OK && !rc)
		rc = fail_vy(&e);
	/* Closing the connection ends the mapping in the daemon, which drops
	 * the file's cached pages once more. */
	close(m->sock);
	free(m);
	return rc;
}
