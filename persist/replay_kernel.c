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
	return in->kind == VY_FILE || (in->kind == VY_VIRTUAL && in->fixed);
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

vy_err vy_replay_kernel_refs(struct vy_fs *fs, vy_shadow *sh, vy_replay_counts *counts, vy_error *e)
{
	uint64_t k;
	void *v;
	for (size_t i = 0; vy_u64map_next(&sh->nodes, &i, &k, &v);) {
		vy_shadow_node *node = v;
		vy_inode *in = node->nlookup ? vy_fs_inode(fs, node->ino) : NULL;
		if (in)
			vy_ns_lookups_set(vy_fs_ns(fs), in, node->nlookup);
		else if (node->nlookup) {
			counts->lookups_lost += node->nlookup; /* a module's: its FORGET finds nothing */
		}
	}
	vy_seqlog_after(&fs->seqlog, sh->sequences); /* sequences number on after the dead daemon's */
	return give_handles(fs, sh, counts, e);
}
