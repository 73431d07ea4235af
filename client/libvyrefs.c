/* libvyrefs: the client side of the map server (sock/mapsrv.c). It reuses
 * the core's device backends (core/device_*.c) to import memory, and talks
 * to the daemon through client/daemon.c; everything but the functions of
 * vyrefs.h is hidden in the shared library. */
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
#include <sys/stat.h>
#include <unistd.h>

#define API __attribute__((visibility("default")))
#define TAKEOVERS_MAX 8 /* daemons that may die under one vy_map (survive=on) before it fails */

struct vy_mapping {
	vy_client_conn conn;
	uint64_t id, size;
	vy_span span; /* the file's memory, its allocations back to back */
	uint64_t lead; /* the file's byte 0 is this far into span (its placement) */
	vy_device *dev;
	int ordinal; /* -1: host */
};

/* One device per backend and ordinal, opened on first use and kept: a
 * context is costly, and mappings share it. */
static pthread_mutex_t devs_lock = PTHREAD_MUTEX_INITIALIZER;
static vy_device *host_dev, *cuda_devs[64];

#define fail vy_client_fail
#define fail_vy vy_client_fail_vy


#define call(c, op, in, len, fd, min, r) \
	vy_client_call((c), (op), (in), (len), &(int){(fd)}, (fd) >= 0 ? 1 : 0, (min), NULL, NULL, (r))

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
			rc = vy_client_fail_local(&e);
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

/* Why the file could not be opened, with what to do about it. */
static int open_failed(const char *path, int err, bool readonly)
{
	int rc = vy_client_fail_fds(err, path);
	if (rc)
		return rc;
	if (err == ENOTCONN)
		return fail(err, "vyrefs: cannot open %s: the daemon of its mount has exited (%s) (Fix: unmount the "
				 "mount, fusermount3 -u MOUNT, and mount it again)",
			    path, strerror(err));
	if (readonly)
		return fail(err, "vyrefs: cannot open %s for reading: %s (Fix: a read-only mapping needs read permission)",
			    path, strerror(err));
	return fail(err, "vyrefs: cannot open %s for writing: %s (Fix: a mapping can write the file, so it needs write "
			 "permission; to read it only, map it with VY_MAP_READONLY)",
		    path, strerror(err));
}

/* One try: HELLO and MAP on a new connection to the mount's daemon (the
 * successor of `dead`, which ended the last try unanswered: *died false
 * when it lives on), the reply kept in `mem` for its fds. */
static int ask_map(const char *path, int fd, dev_t dev, vy_mapping *m, vy_msg *mem, vy_client_map_out *mo,
		   uint32_t *backend, int *ordinal, pid_t dead, bool *died, bool readonly)
{
	*died = true;
	int rc = dead ? vy_client_connect_successor(path, dev, dead, &m->conn, died) : vy_client_connect(path, dev, &m->conn);
	vy_msg r = {0};
	uint32_t minor = 0;
	if (!rc) {
		vy_hello_in in = {.major = VY_PROTO_MAJOR, .minor = VY_PROTO_MINOR};
		rc = call(&m->conn, VY_OP_CLIENT_HELLO, &in, sizeof(in), -1, sizeof(vy_client_hello_out), &r);
		if (!rc) {
			vy_client_hello_out h;
			memcpy(&h, r.body, sizeof(h));
			*backend = h.backend;
			*ordinal = h.ordinal;
			minor = h.minor;
			vy_msg_free(&r);
		}
	}
	if (!rc && readonly && minor < 4) {
		vy_client_close(&m->conn);
		return fail(ENOTSUP, "vyrefs: the daemon of %s speaks protocol 2.%u; a read-only mapping needs 2.4 (Fix: "
				     "remount it with the vyrefs of this libvyrefs, or map the file for writing)",
			    m->conn.root, minor);
	}
	if (!rc) {
		vy_client_map_in in = {.flags = readonly ? VY_CLIENT_MAP_READONLY : 0};
		/* A daemon of 2.2 or before sends no lead: its files have none. */
		size_t head = minor >= 3 ? sizeof(*mo) : VY_CLIENT_MAP_OUT_V22;
		rc = call(&m->conn, VY_OP_CLIENT_MAP, &in, sizeof(in), fd, head, mem);
		if (!rc) {
			memset(mo, 0, sizeof(*mo));
			memcpy(mo, mem->body, head);
			if (mo->nchunks == 0 || mo->nchunks > VY_CHUNKS_MAX || mem->nfds != mo->nchunks ||
			    mem->len != head + mo->nchunks * sizeof(uint64_t) || mo->lead >= mo->bytes ||
			    mo->size > mo->bytes - mo->lead)
				rc = fail(EPROTO, "vyrefs: the daemon sent no memory (Fix: use libvyrefs of the mount's version)");
			if (!rc && minor >= 2)
				*ordinal = mo->ordinal; /* a mount over several devices names the file's */
		}
	}
	if (rc)
		vy_client_close(&m->conn); /* the daemon ends a mapping it made */
	return rc;
}

API int vy_map(const char *path, int flags, vy_mapping **out)
{
	if (!path || !out || (flags & ~VY_MAP_READONLY))
		return fail(EINVAL, "vyrefs: vy_map needs a path, an out pointer and flags 0 or VY_MAP_READONLY (Fix: call "
				    "vy_map(path, 0, &m))");
	bool readonly = flags & VY_MAP_READONLY;
	*out = NULL;
	vy_mapping *m = calloc(1, sizeof(*m));
	if (!m)
		return fail(ENOMEM, "vyrefs: out of memory");
	m->conn.sock = -1;
	int fd = open(path, (readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC);
	if (fd < 0) {
		free(m);
		return open_failed(path, errno, readonly);
	}
	struct stat st;
	int rc = fstat(fd, &st) ? fail(errno, "vyrefs: fstat %s: %s", path, strerror(errno)) : 0;
	if (!rc && !S_ISREG(st.st_mode))
		rc = fail(EINVAL, "vyrefs: %s is not a regular file (Fix: map a file)", path);
	vy_client_map_out mo = {0};
	vy_msg mem = {0}; /* the reply, kept for its fds */
	uint32_t backend = 0;
	int ordinal = -1;
	bool died;
	if (!rc)
		rc = ask_map(path, fd, st.st_dev, m, &mem, &mo, &backend, &ordinal, 0, &died, readonly);
	/* survive=on: a daemon that died before it kept this connection took
	 * the mapping with it; its successor is waited for and asked again. */
	for (int takeovers = 0; rc == -ECONNRESET && m->conn.pid > 0 && takeovers < TAKEOVERS_MAX; takeovers++) {
		char why[VY_ERROR_MSG_MAX + 128];
		snprintf(why, sizeof(why), "%s", vy_last_error());
		rc = ask_map(path, fd, st.st_dev, m, &mem, &mo, &backend, &ordinal, m->conn.pid, &died, readonly);
		if (!died) { /* it lives: not a takeover, and what it did is the answer */
			rc = fail(ECONNRESET, "%s", why);
			break;
		}
	}
	close(fd); /* the daemon holds the file now */
	if (!rc)
		rc = open_device(backend, ordinal, &m->dev);
	if (!rc) {
		vy_error e;
		uint64_t chunk[VY_CHUNKS_MAX];
		memcpy(chunk, (char *)mem.body + (mem.len - mo.nchunks * sizeof(uint64_t)), mo.nchunks * sizeof(uint64_t));
		if (vy_span_import(m->dev, mem.fds, chunk, mo.nchunks, &m->span, &e) != VY_OK)
			rc = vy_client_fail_local(&e);
	}
	vy_msg_free(&mem); /* closes the fds: the mappings hold the memory */
	if (rc) {
		vy_client_close(&m->conn);
		free(m);
		return rc;
	}
	m->id = mo.id;
	m->size = mo.size;
	m->lead = mo.lead;
	m->ordinal = backend == VY_BACKEND_CUDA ? ordinal : -1;
	*out = m;
	return 0;
}

API uint64_t vy_mapping_ptr(const vy_mapping *m)
{
	return m ? m->span.ptr + m->lead : 0;
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
	int rc = call(&m->conn, VY_OP_CLIENT_SYNC, &in, sizeof(in), -1, sizeof(vy_status), &r);
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
	/* The daemon ends the mapping (and drops the file's cached pages once
	 * more) before vy_unmap returns, so .vyre/stats' mapped_bytes and an
	 * unlinked file's memory are current when it does. Closing the
	 * connection would end it too, but after: a daemon that cannot be
	 * asked (gone, taken over) ends it so. */
	vy_client_ref_in in = {.id = m->id};
	vy_msg r;
	if (call(&m->conn, VY_OP_CLIENT_UNMAP, &in, sizeof(in), -1, sizeof(vy_status), &r) == 0)
		vy_msg_free(&r);
	vy_client_close(&m->conn);
	free(m);
	return rc;
}
