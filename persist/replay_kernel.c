/* What the kernel holds, taken back (replay_kernel.h). */
#include "persist/replay_kernel.h"
#include "daemon/log.h"
#include "fs/fs.h"
#include "fs/ctl_file.h"
#include "fs/vyre.h"
#include "persist/format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int by_index(const void *a, const void *b)
{
	uint32_t x = (uint32_t)(*(const vy_p_handle *const *)a)->id, y = (uint32_t)(*(const vy_p_handle *const *)b)->id;
	return x < y ? -1 : x > y;
}

/* An open file for a handle on `in`: a .vyre file's text is made anew, as
 * an open makes it (a reader sees the successor's figures from offset 0). */
static vy_open *reopen(vy_fs *fs, vy_inode *in)
{
	vy_open *o = vy_open_new(in);
	if (o && in->kind == VY_VIRTUAL && in->virt != VY_V_CTL && !(o->text = vy_vyre_render(fs, in, &o->len))) {
		vy_open_discard(o);
		return NULL;
	}
	return o;
}

/* Whether handle `r` can be taken back on `in`. */
static bool fits(const vy_p_handle *r, const vy_inode *in)
{
	if (!in)
		return false;
	if (r->kind == VY_HANDLE_DIR)
		return in->kind == VY_DIR;
	return in->kind == VY_FILE || in->kind == VY_MODULE ||
	       (in->kind == VY_VIRTUAL && (in->fixed || in->virt == VY_V_MODLOG));
}

/* Handle `r` on `in` (it fits) live again with its id, an open control
 * file with its state `ctl` (or none): 0, or an errno. */
static int take_back(vy_fs *fs, const vy_p_handle *r, vy_inode *in, const vy_p_ctl *ctl)
{
	if (r->kind == VY_HANDLE_DIR)
		return vy_handles_add_at(&fs->handles, r->id, VY_HANDLE_DIR, NULL, r->ino, r->limit);
	vy_open *o = reopen(fs, in);
	if (!o)
		return ENOMEM;
	int err = vy_handles_add_at(&fs->handles, r->id, VY_HANDLE_FILE, o, 0, 0);
	if (err) {
		vy_open_discard(o);
		return err;
	}
	o->fh = r->id;
	in->opens++;
	if (ctl && in->kind == VY_VIRTUAL && in->virt == VY_V_CTL)
		vy_ctlfile_adopt(fs, o, ctl->running, ctl->seq, ctl->pending, ctl->next_line, (const char *)(ctl + 1),
				 ctl->reply_len);
	return 0;
}

static vy_err give_handles(vy_fs *fs, vy_shadow *sh, vy_replay_counts *counts, vy_error *e)
{
	size_t n = sh->handles.count, k = 0;
	vy_p_handle **all = malloc((n ? n : 1) * sizeof(*all));
	if (!all)
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for the handles");
	uint64_t id;
	void *v;
	for (size_t i = 0; vy_u64map_next(&sh->handles, &i, &id, &v);)
		all[k++] = v;
	qsort(all, k, sizeof(*all), by_index); /* vy_handles_add_at takes them in order */
	vy_err rc = VY_OK;
	for (size_t i = 0; i < k && rc == VY_OK; i++) {
		vy_p_handle *r = all[i];
		vy_inode *in = vy_fs_inode(fs, r->ino);
		int err = fits(r, in) ? take_back(fs, r, in, vy_u64map_get(&sh->ctls, r->id)) : EINVAL;
		if (!err) {
			counts->handles++;
			continue;
		}
		if (err == ENOMEM) {
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a handle");
		} else {
			vy_log(LOG_WARNING, "takeover: handle %#" PRIx64 " on inode %" PRIu64 " cannot be taken back (%s); the "
					    "program holding it gets EBADF (Fix: open the file again)",
			       r->id, r->ino, !in ? "the inode is not kept" : "not one this vyrefs takes back");
			counts->handles_lost++;
		}
		vy_shadow_forget_handle(sh, r->id); /* frees *r: all[] holds no other pointer into it */
	}
	free(all);
	return rc;
}

/* Each mapped file held as an open file is (an unlinked one stays until
 * its last unmap); a mapping of a file not made again holds nothing. */
static void hold_mapped(vy_fs *fs, vy_shadow *sh, vy_replay_counts *counts)
{
	uint64_t k;
	void *v;
	for (size_t i = 0; vy_u64map_next(&sh->mapconns, &i, &k, &v);) {
		vy_p_mapconn *r = v;
		vy_p_mapping *mp = (vy_p_mapping *)(r + 1);
		for (uint32_t j = 0; j < r->n; j++) {
			vy_inode *in = vy_fs_inode(fs, mp[j].ino);
			if (in && in->kind == VY_FILE) {
				in->opens++;
				counts->mappings++;
				continue;
			}
			vy_log(LOG_WARNING, "takeover: a client's mapping of inode %" PRIu64 " is of no kept file; the "
					    "client keeps its memory, and the file is not held for it", mp[j].ino);
			mp[j].ino = 0;
			counts->mappings_lost++;
		}
	}
}

vy_err vy_replay_mapconns(const vy_shadow *sh, vy_keep_fds *mem, vy_kept_conns *out, vy_error *e)
{
	memset(out, 0, sizeof(*out));
	size_t n = sh->mapconns.count;
	if (!n)
		return VY_OK;
	if (!(out->c = calloc(n, sizeof(*out->c))))
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for client connections");
	uint64_t slot;
	void *v;
	for (size_t i = 0; vy_u64map_next(&sh->mapconns, &i, &slot, &v);) {
		const vy_p_mapconn *r = v;
		size_t len = sizeof(*r) + r->n * sizeof(vy_p_mapping);
		vy_kept_conn *c = &out->c[out->n];
		if (!(c->rec = malloc(len))) {
			vy_kept_conns_free(out);
			return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a client connection");
		}
		memcpy(c->rec, r, len);
		c->fd = slot < mem->n ? mem->fd[slot] : -1;
		if (slot < mem->n)
			mem->fd[slot] = -1; /* the connection's now, its slot still the keeper's */
		out->n++;
	}
	return VY_OK;
}

void vy_kept_conns_free(vy_kept_conns *kc)
{
	for (size_t i = 0; i < kc->n; i++) {
		if (kc->c[i].fd >= 0)
			close(kc->c[i].fd);
		free(kc->c[i].rec);
	}
	free(kc->c);
	memset(kc, 0, sizeof(*kc));
}

vy_err vy_replay_kernel_refs(struct vy_fs *fs, vy_shadow *sh, vy_replay_counts *counts, vy_error *e)
{
	hold_mapped(fs, sh, counts);
	vy_seqlog_after(&fs->seqlog, sh->sequences); /* sequences number on after the dead daemon's */
	return give_handles(fs, sh, counts, e);
}
