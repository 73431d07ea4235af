/* The map server's insides, shared by sock/mapsrv.c (serving) and
 * sock/mapconn_keep.c (a connection kept for a successor, and taken back
 * by one). Not for other folders. */
#ifndef VY_MAPSRV_IMPL_H
#define VY_MAPSRV_IMPL_H

#include "fs/fs.h"
#include "proto/channel.h"
#include "sock/mapsrv.h"

#include <limits.h>
#include <pthread.h>
#include <sys/types.h>
#include <time.h>

typedef struct mapping {
	uint64_t id;
	vy_inode *in; /* held like an open file */
	vy_handle buf;
	uint64_t bytes;
	bool readonly; /* handed out read-only: its end changed no byte */
} mapping;

/* A request as the connection's record keeps it (persist/format.h
 * vy_p_mapconn): phase 1 taken, 2 done. */
typedef struct vy_mapconn_req {
	uint64_t unique, ref;
	uint16_t opcode, phase;
	int32_t status;
	bool readonly; /* a MAP's: its memory was handed out read-only */
} vy_mapconn_req;

typedef struct conn {
	struct vy_mapsrv *srv;
	int sock;
	pthread_t thread;
	bool done;
	mapping *maps;
	size_t nmaps, capmaps;
	uint64_t next_id;
	uint32_t minor; /* the client's protocol minor (HELLO) */
	uid_t uid;      /* the client's, from SO_PEERCRED */
	/* The RLIMIT_FSIZE of the process that connected, read at accept (or
	 * at a takeover's take-back): a COPY out writes no more; fsize_err
	 * (its errno) where it could not be read, and a COPY out is refused. */
	uint64_t fsize;
	int fsize_err;
	/* survive=on: the keeper's slot that holds a copy of sock, from the
	 * first mapping on (0: not kept), and the request last kept. */
	uint32_t slot;
	vy_mapconn_req req;
	bool adopted; /* taken back from a dead daemon: req is its to finish */
	struct conn *next;
} conn;

struct vy_mapsrv {
	vy_fs *fs;
	int listen_fd;
	pthread_t acceptor;
	pthread_mutex_t lock; /* conns, stopping */
	pthread_cond_t gone;  /* a connection ended */
	conn *conns;
	unsigned nconns;
	bool stopping;
	/* A successor's main thread takes the dead daemon's clients back
	 * (vy_mapsrv_adopt) before it starts the session loop: a notification
	 * from it could wait on a page a READ holds that only the loop will
	 * answer, so it drops no pages (lock held to read). */
	bool adopting;
	pthread_t adopter;
	dev_t dev; /* the mount's device number */
	char name[PATH_MAX]; /* "@NAME" (abstract) or the socket's path */
	bool on_disk;        /* name is a path to unlink at the end */
	time_t refusal_logged;
	unsigned refused;    /* since the last log line */
};

/* sock/mapconn.c. Replies: a reply (kept as phase 2 first, on a kept
 * connection), and after it a MAP's memory `x`; a status alone. */
void vy_mapconn_status_of(vy_status *st, vy_err rc, const vy_error *e);
vy_err vy_mapconn_reply_with(conn *c, const vy_msg *m, const void *out, size_t len, const vy_export *x);
vy_err vy_mapconn_reply_status(conn *c, const vy_msg *m, vy_err rc, const vy_error *e);
/* The index of the connection's mapping `id` (false: none). */
bool vy_mapconn_find(const conn *c, uint64_t id, size_t *i);
/* End mapping i of the connection. */
void vy_mapconn_unmap_at(conn *c, size_t i);
/* Drop the kernel's cached pages of a mapped file. */
void vy_mapconn_drop_cache(vy_mapsrv *srv, vy_inode *in);
/* An adopted connection, in its thread before it reads: answer the
 * request the dead daemon left (again, or with an error that says it
 * restarted). False: the connection ends. */
bool vy_mapconn_resume(conn *c);

/* sock/mapsrv.c: count `c` among the server's connections and start its
 * thread; false (nothing counted) when no thread could start. Lock held. */
bool vy_mapsrv_conn_start(vy_mapsrv *srv, conn *c);

/* sock/mapconn_keep.c: keep the connection's record (its mappings and
 * c->req) for a successor; hand its socket to the keeper (at its first
 * mapping; false when it cannot be kept); at its end, forget both. */
void vy_mapconn_record(conn *c);
bool vy_mapconn_keep(conn *c);
void vy_mapconn_forget(conn *c);
/* A kept connection made a connection of `srv` again (not started), its
 * mappings counted; NULL when it cannot be (no server, no socket): its
 * files let go, its record and slot forgotten. */
struct vy_kept_conn;
conn *vy_mapconn_take_back(vy_fs *fs, vy_mapsrv *srv, struct vy_kept_conn *k);

#endif
