/* A store's buffers as layouts a keeper's fds can make again
 * (core/store_keep.h); the device keeps the fds (core/device_keep.h). */
#include "core/store_keep.h"
#include "core/store_impl.h"
#include "core/checked.h"

#include <stdlib.h>

#define FIX_LAYOUT "adopt only layouts vy_store_keep_layout wrote, with the fds the keeper handed; report this bug"

vy_err vy_store_keep(vy_store *s, const vy_keep_sink *sink, vy_error *e)
{
	if (!s->dev->keep)
		return vy_fail(e, VY_ENOTSUP, "mount with survive=off, or use a backend that keeps memory (host, or cuda with VMM)",
			       "this device cannot keep its memory for a successor daemon");
	pthread_mutex_lock(&s->lock);
	vy_err rc = VY_OK;
	if (s->kept)
		rc = vy_fail(e, VY_EINVAL, "call vy_store_keep once per store", "this store's memory is kept already");
	/* Idle memory made before would be memory of the old sizes (cuda:
	 * cuMemAlloc, no fd): it goes. */
	if (rc == VY_OK)
		rc = vy_pool_drain(&s->pool, e);
	if (rc == VY_OK)
		rc = s->dev->keep->start(s->dev, sink, e);
	if (rc == VY_OK) {
		s->kept = true;
		s->sink = sink;
		if (s->zeros.p)
			s->dev->keep->forget(s->dev, s->zeros.p);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_err vy_store_keep_layout(vy_store *s, vy_handle h, vy_keep_layout *out, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	vy_err rc = b ? VY_OK : vy_store_unknown(e, h);
	if (rc == VY_OK) {
		out->len = b->len;
		out->n = 0;
		out->lead = b->lead;
	}
	for (uint32_t i = 0; rc == VY_OK && i < chunks_of(b); i++) {
		vy_piece c = chunk_at(b, i);
		vy_keep_piece *k = &out->piece[i];
		*k = (vy_keep_piece){.off = c.off, .bytes = c.bytes};
		if (!s->dev->keep || !s->dev->keep->where(s->dev, c.p, &k->slot, &k->at) || !k->slot)
			rc = vy_fail(e, VY_ENOTSUP,
				     "see the log for why the keeper did not take it; the file's bytes do not survive a daemon's death",
				     "resident handle %llu: its %llu bytes at %llu are memory the keeper does not hold",
				     (unsigned long long)h, (unsigned long long)c.bytes, (unsigned long long)c.off);
		else
			out->n = i + 1;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Whether `l` is one allocation (no view): as vy_store_alloc makes it, or
 * as vy_store_share moves a buffer of a granule or less (the granule). */
static bool is_plain(vy_store *s, const vy_keep_layout *l)
{
	uint64_t g = s->dev->share ? s->dev->info.share_granularity : 0, bytes = l->piece[0].bytes;
	return l->n == 1 && l->piece[0].off == 0 && l->len <= bytes &&
	       (bytes == vy_device_alloc_size(s->dev, l->len) || (g && bytes == g));
}

/* The layout's shape, before anything is taken: pieces sorted, apart,
 * inside the buffer; a view's in whole granules. */
static vy_err check_layout(vy_store *s, const vy_keep_layout *l, bool plain, vy_error *e)
{
	uint64_t g = s->dev->info.share_granularity, at = 0, end;
	if (l->n > VY_CHUNKS_MAX || l->lead > VY_STORE_LEAD_MAX || l->len <= l->lead)
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT,
			       "a layout of %u pieces and %llu bytes, byte 0 at %u (at most %u pieces, 1 byte past byte 0)",
			       l->n, (unsigned long long)l->len, l->lead, VY_CHUNKS_MAX);
	if (!plain && (!s->dev->share || !g || l->len % g))
		return vy_fail(e, VY_EINVAL, FIX_LAYOUT,
			       "a layout of %llu bytes in %u pieces is neither one allocation nor a view of whole granules",
			       (unsigned long long)l->len, l->n);
	for (uint32_t i = 0; i < l->n; i++) {
		const vy_keep_piece *k = &l->piece[i];
		if (k->bytes == 0 || k->slot == 0 || k->zero || !vy_add_u64(k->off, k->bytes, &end) || k->off < at ||
		    (!plain && (end > l->len || k->off % g || k->bytes % g)))
			return vy_fail(e, VY_EINVAL, FIX_LAYOUT,
				       "piece %u (%llu bytes at %llu, keeper slot %u) overlaps another, is empty, or is not "
				       "inside the %llu-byte buffer in whole granules",
				       i, (unsigned long long)k->bytes, (unsigned long long)k->off, k->slot,
				       (unsigned long long)l->len);
		at = end;
	}
	return VY_OK;
}

/* Give back what an adoption that failed had taken. Lock held. */
static void undo(vy_store *s, store_buffer *b, const vy_dptr *made, uint32_t n, vy_keep_fds *fds)
{
	vy_view_drop(s->dev, &b->view, &s->zeros, NULL);
	vy_store_zeros_idle(s);
	while (n-- > 0)
		s->dev->keep->unadopt(s->dev, made[n], fds);
	free(b->view.piece);
	free(b);
}

/* Map the adopted pieces in a view of l->len bytes, holes between. */
static vy_err make_view(vy_store *s, store_buffer *b, const vy_keep_layout *l, const vy_dptr *made, vy_error *e)
{
	uint64_t covered = 0;
	for (uint32_t i = 0; i < l->n; i++)
		covered += l->piece[i].bytes;
	vy_err rc = covered < l->len ? vy_store_zeros_ready(s, e) : VY_OK;
	if (rc == VY_OK)
		rc = vy_store_view_room(s, b, l->len, e);
	for (uint32_t i = 0; rc == VY_OK && i < l->n; i++)
		rc = vy_view_add(s->dev, &b->view, &s->zeros,
				 (vy_piece){.off = l->piece[i].off, .p = made[i], .bytes = l->piece[i].bytes}, e);
	if (rc == VY_OK)
		rc = vy_view_extend(s->dev, &b->view, &s->zeros, l->len, e);
	b->alloc = covered;
	b->len = b->view.len;
	return rc;
}

vy_err vy_store_keep_adopt(vy_store *s, const vy_keep_layout *l, vy_keep_fds *fds, vy_handle *out, vy_error *e)
{
	bool plain = is_plain(s, l);
	vy_err rc = check_layout(s, l, plain, e);
	if (rc != VY_OK)
		return rc;
	store_buffer *b = calloc(1, sizeof(*b));
	vy_dptr *made = calloc(VY_CHUNKS_MAX, sizeof(*made));
	if (!b || !made) {
		free(b);
		free(made);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot record an adopted buffer");
	}
	pthread_mutex_lock(&s->lock);
	uint32_t n = 0;
	uint64_t resident = s->resident;
	if (!s->kept)
		rc = vy_fail(e, VY_EINVAL, "call vy_store_keep before adopting (then new memory is kept too)",
			     "this store does not keep its memory");
	else if (s->next_id == UINT64_MAX)
		rc = vy_fail(e, VY_EOVERFLOW, "remount to start a new id space", "resident handle ids are exhausted");
	while (rc == VY_OK && n < l->n) {
		const vy_keep_piece *k = &l->piece[n];
		rc = s->dev->keep->adopt(s->dev, k->slot, k->at, k->bytes, fds, &made[n], e);
		if (rc != VY_OK)
			break;
		n++; /* adopted: undone with the rest on any failure */
		if (!vy_add_u64(resident, k->bytes, &resident))
			rc = vy_fail(e, VY_EOVERFLOW, FIX_LAYOUT, "resident byte accounting would overflow");
	}
	if (rc == VY_OK && plain) {
		b->ptr = made[0];
		b->alloc = l->piece[0].bytes;
		b->len = l->len;
	} else if (rc == VY_OK) {
		rc = make_view(s, b, l, made, e);
	}
	if (rc == VY_OK) {
		b->id = s->next_id;
		b->gen = ++s->next_gen;
		b->lead = l->lead;
		/* A client of the dead daemon may hold fds of this memory: it
		 * never goes to the pool, so it never holds another file's. */
		b->untrusted = true;
		if (!vy_u64map_put(&s->buffers, b->id, b))
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot record an adopted buffer");
	}
	if (rc != VY_OK) {
		undo(s, b, made, n, fds);
	} else {
		s->next_id++;
		s->resident = resident;
		s->live++;
		vy_store_publish(s);
		*out = b->id;
	}
	pthread_mutex_unlock(&s->lock);
	free(made);
	return rc;
}
