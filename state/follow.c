/* Following a region another process writes (follow.h). */
#include "state/follow.h"

#include <stdlib.h>

static bool same_root(vy_state_root a, vy_state_root b)
{
	return a.set == b.set && (!a.set || (a.which == b.which && a.seq == b.seq));
}

vy_err vy_state_follow_open(const vy_state_fds *fds, vy_state_follow *f, vy_error *e)
{
	*f = (vy_state_follow){0};
	vy_err rc = vy_state_region_open(fds, &f->live, e);
	if (rc)
		return rc;
	f->ring = malloc(f->live.cap); /* pages only where copied to */
	if (!f->ring) {
		f->live.fds = (vy_state_fds){-1, {-1, -1}}; /* the caller's again */
		vy_state_region_close(&f->live);
		return vy_fail(e, VY_ENOMEM, "free memory", "a copy of the state log (%llu bytes)",
			       (unsigned long long)f->live.cap);
	}
	return VY_OK;
}

/* Bytes [from, to) of the live ring into the copy, at the same offsets. */
static void copy_ring(vy_state_follow *f, uint64_t from, uint64_t to)
{
	const vy_state *s = &f->live;
	while (from < to) {
		uint64_t off = from & s->mask, n = s->cap - off;
		if (n > to - from)
			n = to - from;
		memcpy(f->ring + off, s->ring + off, n);
		from += n;
	}
}

vy_err vy_state_follow_step(vy_state_follow *f, const vy_state_follow_fns *fns, void *ctx, vy_error *e)
{
	const vy_state *s = &f->live;
	vy_state_root root = vy_state_root_get(s);
	uint64_t head = vy_state_load_u64(&s->hdr->log_head), tail = vy_state_load_u64(&s->hdr->log_tail);
	bool fresh = !f->loaded || !same_root(root, f->root) || head > f->end || f->end > tail;
	if (!fresh && f->end == tail)
		return VY_OK; /* nothing new */
	uint64_t from = fresh ? head : f->end;
	f->steps++;
	f->loaded = false;
	if (head > tail || tail - head > s->cap || head % 8 || tail % 8)
		return vy_fail(e, VY_EBUSY, "follow again", "the state log moved under the copy");
	vy_err rc = VY_OK;
	if (fresh) {
		f->fresh++;
		fns->reset(ctx);
		if (root.set)
			rc = vy_state_image_load(root, s->fds.image[root.which], fns->section, ctx, &(uint64_t){0}, e);
	}
	if (rc == VY_OK)
		copy_ring(f, from, tail);
	if (!same_root(vy_state_root_get(s), root))
		return vy_fail(e, VY_EBUSY, "follow again", "a checkpoint ran during the step");
	if (rc)
		return rc;
	/* The copy, scanned as a successor scans the region. */
	vy_state_hdr h = {.log_head = from, .log_tail = tail};
	vy_state view = *s;
	view.hdr = &h;
	view.ring = f->ring;
	uint64_t before = fresh ? (root.set ? root.seq : 0) : f->seq;
	vy_state_scan scan;
	rc = vy_state_log_scan(&view, before, before, fns->record, ctx, &scan, e);
	if (rc)
		return rc;
	if (scan.stopped)
		return vy_fail(e, VY_EINVAL, "unmount and mount again if a takeover says the same", "following the state: %s",
			       scan.why);
	f->root = root;
	f->seq = scan.last_seq;
	f->end = scan.end;
	f->loaded = true;
	return VY_OK;
}

bool vy_state_follow_current(const vy_state_follow *f, const vy_state *s)
{
	return f->loaded && same_root(vy_state_root_get(s), f->root);
}

void vy_state_follow_close(vy_state_follow *f)
{
	if (f->live.base)
		vy_state_region_close(&f->live);
	free(f->ring);
	*f = (vy_state_follow){0};
}
