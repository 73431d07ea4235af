/* A connection of the map server: its replies, its mappings, and an
 * adopted one's unfinished request (mapsrv_impl.h). */
#include "fs/backed.h"
#include "sock/mapsrv_impl.h"
#include "fs/readahead.h"
#include "persist/format.h"
#include "sock/clientfd.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

vy_err vy_mapconn_reply_with(conn *c, const vy_msg *m, const void *out, size_t len, const vy_export *x)
{
	if (c->slot) {
		/* Done: a successor answers it again rather than doing it. */
		vy_status st;
		memcpy(&st, out, sizeof(st));
		c->req = (vy_mapconn_req){.unique = m->h.unique, .ref = c->req.ref, .opcode = m->h.opcode, .phase = 2,
					  .status = st.rc, .readonly = c->req.readonly};
		vy_mapconn_record(c);
	}
	vy_chan ch = {.sock = c->sock, .mb_fd = -1};
	const void *parts[2] = {out, x ? x->chunk : NULL};
	size_t lens[2] = {len, x ? x->n * sizeof(uint64_t) : 0};
	vy_error e;
	return vy_chan_send(&ch, m->h.opcode | VY_OP_REPLY, m->h.unique, parts, lens, x ? 2 : 1, x ? x->fd : NULL,
			    x ? x->n : 0, &e);
}

void vy_mapconn_status_of(vy_status *st, vy_err rc, const vy_error *e)
{
	st->rc = (int32_t)rc;
	st->step = -1;
	snprintf(st->msg, sizeof(st->msg), "%s", rc == VY_OK ? "" : e->msg);
}

vy_err vy_mapconn_reply_status(conn *c, const vy_msg *m, vy_err rc, const vy_error *e)
{
	vy_status st;
	vy_mapconn_status_of(&st, rc, e);
	return vy_mapconn_reply_with(c, m, &st, sizeof(st), NULL);
}

/* The kernel may cache pages of what the device holds now: drop them, so
 * cat shows what the client wrote. */
void vy_mapconn_drop_cache(vy_mapsrv *srv, vy_inode *in)
{
	/* Readahead copies too: they may predate what the client wrote. */
	pthread_rwlock_rdlock(&in->lock);
	vy_readahead_forget(in);
	pthread_rwlock_unlock(&in->lock);
	pthread_mutex_lock(&srv->lock);
	bool quiet = srv->stopping || (srv->adopting && pthread_equal(srv->adopter, pthread_self()));
	pthread_mutex_unlock(&srv->lock);
	if (!quiet && srv->fs->se)
		fuse_lowlevel_notify_inval_inode(srv->fs->se, in->ino, 0, 0);
}

void vy_mapconn_unmap_at(conn *c, size_t i)
{
	vy_fs *fs = c->srv->fs;
	mapping mp = c->maps[i];
	c->maps[i] = c->maps[--c->nmaps];
	pthread_rwlock_wrlock(&mp.in->lock);
	mp.in->maps--;
	if (!mp.readonly)
		vy_backed_suspect(fs, mp.in); /* backing=DIR: what it wrote through the mapping goes back */
	/* A mapped file does not move: its device is the one it was mapped on. */
	vy_core *core = vy_fs_core(fs, mp.in);
	vy_store_unexport(core->store, mp.buf, NULL);
	if (mp.in->maps == 0) {
		vy_telemetry_add(core->tel, mapped_bytes, (uint64_t)0 - mp.in->mapped_counted);
		mp.in->mapped_counted = 0;
	}
	pthread_rwlock_unlock(&mp.in->lock);
	vy_mapconn_drop_cache(c->srv, mp.in);
	vy_clientfd_let_go(fs, mp.in);
}

bool vy_mapconn_find(const conn *c, uint64_t id, size_t *i)
{
	for (*i = 0; *i < c->nmaps; (*i)++)
		if (c->maps[*i].id == id)
			return true;
	return false;
}

/* MAP `m` answered again with mapping i: its memory exported anew, as
 * it was (read-only for a reader). */
static vy_err answer_map(conn *c, const vy_msg *m, size_t i, bool readonly)
{
	vy_fs *fs = c->srv->fs;
	mapping *mp = &c->maps[i];
	vy_client_map_out out = {.id = mp->id};
	vy_buffer_view v;
	vy_export x = {0};
	vy_error e;
	vy_store *store = vy_fs_core(fs, mp->in)->store;
	pthread_rwlock_rdlock(&mp->in->lock);
	vy_err rc = vy_store_export(store, mp->buf, VY_EXPORT_UNTRUSTED | (readonly ? VY_EXPORT_READONLY : 0), &v, &x, &e);
	out.size = mp->in->size;
	pthread_rwlock_unlock(&mp->in->lock);
	if (rc != VY_OK)
		return vy_mapconn_reply_status(c, m, rc, &e);
	out.bytes = v.alloc;
	out.nchunks = x.n;
	out.ordinal = vy_fs_core(fs, mp->in)->dev->info.ordinal;
	out.lead = v.lead;
	vy_err sent = vy_mapconn_reply_with(c, m, &out, c->minor < 3 ? VY_CLIENT_MAP_OUT_V22 : sizeof(out), &x);
	vy_export_close(&x);
	vy_store_unexport(store, mp->buf, NULL); /* the mapping's own export stays */
	return sent;
}

bool vy_mapconn_resume(conn *c)
{
	vy_mapconn_req q = c->req;
	int queued = 0;
	if (q.phase == 0)
		return true;
	/* Bytes on the socket: the request itself (not taken) or the next
	 * one (its answer reached the client). Either way, serve on. */
	if (ioctl(c->sock, FIONREAD, &queued) != 0 || queued > 0)
		return true;
	vy_msg m = {.h = {.unique = q.unique, .opcode = q.opcode}};
	vy_error e;
	size_t i;
	bool found = vy_mapconn_find(c, q.ref, &i);
	c->req.ref = q.ref;
	vy_err sent;
	bool map = q.opcode == VY_OP_CLIENT_MAP;
	if (q.phase == 2 && q.status == VY_OK && map && found) {
		sent = answer_map(c, &m, i, q.readonly);
	} else if (q.phase == 2 && q.status == VY_OK && !map) {
		sent = vy_mapconn_reply_status(c, &m, VY_OK, NULL);
	} else if (q.phase == 2 && q.status != VY_OK) {
		vy_err code = q.status > 0 && q.status <= VY_ERR_LAST ? (vy_err)q.status : VY_EINTERNAL;
		vy_fail(&e, code, "see the daemon's log", "the request failed; its message was lost when the daemon restarted");
		sent = vy_mapconn_reply_status(c, &m, code, &e);
	} else if (q.phase == 2) { /* a MAP whose mapping the successor could not take back */
		vy_fail(&e, VY_EINTR, "map the file again", "the daemon restarted and could not keep this mapping");
		sent = vy_mapconn_reply_status(c, &m, VY_EINTR, &e);
	} else if (q.opcode == VY_OP_CLIENT_SYNC || q.opcode == VY_OP_CLIENT_UNMAP) {
		/* Taken, not done: these are done now, as they would have been. */
		if (found && q.opcode == VY_OP_CLIENT_SYNC)
			vy_mapconn_drop_cache(c->srv, c->maps[i].in);
		else if (found)
			vy_mapconn_unmap_at(c, i);
		sent = vy_mapconn_reply_status(c, &m, VY_OK, NULL);
	} else {
		vy_fail(&e, VY_EINTR, "send it again",
			"the daemon restarted while it served this request (a crash, a kill or vyrefs --upgrade); it "
			"was not done, or not wholly");
		sent = vy_mapconn_reply_status(c, &m, VY_EINTR, &e);
	}
	return sent == VY_OK;
}

