/* Write-behind slots of one file (see wbehind.h). */
#include "fs/wbehind.h"
#include "core/async.h"
#include "daemon/log.h"
#include "fs/wbehind_keep.h"

#include <stdlib.h>
#include <string.h>

typedef struct wb_slot {
	vy_staging_buf buf; /* ptr NULL: no slot held */
	int kept;           /* survive=on: its number in fs->wbk (0: staging's) */
	uint64_t start, len;
	vy_async copy;     /* its copy to the device, when in flight */
	uint64_t order;    /* when it was queued: oldest completes first */
} wb_slot;

struct vy_wbehind {
	pthread_mutex_t lock; /* settle runs under the inode's read lock too */
	wb_slot slot[2];
	int filling; /* the slot gathering writes, or -1 */
	uint64_t queued;
	vy_err err; /* sticky: a copy that failed */
	vy_error why;
};

static vy_err sticky(struct vy_wbehind *wb, vy_error *e)
{
	if (e)
		*e = wb->why;
	return wb->err;
}

static void fail_sticky(struct vy_wbehind *wb, vy_inode *in, vy_err rc, const vy_error *why)
{
	if (wb->err != VY_OK)
		return;
	wb->err = rc;
	wb->why = *why;
	vy_log(LOG_ERR, "inode %llu: written bytes did not reach the device: %s", (unsigned long long)in->ino,
	       why->msg);
}

/* A kept slot's length as a successor reads it: its bytes are written. */
static void published(vy_fs *fs, const wb_slot *s)
{
	if (s->kept)
		vy_wbk_publish(fs->wbk, s->kept, s->len);
}

/* A kept slot whose bytes did not reach the device stays as it is, out
 * of use, for a successor to copy again, until the file goes
 * (vy_wbehind_free). So does every later kept slot of the file, never
 * copied here (queue): the successor copies them in their order, and the
 * file's sticky error refuses every other change meanwhile. */
static void hold(vy_fs *fs, wb_slot *s)
{
	if (s->kept) {
		vy_wbk_hold(fs->wbk, s->kept);
		s->kept = 0;
		s->buf = (vy_staging_buf){0}; /* the region's, not staging's */
	}
	s->len = 0;
}

/* A copy that failed: the bytes are the error's now. */
static void failed(vy_fs *fs, vy_inode *in, struct vy_wbehind *wb, wb_slot *s, vy_err rc, const vy_error *why)
{
	fail_sticky(wb, in, rc, why);
	hold(fs, s);
}

/* Wait for the slot's copy (which drops its pin). */
static void complete(vy_fs *fs, vy_inode *in, struct vy_wbehind *wb, wb_slot *s)
{
	if (!s->copy.inflight)
		return;
	vy_error why;
	vy_err rc = vy_async_wait(vy_fs_core(fs, in), &s->copy, &why);
	if (rc != VY_OK) {
		failed(fs, in, wb, s, rc, &why);
		return;
	}
	s->len = 0;
	published(fs, s);
}

static bool overlaps(const wb_slot *a, const wb_slot *b)
{
	return a->start < b->start + b->len && b->start < a->start + a->len;
}

/* Queue the slot's copy. A copy in flight over the same bytes lands
 * first: two streams do not order their work. */
static void queue(vy_fs *fs, vy_inode *in, struct vy_wbehind *wb, wb_slot *s)
{
	if (s->len == 0)
		return;
	wb_slot *other = &wb->slot[s == &wb->slot[0]];
	if (other->copy.inflight && overlaps(s, other))
		complete(fs, in, wb, other);
	if (wb->err != VY_OK && s->kept) {
		/* Copied here, newer bytes would land before an older slot's
		 * retry, which a successor would then copy over them. */
		hold(fs, s);
		return;
	}
	vy_error why;
	vy_err rc = vy_async_htod(vy_fs_core(fs, in), &s->copy, in->buf, s->start, s->buf.ptr, s->len, &why);
	if (rc != VY_OK) {
		failed(fs, in, wb, s, rc, &why);
		return;
	}
	vy_telemetry_add(vy_fs_core(fs, in)->tel, wb_copies, 1);
	s->order = ++wb->queued;
}

static void release(vy_fs *fs, vy_inode *in, wb_slot *s)
{
	if (s->kept) {
		vy_wbk_give(fs->wbk, s->kept);
		s->kept = 0;
		s->buf = (vy_staging_buf){0};
		return;
	}
	vy_staging_release_counted(vy_fs_core(fs, in)->staging, &fs->wb_slots, &s->buf);
}

/* Take a pinned slot, within the fs-wide cap: survive=on, one of the
 * keeper's (fs->wbk), as only those outlive this daemon. */
static bool acquire(vy_fs *fs, vy_inode *in, wb_slot *s)
{
	if (s->buf.ptr)
		return true;
	if (fs->cfg.survive) {
		s->buf.ptr = fs->wbk ? vy_wbk_take(fs->wbk, &s->kept) : NULL;
		s->buf.size = VY_WB_SLOT;
		return s->buf.ptr != NULL;
	}
	return vy_staging_acquire_counted(vy_fs_core(fs, in)->staging, VY_WB_SLOT, &fs->wb_slots, VY_WB_SLOTS, &s->buf);
}

/* Both slots' copies done, the older first. */
static void complete_all(vy_fs *fs, vy_inode *in, struct vy_wbehind *wb)
{
	int first = wb->slot[0].order <= wb->slot[1].order ? 0 : 1;
	complete(fs, in, wb, &wb->slot[first]);
	complete(fs, in, wb, &wb->slot[!first]);
}

/* wb locked: everything gathered on the device, slots given back. */
static vy_err settle_locked(vy_fs *fs, vy_inode *in, struct vy_wbehind *wb, vy_error *e)
{
	if (wb->filling >= 0)
		queue(fs, in, wb, &wb->slot[wb->filling]);
	wb->filling = -1;
	complete_all(fs, in, wb);
	release(fs, in, &wb->slot[0]);
	release(fs, in, &wb->slot[1]);
	return sticky(wb, e);
}

vy_err vy_wbehind_quiesce(vy_fs *fs, vy_inode *in, vy_error *e)
{
	struct vy_wbehind *wb = in->wb;
	if (!wb)
		return VY_OK;
	pthread_mutex_lock(&wb->lock);
	complete_all(fs, in, wb);
	vy_err rc = sticky(wb, e);
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

vy_err vy_wbehind_settle(vy_fs *fs, vy_inode *in, vy_error *e)
{
	struct vy_wbehind *wb = in->wb;
	if (!wb)
		return VY_OK;
	pthread_mutex_lock(&wb->lock);
	vy_err rc = settle_locked(fs, in, wb, e);
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

static struct vy_wbehind *fresh(void)
{
	struct vy_wbehind *wb = calloc(1, sizeof(*wb));
	if (!wb)
		return NULL;
	pthread_mutex_init(&wb->lock, NULL);
	wb->filling = -1;
	return wb;
}

vy_err vy_wbehind_write(vy_fs *fs, vy_inode *in, uint64_t off, const void *src, size_t len, bool *taken,
			vy_error *e)
{
	*taken = false;
	if (!in->wb) {
		if (len > VY_WB_SLOT / 2)
			return VY_OK;
		in->wb = fresh();
		if (!in->wb)
			return VY_OK; /* the direct path needs no state */
	}
	struct vy_wbehind *wb = in->wb;
	pthread_mutex_lock(&wb->lock);
	vy_err rc = sticky(wb, e);
	/* A mapped file's bytes change under programs too: with its slots
	 * kept, a slot copied long ago could land again over theirs after a
	 * takeover. */
	if (rc != VY_OK || len > VY_WB_SLOT / 2 || (fs->cfg.survive && in->maps))
		goto direct;
	if (wb->filling >= 0) {
		wb_slot *s = &wb->slot[wb->filling];
		/* A write that continues the slot's range, or lands inside it
		 * (a rewrite: the later bytes win), joins it. */
		if (off >= s->start && off <= s->start + s->len && off - s->start + len <= VY_WB_SLOT) {
			uint64_t at = off - s->start;
			memcpy((char *)s->buf.ptr + at, src, len);
			s->len = at + len > s->len ? at + len : s->len;
			published(fs, s);
			if (s->len == VY_WB_SLOT) {
				queue(fs, in, wb, s);
				wb->filling = -1;
			}
			*taken = true;
			goto out;
		}
		queue(fs, in, wb, s);
		wb->filling = -1;
	}
	/* The slot not in flight, else the one queued first, once done. */
	int k = !wb->slot[0].copy.inflight ? 0
		: !wb->slot[1].copy.inflight ? 1
		: wb->slot[0].order < wb->slot[1].order ? 0
						       : 1;
	wb_slot *s = &wb->slot[k];
	complete(fs, in, wb, s);
	rc = sticky(wb, e);
	if (rc != VY_OK || !acquire(fs, in, s))
		goto direct;
	if (s->kept)
		vy_wbk_begin(fs->wbk, s->kept, in->ino, off);
	memcpy(s->buf.ptr, src, len);
	s->start = off;
	s->len = len;
	published(fs, s);
	wb->filling = k;
	*taken = true;
	goto out;
direct:
	/* The caller's upload must come after every gathered byte. */
	if (rc == VY_OK)
		rc = settle_locked(fs, in, wb, e);
out:
	pthread_mutex_unlock(&wb->lock);
	return rc;
}

void vy_wbehind_fail(vy_fs *fs, vy_inode *in, vy_err rc, const vy_error *why)
{
	(void)fs;
	if (!in->wb && !(in->wb = fresh()))
		return; /* no memory: the log line is all that says so */
	pthread_mutex_lock(&in->wb->lock);
	fail_sticky(in->wb, in, rc, why);
	pthread_mutex_unlock(&in->wb->lock);
}

void vy_wbehind_free(vy_fs *fs, vy_inode *in)
{
	if (!in->wb)
		return;
	vy_wbehind_settle(fs, in, NULL);
	if (in->wb->err != VY_OK && fs->wbk) /* the file goes, and with it what its failed copies held */
		vy_wbk_drop_held(fs->wbk, in->ino);
	for (int k = 0; k < 2; k++) {
		vy_error why;
		if (vy_async_destroy(vy_fs_core(fs, in), &in->wb->slot[k].copy, &why) != VY_OK)
			vy_log(LOG_WARNING, "inode %llu: %s", (unsigned long long)in->ino, why.msg);
	}
	pthread_mutex_destroy(&in->wb->lock);
	free(in->wb);
	in->wb = NULL;
}
