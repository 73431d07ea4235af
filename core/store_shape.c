/* The resident store's shapes: a buffer that grows in place (pieces mapped
 * at the end of its view), holes (granules that map the shared zeros),
 * backing holes, punching them, shrinking, and seeking data and holes
 * (core/view.h has the views; store.h each call's contract). */
#include "core/store_shape.h"
#include "core/store_impl.h"
#include "core/checked.h"

#include <stdlib.h>

/* v rounded up to the granularity (0 on overflow). */
static uint64_t granules(vy_store *s, uint64_t v)
{
	uint64_t g = s->dev->info.share_granularity, r;
	return vy_add_u64(v, g - 1, &r) ? r / g * g : 0;
}

/* A view with room for `len` bytes: made from the one allocation the
 * buffer was, or moved to a range twice `len` (most growths then keep the
 * address). Lock held. */
vy_err vy_store_view_room(vy_store *s, store_buffer *b, uint64_t len, vy_error *e)
{
	if (b->view.ptr && len <= b->view.reserved)
		return VY_OK;
	uint64_t rsv = len <= UINT64_MAX / 2 ? granules(s, len * 2) : 0;
	if (!rsv)
		return vy_fail(e, VY_EOVERFLOW, "allocate less", "a buffer's address range would overflow");
	if (!b->view.piece) {
		b->view.piece = malloc(VY_CHUNKS_MAX * sizeof(*b->view.piece));
		if (!b->view.piece)
			return vy_fail(e, VY_ENOMEM, "free host memory", "cannot record a growing buffer");
		b->view.n = 0;
		if (b->alloc) { /* the one allocation becomes piece 0 */
			b->view.piece[0] = (vy_piece){.off = 0, .p = b->ptr, .bytes = b->alloc};
			b->view.n = 1;
			b->view.len = b->alloc;
		}
	}
	vy_err rc = vy_view_move(s->dev, &b->view, &s->zeros, rsv, e);
	if (rc == VY_OK)
		b->ptr = b->view.ptr;
	return rc;
}

/* The bytes of [0, len) a buffer spans: its view's, or its allocation's. */
static uint64_t span_of(const store_buffer *b)
{
	return b->view.ptr ? b->view.len : b->alloc;
}

/* A byte of the buffer as an offset in its memory (the view's): past the
 * lead. Offsets near the top saturate; every caller clamps to the view. */
static uint64_t in_memory(const store_buffer *b, uint64_t off)
{
	return off > UINT64_MAX - b->lead ? UINT64_MAX : off + b->lead;
}

/* After a change of pieces: new generation, accounting, the view's length. */
static void changed(vy_store *s, store_buffer *b)
{
	b->len = span_of(b);
	b->gen = ++s->next_gen;
	vy_store_publish(s);
	vy_store_zeros_idle(s);
}

/* A live buffer that may change shape now, to `len` bytes in whole
 * granules (*want), or why not. Lock held. */
static vy_err shapeable(vy_store *s, vy_handle h, uint64_t len, store_buffer **out, uint64_t *want, vy_error *e)
{
	store_buffer *b = vy_store_live(s, h);
	if (!b)
		return vy_store_unknown(e, h);
	uint64_t mem;
	*want = vy_add_u64(len, b->lead, &mem) ? granules(s, mem) : 0;
	if (!*want)
		return vy_fail(e, VY_EOVERFLOW, "allocate less", "a %llu-byte buffer is too large", (unsigned long long)len);
	if (!vy_store_is_growable(s, b))
		return vy_fail(e, VY_ENOTSUP, "move the buffer to a larger one",
			       "resident handle %llu cannot grow in place", (unsigned long long)h);
	if (b->inflight)
		return vy_fail(e, VY_EBUSY, "wait for running work to finish", "resident handle %llu is in use",
			       (unsigned long long)h);
	*out = b;
	return VY_OK;
}

/* `want` bytes of memory from the pool or the driver; where that does not
 * fit, half as much, down to `need`. Lock held. */
static vy_err take_step(vy_store *s, uint64_t want, uint64_t need, vy_piece *out, vy_error *e)
{
	uint64_t g = s->dev->info.share_granularity, step = want < need ? need : want, resident;
	for (;;) {
		if (!vy_add_u64(s->resident, step, &resident))
			return vy_fail(e, VY_EOVERFLOW, "allocate less", "resident byte accounting would overflow");
		vy_err rc = vy_store_take_memory(s, step, &out->p, e);
		if (rc == VY_OK) {
			out->bytes = step;
			return VY_OK;
		}
		if (rc != VY_ENOSPC || step == need)
			return rc;
		uint64_t half = step / 2 / g * g;
		step = half > need ? half : need;
	}
}

static vy_err too_many_pieces(vy_error *e, vy_handle h)
{
	return vy_fail(e, VY_ENOSPC, "copy the file to a new one (cp), which holds it in one piece",
		       "resident handle %llu is in %u pieces, the most one buffer may have", (unsigned long long)h,
		       VY_CHUNKS_MAX);
}

/* Add piece `pc` (memory the store took) to b's view; on failure it goes
 * back. Lock held. */
static vy_err add_piece(vy_store *s, store_buffer *b, vy_piece pc, vy_error *e)
{
	uint64_t end;
	vy_err rc = vy_add_u64(pc.off, pc.bytes, &end) ? vy_store_view_room(s, b, end, e)
						    : vy_fail(e, VY_EOVERFLOW, "allocate less", "a buffer's size would overflow");
	if (rc == VY_OK && pc.off > span_of(b))
		rc = vy_store_zeros_ready(s, e);
	if (rc == VY_OK)
		rc = vy_view_add(s->dev, &b->view, &s->zeros, pc, e);
	if (rc != VY_OK) {
		vy_pool_put(&s->pool, pc.bytes, pc.p, NULL);
		return rc;
	}
	b->alloc += pc.bytes;
	s->resident += pc.bytes;
	return VY_OK;
}

vy_err vy_store_grow(vy_store *s, vy_handle h, uint64_t len, vy_buffer_view *out, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = NULL;
	uint64_t want;
	vy_err rc = shapeable(s, h, len, &b, &want, e);
	if (rc != VY_OK)
		goto out;
	uint64_t span = span_of(b);
	if (want > span) {
		uint32_t n = chunks_of(b);
		if (b->alloc && n >= VY_CHUNKS_MAX) {
			rc = too_many_pieces(e, h);
			goto out;
		}
		/* Steps of 1/8 of the buffer's memory keep the pieces few
		 * (about 70 up to 80 GiB) and the slack at most what the file
		 * system keeps anyway; past half the pieces, steps double it
		 * (holes count for nothing). Where a step
		 * does not fit, half of it is tried, down to what is needed, so
		 * a file can fill the budget to its last granule. */
		uint64_t step = n >= VY_CHUNKS_MAX / 2 ? b->alloc : granules(s, b->alloc / 8);
		vy_piece pc = {.off = span};
		rc = take_step(s, step, want - span, &pc, e);
		if (rc == VY_OK)
			rc = add_piece(s, b, pc, e);
		if (rc != VY_OK)
			goto out;
		changed(s, b);
		vy_telemetry_add(s->tel, grows, 1);
	}
	b->len = span_of(b);
	*out = vy_store_view_of(b);
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_err vy_store_alloc_holes(vy_store *s, uint64_t len, vy_handle *out, vy_error *e)
{
	return vy_store_alloc_holes_placed(s, len, 0, out, e);
}

vy_err vy_store_alloc_holes_placed(vy_store *s, uint64_t len, uint64_t lead, vy_handle *out, vy_error *e)
{
	uint64_t g = s->dev->info.share_granularity;
	if (!s->dev->share || !g)
		return vy_fail(e, VY_ENOTSUP, "allocate the buffer whole", "this device cannot map holes");
	if (lead > VY_STORE_LEAD_MAX || !vy_add_u64(len, lead, &len))
		return vy_fail(e, VY_EINVAL, "place byte 0 at most 64 KiB into a buffer",
			       "a buffer's byte 0 %llu bytes into its memory", (unsigned long long)lead);
	uint64_t want = granules(s, len);
	if (!want)
		return vy_fail(e, VY_EOVERFLOW, "allocate less", "a %llu-byte buffer is too large", (unsigned long long)len);
	store_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate a buffer record");
	pthread_mutex_lock(&s->lock);
	vy_err rc = VY_OK;
	if (s->next_id == UINT64_MAX)
		rc = vy_fail(e, VY_EOVERFLOW, "remount to start a new id space", "resident handle ids are exhausted");
	if (rc == VY_OK)
		rc = vy_store_zeros_ready(s, e);
	if (rc == VY_OK)
		rc = vy_store_view_room(s, b, want, e);
	if (rc == VY_OK)
		rc = vy_view_extend(s->dev, &b->view, &s->zeros, want, e);
	if (rc == VY_OK) {
		b->id = s->next_id;
		b->gen = ++s->next_gen;
		b->len = want;
		b->lead = (uint32_t)lead;
		if (!vy_u64map_put(&s->buffers, b->id, b))
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot record a new buffer");
	}
	if (rc != VY_OK) {
		vy_view_drop(s->dev, &b->view, &s->zeros, NULL);
		vy_store_zeros_idle(s);
		free(b->view.piece);
		free(b);
	} else {
		s->next_id++;
		s->live++;
		vy_store_publish(s);
		*out = b->id;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_err vy_store_extend(vy_store *s, vy_handle h, uint64_t len, vy_buffer_view *out, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = NULL;
	uint64_t want;
	vy_err rc = shapeable(s, h, len, &b, &want, e);
	if (rc == VY_OK && want > span_of(b)) {
		rc = vy_store_zeros_ready(s, e);
		if (rc == VY_OK)
			rc = vy_store_view_room(s, b, want, e);
		if (rc == VY_OK)
			rc = vy_view_extend(s->dev, &b->view, &s->zeros, want, e);
		if (rc == VY_OK)
			changed(s, b);
		else
			vy_store_zeros_idle(s);
	}
	if (rc == VY_OK)
		*out = vy_store_view_of(b);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_err vy_store_back(vy_store *s, vy_handle h, uint64_t off, uint64_t len, vy_store_zero_fn zero, void *ctx,
		     vy_buffer_view *out, vy_error *e)
{
	uint64_t g = s->dev->info.share_granularity;
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	vy_err rc = b ? VY_OK : vy_store_unknown(e, h);
	bool any = false;
	if (rc == VY_OK && b->view.ptr && b->view.holes) {
		off = in_memory(b, off);
		uint64_t end = off + len < off || off + len > b->view.len ? b->view.len : off + len;
		uint64_t at = off / g * g;
		while (rc == VY_OK && at < end) {
			uint64_t from = vy_view_next_hole(&b->view, at);
			if (from >= end)
				break;
			uint64_t to = vy_view_next_data(&b->view, from);
			if (to > b->view.len)
				to = b->view.len;
			/* Past half the pieces, a write backs the whole hole it
			 * falls in, so pieces stay under VY_CHUNKS_MAX however
			 * scattered the writes. */
			if (to > granules(s, end) && b->view.n < VY_CHUNKS_MAX / 2)
				to = granules(s, end);
			if (b->view.n >= VY_CHUNKS_MAX) {
				rc = too_many_pieces(e, h);
				break;
			}
			if (b->inflight) {
				rc = vy_fail(e, VY_EBUSY, "wait for running work to finish", "resident handle %llu is in use",
					     (unsigned long long)h);
				break;
			}
			/* New memory for the hole, zeroed: pooled memory holds
			 * another file's old bytes. */
			vy_piece pc = {.off = from};
			rc = take_step(s, to - from, to - from, &pc, e);
			if (rc == VY_OK) {
				rc = zero(ctx, pc.p, pc.bytes, e);
				if (rc != VY_OK)
					vy_pool_put(&s->pool, pc.bytes, pc.p, NULL);
			}
			if (rc == VY_OK)
				rc = add_piece(s, b, pc, e);
			any |= rc == VY_OK;
			at = to;
		}
		if (any)
			changed(s, b);
	}
	if (b && out)
		*out = vy_store_view_of(b);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_err vy_store_punch(vy_store *s, vy_handle h, uint64_t off, uint64_t len, vy_buffer_view *out, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	vy_err rc = b ? VY_OK : vy_store_unknown(e, h);
	/* Memory another process maps, or work uses, stays until it ends. */
	if (rc == VY_OK && b->view.ptr && !b->exports && !b->inflight) {
		off = in_memory(b, off);
		uint64_t end = off + len < off ? UINT64_MAX : off + len;
		bool any = false;
		for (uint32_t i = b->view.n; rc == VY_OK && i-- > 0;) {
			vy_piece pc = b->view.piece[i];
			if (pc.off < off || pc.off + pc.bytes > end)
				continue;
			rc = vy_store_zeros_ready(s, e);
			if (rc == VY_OK)
				rc = vy_view_remove(s->dev, &b->view, &s->zeros, i, false, 0, e);
			if (rc == VY_OK) {
				b->alloc -= pc.bytes;
				s->resident -= pc.bytes;
				any = true;
				rc = vy_store_give_back(s, b->untrusted, pc.p, pc.bytes, e);
			}
		}
		if (any)
			changed(s, b);
	}
	if (b && out)
		*out = vy_store_view_of(b);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_err vy_store_shrink(vy_store *s, vy_handle h, uint64_t len, vy_buffer_view *out, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	vy_err rc = b ? VY_OK : vy_store_unknown(e, h);
	/* Memory another process maps, or work uses, stays until it ends. */
	if (rc == VY_OK && b->view.ptr && !b->exports && !b->inflight) {
		uint64_t keep = granules(s, in_memory(b, len ? len : 1)), before = span_of(b);
		while (rc == VY_OK && b->view.n > 0) { /* pieces that start at or past keep */
			vy_piece pc = b->view.piece[b->view.n - 1];
			if (pc.off < keep)
				break;
			rc = vy_view_remove(s->dev, &b->view, &s->zeros, b->view.n - 1, true, keep, e);
			if (rc == VY_OK) {
				b->alloc -= pc.bytes;
				s->resident -= pc.bytes;
				rc = vy_store_give_back(s, b->untrusted, pc.p, pc.bytes, e);
			}
		}
		if (rc == VY_OK)
			rc = vy_view_shorten(s->dev, &b->view, &s->zeros, keep, e);
		if (span_of(b) != before)
			changed(s, b);
	}
	if (b && out)
		*out = vy_store_view_of(b);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

bool vy_store_backed(vy_store *s, vy_handle h, uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	bool yes = !b || !b->view.ptr || !b->view.holes || vy_view_backed(&b->view, in_memory(b, off), len);
	pthread_mutex_unlock(&s->lock);
	return yes;
}

uint64_t vy_store_seek(vy_store *s, vy_handle h, uint64_t off, bool data)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	uint64_t at = off;
	if (b && b->view.ptr) {
		at = data ? vy_view_next_data(&b->view, in_memory(b, off)) : vy_view_next_hole(&b->view, in_memory(b, off));
		if (at != UINT64_MAX)
			at -= b->lead; /* at or past in_memory(b, off): past the lead */
	} else if (b && !data) {
		at = off > b->len - b->lead ? off : b->len - b->lead; /* one allocation: all data */
	}
	pthread_mutex_unlock(&s->lock);
	return at;
}
