/* A client connection that maps files, kept for a successor (survive=on,
 * docs/survive.md "Mappings"), and taken back by one (sock/mapconn.c
 * answers what it was serving).
 *
 * From its first mapping on, a connection's socket has a copy with the
 * keeper, so the client's end stays open when the daemon dies: the client
 * never notices, and its mappings stay counted (the file is held, and
 * cannot be resized or moved). Its record (persist/format.h vy_p_mapconn)
 * lists the mappings and the request it serves, in two steps: seen (phase
 * 1, before it is taken off the socket in one call) and done (phase 2,
 * before its reply). A successor that finds phase 1 and nothing on the
 * socket knows the request was taken and not done; a phase 2 request it
 * answers again, and the client drops an answer it already has (by its
 * unique). */
#include "sock/mapsrv_impl.h"
#include "core/store_keep.h"
#include "daemon/log.h"
#include "persist/format.h"
#include "persist/replay_kernel.h"
#include "persist/writer.h"
#include "sock/clientcred.h"
#include "sock/clientfd.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_record(vy_fs *fs, uint32_t slot, const vy_mapconn_req *req, const conn *c)
{
	uint32_t n = c ? (uint32_t)c->nmaps : 0;
	size_t len = sizeof(vy_p_mapconn) + (size_t)n * sizeof(vy_p_mapping);
	vy_p_mapconn *r = calloc(1, len);
	if (!r) {
		vy_log(LOG_ERR, "client socket: no memory to keep connection %u's record; its mappings may not survive "
				"this daemon's death", slot);
		return;
	}
	*r = (vy_p_mapconn){.slot = slot, .open = c != NULL, .n = n};
	if (c) {
		r->uid = (uint32_t)c->uid;
		r->minor = c->minor;
		r->next_id = c->next_id;
		r->unique = req->unique;
		r->ref = req->ref;
		r->opcode = req->opcode;
		r->phase = req->phase;
		r->status = req->status;
		r->flags = req->readonly ? VY_P_MAPCONN_READONLY : 0;
		vy_p_mapping *mp = (vy_p_mapping *)(r + 1);
		for (uint32_t i = 0; i < n; i++)
			mp[i] = (vy_p_mapping){.id = c->maps[i].id, .ino = c->maps[i].in->ino, .bytes = c->maps[i].bytes};
	}
	vy_persist_mapconn(fs, r, (uint32_t)len);
	free(r);
}

void vy_mapconn_record(conn *c)
{
	if (c->slot)
		put_record(c->srv->fs, c->slot, &c->req, c);
}

bool vy_mapconn_keep(conn *c)
{
	vy_fs *fs = c->srv->fs;
	if (c->slot || !vy_fs_keeps_fds(fs))
		return true; /* kept already, or nothing is kept on this mount */
	c->slot = fs->keep_sink->add(fs->keep_sink->ctx, c->sock);
	return c->slot != 0;
}

void vy_mapconn_forget(conn *c)
{
	vy_fs *fs = c->srv->fs;
	if (!c->slot)
		return;
	/* The record first: a death between the two leaves a slot no
	 * record names, which the successor closes. */
	put_record(fs, c->slot, NULL, NULL);
	fs->keep_sink->drop(fs->keep_sink->ctx, c->slot);
	c->slot = 0;
}

/* Take mapping `r` back into `c`: the file's memory exported again (so it
 * stays put) and counted as mapped. The file is held already (replay). */
static bool take_mapping(conn *c, const vy_p_mapping *r)
{
	vy_fs *fs = c->srv->fs;
	vy_inode *in = vy_fs_inode(fs, r->ino);
	vy_buffer_view v;
	vy_export x = {0};
	vy_error e;
	pthread_rwlock_wrlock(&in->lock);
	vy_core *core = vy_fs_core(fs, in);
	vy_err rc = in->buf ? vy_store_export(core->store, in->buf, VY_EXPORT_UNTRUSTED, &v, &x, &e)
			    : vy_fail(&e, VY_ENOENT, "map it again", "the file lost its memory in the takeover");
	if (rc == VY_OK) {
		vy_export_close(&x);
		if (v.alloc > in->mapped_counted) {
			vy_telemetry_add(core->tel, mapped_bytes, v.alloc - in->mapped_counted);
			in->mapped_counted = v.alloc;
		}
		in->maps++;
		c->maps[c->nmaps++] = (mapping){.id = r->id, .in = in, .buf = in->buf, .bytes = v.alloc};
		vy_telemetry_add(core->tel, maps, 1);
	}
	pthread_rwlock_unlock(&in->lock);
	if (rc != VY_OK) {
		vy_log(LOG_WARNING, "takeover: a client's mapping of inode %" PRIu64 " cannot be taken back: %s", r->ino,
		       e.msg);
		vy_clientfd_let_go(fs, in);
	}
	return rc == VY_OK;
}

/* A kept connection the server cannot take: its files let go, its record
 * and its socket's slot forgotten. */
static void abandon(vy_fs *fs, vy_kept_conn *k)
{
	const vy_p_mapping *mp = (const vy_p_mapping *)(k->rec + 1);
	for (uint32_t j = 0; j < k->rec->n; j++) {
		vy_inode *in = mp[j].ino ? vy_fs_inode(fs, mp[j].ino) : NULL;
		if (in)
			vy_clientfd_let_go(fs, in);
	}
	put_record(fs, k->rec->slot, NULL, NULL);
	if (k->fd >= 0) {
		close(k->fd);
		k->fd = -1;
		if (fs->keep_sink)
			fs->keep_sink->drop(fs->keep_sink->ctx, k->rec->slot);
	}
}

conn *vy_mapconn_take_back(vy_fs *fs, vy_mapsrv *srv, vy_kept_conn *k)
{
	const vy_p_mapconn *r = k->rec;
	conn *c = srv && k->fd >= 0 ? calloc(1, sizeof(*c)) : NULL;
	mapping *maps = c && r->n ? calloc(r->n, sizeof(*maps)) : NULL;
	if (c && r->n && !maps) {
		free(c);
		c = NULL;
	}
	if (!c) {
		vy_log(LOG_WARNING, "takeover: client connection %u cannot be taken back (%s); its program keeps its "
				    "memory, but its files are no longer held for it",
		       r->slot, !srv ? "no client socket" : k->fd < 0 ? "the keeper did not hand its socket" : "no memory");
		abandon(fs, k);
		return NULL;
	}
	*c = (conn){.srv = srv, .sock = k->fd, .maps = maps, .capmaps = r->n, .next_id = r->next_id, .minor = r->minor,
		    .uid = (uid_t)r->uid, .slot = r->slot, .adopted = true,
		    .req = {.unique = r->unique, .ref = r->ref, .opcode = r->opcode, .phase = r->phase, .status = r->status,
			    .readonly = r->flags & VY_P_MAPCONN_READONLY}};
	/* Its file size limit, read again (not kept): its process holds
	 * mappings, so it is likely there; if not, no copy out. */
	c->fsize = UINT64_MAX;
	c->fsize_err = vy_clientcred_fsize_of_peer(c->sock, &c->fsize);
	const vy_p_mapping *mp = (const vy_p_mapping *)(r + 1);
	for (uint32_t j = 0; j < r->n; j++)
		if (mp[j].ino)
			take_mapping(c, &mp[j]);
	k->fd = -1; /* the connection's */
	vy_mapconn_record(c); /* as taken back: a mapping that could not be is gone from it */
	return c;
}
