/* Uploads and ranged readbacks through pinned staging, fused per buffer;
 * fills and copies on the device. */
#include "core/transfer.h"
#include "core/checked.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* One request of a batch, whichever its direction. */
typedef struct req {
	vy_handle handle;
	uint64_t offset, len;
	char *host;   /* source of an upload, target of a readback */
	size_t fused; /* index of the fused copy that carries it */
} req;

/* One driver copy's worth of a buffer: [start, end) of buffer `base`, laid
 * at `stage` in the batch's staging space. */
typedef struct fused {
	vy_handle handle;
	vy_dptr base;
	uint64_t start, end, stage;
} fused;

typedef enum direction { TO_DEVICE, TO_HOST } direction;

/* A validated, pinned batch. */
typedef struct batch {
	req *reqs;
	vy_handle *handles; /* pin list: handles[i] == reqs[i].handle */
	vy_buffer_view *views;
	fused *fused;
	size_t n, nfused;
	uint64_t staged; /* bytes of staging space */
	bool pinned;
} batch;

static void batch_free(vy_core *c, batch *b, vy_err *rc, vy_error *e)
{
	if (b->pinned) {
		vy_error err;
		vy_error_keep_first(rc, vy_store_unpin_many(c->store, b->handles, b->n, &err), e, &err);
	}
	free(b->reqs);
	free(b->handles);
	free(b->views);
	free(b->fused);
}

static vy_err oom(vy_error *e)
{
	return vy_fail(e, VY_ENOMEM, "free host memory or transfer fewer ranges at once",
		       "cannot allocate the transfer's bookkeeping");
}

/* Pin every request's buffer and check every range, empty ones too (an
 * unknown handle is an error at any length); only non-empty ones move. */
/* A write where a hole is would write the granule of zeros every hole
 * maps (core/view.h): the fs backs a range before it writes; this catches
 * a path that did not, before anything is written. */
static vy_err write_into_hole(vy_error *e, vy_handle h, uint64_t off, uint64_t len)
{
	return vy_fail(e, VY_EINTERNAL, "report this bug; nothing was written",
		       "a write of %llu bytes at offset %llu of resident handle %llu falls in a hole",
		       (unsigned long long)len, (unsigned long long)off, (unsigned long long)h);
}

static vy_err batch_prepare(vy_core *c, batch *b, const req *in, size_t n, direction dir, vy_error *e)
{
	const char *what = dir == TO_DEVICE ? "upload" : "readback";
	*b = (batch){0};
	if (n == 0)
		return VY_OK;
	for (size_t i = 0; i < n; i++)
		if (in[i].len && !in[i].host)
			return vy_fail(e, VY_EINVAL, "pass a host buffer for every non-empty range",
				       "%s request %zu has no host buffer", what, i);
	b->reqs = calloc(n, sizeof(*b->reqs));
	b->handles = calloc(n, sizeof(*b->handles));
	b->views = calloc(n, sizeof(*b->views));
	b->fused = calloc(n, sizeof(*b->fused));
	if (!b->reqs || !b->handles || !b->views || !b->fused)
		return oom(e);
	for (size_t i = 0; i < n; i++) {
		b->reqs[i] = in[i];
		b->handles[i] = in[i].handle;
	}
	b->n = n;
	vy_err rc = vy_store_pin_many(c->store, b->handles, b->n, b->views, e);
	if (rc != VY_OK)
		return rc;
	b->pinned = true;
	for (size_t k = 0; k < b->n; k++) {
		req *r = &b->reqs[k];
		if (!vy_range_within(r->offset, r->len, b->views[k].len))
			return vy_fail(e, VY_ERANGE, "keep offset + length within the buffer's size",
				       "%s of %llu bytes at offset %llu overruns resident handle %llu of %llu bytes",
				       what, (unsigned long long)r->len, (unsigned long long)r->offset,
				       (unsigned long long)r->handle, (unsigned long long)b->views[k].len);
		/* The pin's view says whether there are holes at all: most
		 * writes need no second look. */
		if (dir == TO_DEVICE && b->views[k].holes && !vy_store_backed(c->store, r->handle, r->offset, r->len))
			return write_into_hole(e, r->handle, r->offset, r->len);
	}
	return VY_OK;
}

static bool touches(const fused *f, vy_handle h, uint64_t start, uint64_t end)
{
	return f->handle == h && start <= f->end && end >= f->start;
}

/* Uploads fuse in caller order: a request joins the fused copy before it when
 * they touch, and fused copies that come to touch are joined in turn. Each
 * fused copy therefore carries a run of consecutive requests. */
static void fuse_in_order(batch *b)
{
	for (size_t k = 0; k < b->n; k++) {
		req *r = &b->reqs[k];
		uint64_t start = r->offset, end = r->offset + r->len; /* checked in prepare */
		if (r->len == 0)
			continue;
		if (b->nfused && touches(&b->fused[b->nfused - 1], r->handle, start, end)) {
			fused *f = &b->fused[b->nfused - 1];
			f->start = start < f->start ? start : f->start;
			f->end = end > f->end ? end : f->end;
		} else {
			b->fused[b->nfused++] = (fused){.handle = r->handle, .base = b->views[k].ptr,
							.start = start, .end = end};
		}
		r->fused = b->nfused - 1;
		while (b->nfused >= 2 &&
		       touches(&b->fused[b->nfused - 2], b->fused[b->nfused - 1].handle,
			       b->fused[b->nfused - 1].start, b->fused[b->nfused - 1].end)) {
			fused *prev = &b->fused[b->nfused - 2], *last = &b->fused[b->nfused - 1];
			prev->start = last->start < prev->start ? last->start : prev->start;
			prev->end = last->end > prev->end ? last->end : prev->end;
			for (size_t j = k + 1; j-- > 0;) {
				if (b->reqs[j].len == 0)
					continue;
				if (b->reqs[j].fused != b->nfused - 1)
					break;
				b->reqs[j].fused = b->nfused - 2;
			}
			b->nfused--;
		}
	}
}

static int by_handle_then_offset(const void *pa, const void *pb)
{
	const req *a = *(req *const *)pa, *b = *(req *const *)pb;
	if (a->handle != b->handle)
		return a->handle < b->handle ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return 0;
}

/* Readbacks fuse in sorted order: any ranges of one buffer that touch or
 * overlap become one copy, wherever they stand in the batch. */
static vy_err fuse_sorted(batch *b, vy_error *e)
{
	req **order = malloc(b->n * sizeof(*order));
	if (!order)
		return oom(e);
	size_t m = 0;
	for (size_t k = 0; k < b->n; k++)
		if (b->reqs[k].len)
			order[m++] = &b->reqs[k];
	qsort(order, m, sizeof(*order), by_handle_then_offset);
	for (size_t k = 0; k < m; k++) {
		req *r = order[k];
		uint64_t start = r->offset, end = r->offset + r->len;
		fused *f = b->nfused ? &b->fused[b->nfused - 1] : NULL;
		if (f && f->handle == r->handle && start <= f->end) {
			f->end = end > f->end ? end : f->end;
		} else {
			b->fused[b->nfused++] = (fused){.handle = r->handle, .base = b->views[r - b->reqs].ptr,
							.start = start, .end = end};
		}
		r->fused = b->nfused - 1;
	}
	free(order);
	return VY_OK;
}

static vy_err lay_out_staging(batch *b, vy_error *e)
{
	uint64_t at = 0;
	for (size_t j = 0; j < b->nfused; j++) {
		b->fused[j].stage = at;
		if (!vy_add_u64(at, b->fused[j].end - b->fused[j].start, &at))
			return vy_fail(e, VY_EOVERFLOW, "transfer fewer bytes at once",
				       "the batch's byte count overflows");
	}
	b->staged = at;
	return VY_OK;
}

/* The overlap of [lo, hi) with the round [a, b), or false if none. */
static bool clip(uint64_t lo, uint64_t hi, uint64_t a, uint64_t b, uint64_t *from, uint64_t *to)
{
	*from = lo > a ? lo : a;
	*to = hi < b ? hi : b;
	return *from < *to;
}

/* Where request k's bytes lie in staging space. */
static uint64_t req_stage(const batch *b, const req *r)
{
	const fused *f = &b->fused[r->fused];
	return f->stage + (r->offset - f->start);
}

/* Issue the driver copies of round [a, z) between `stage` and the device. */
static vy_err issue_round(vy_core *c, vy_stream *s, const batch *b, char *stage, uint64_t a, uint64_t z,
			  direction dir, vy_error *e)
{
	vy_device *d = c->dev;
	for (size_t j = 0; j < b->nfused; j++) {
		const fused *f = &b->fused[j];
		uint64_t lo, hi;
		if (!clip(f->stage, f->stage + (f->end - f->start), a, z, &lo, &hi))
			continue;
		vy_dptr dev = f->base + f->start + (lo - f->stage);
		vy_err rc = dir == TO_DEVICE ? d->ops->copy_htod(d, s, dev, stage + (lo - a), hi - lo, e)
					     : d->ops->copy_dtoh(d, s, stage + (lo - a), dev, hi - lo, e);
		if (rc != VY_OK)
			return rc;
		if (dir == TO_DEVICE) {
			vy_telemetry_add(c->tel, h2d_ops, 1);
			vy_telemetry_add(c->tel, h2d_bytes, hi - lo);
		} else {
			vy_telemetry_add(c->tel, d2h_ops, 1);
			vy_telemetry_add(c->tel, d2h_bytes, hi - lo);
		}
	}
	return VY_OK;
}

/* Copy the requests' bytes of round [a, z) between their host buffers and
 * staging. Uploads go in caller order, so the later of two overlapping
 * uploads wins. */
static void pack_round(const batch *b, char *stage, uint64_t a, uint64_t z, direction dir)
{
	for (size_t k = 0; k < b->n; k++) {
		const req *r = &b->reqs[k];
		if (r->len == 0)
			continue;
		uint64_t at = req_stage(b, r), lo, hi;
		if (!clip(at, at + r->len, a, z, &lo, &hi))
			continue;
		if (dir == TO_DEVICE)
			memcpy(stage + (lo - a), r->host + (lo - at), hi - lo);
		else
			memcpy(r->host + (lo - at), stage + (lo - a), hi - lo);
	}
}

/* Move the batch in rounds of at most one staging chunk, one fence each. */
static vy_err run_rounds(vy_core *c, const batch *b, direction dir, vy_error *e)
{
	vy_stream *s;
	vy_err rc = vy_streams_acquire(&c->streams, &s, e);
	if (rc != VY_OK)
		return rc;
	bool stream_ok = true;
	for (uint64_t a = 0; a < b->staged && rc == VY_OK;) {
		uint64_t z = b->staged - a > c->staging_chunk ? a + c->staging_chunk : b->staged;
		vy_staging_buf buf;
		rc = vy_staging_acquire(c->staging, (size_t)(z - a), &buf, e);
		if (rc != VY_OK)
			break;
		if (dir == TO_DEVICE)
			pack_round(b, buf.ptr, a, z, dir);
		rc = issue_round(c, s, b, buf.ptr, a, z, dir, e);
		/* Fence even after a failed issue: copies already queued may
		 * still read or write the staging buffer. */
		vy_error err;
		vy_err sync = vy_core_sync(c, s, &err);
		vy_error_keep_first(&rc, sync, e, &err);
		if (sync != VY_OK) {
			/* The copies' state is unknown: neither this buffer nor
			 * this stream may be used again. */
			stream_ok = false;
			break;
		}
		if (rc == VY_OK && dir == TO_HOST)
			pack_round(b, buf.ptr, a, z, dir);
		vy_staging_release(c->staging, &buf);
		a = z;
	}
	if (stream_ok)
		vy_streams_release(&c->streams, s);
	return rc;
}

static vy_err transfer(vy_core *c, const req *in, size_t n, direction dir, vy_error *e)
{
	batch b;
	vy_err rc = batch_prepare(c, &b, in, n, dir, e);
	if (rc == VY_OK && b.n > 0) {
		/* When every request is empty nothing is staged: no stream is
		 * taken and no driver call made. */
		if (dir == TO_DEVICE)
			fuse_in_order(&b);
		else
			rc = fuse_sorted(&b, e);
		if (rc == VY_OK)
			rc = lay_out_staging(&b, e);
		if (rc == VY_OK && b.staged > 0)
			rc = run_rounds(c, &b, dir, e);
	}
	batch_free(c, &b, &rc, e);
	return rc;
}

vy_err vy_upload_many(vy_core *c, const vy_upload *ups, size_t n, vy_error *e)
{
	req *in = calloc(n ? n : 1, sizeof(*in));
	if (!in)
		return oom(e);
	/* The cast drops const only to share `req`: uploads never write host. */
	for (size_t i = 0; i < n; i++)
		in[i] = (req){.handle = ups[i].handle, .offset = ups[i].offset, .len = ups[i].len,
			      .host = (char *)ups[i].src};
	vy_err rc = transfer(c, in, n, TO_DEVICE, e);
	free(in);
	return rc;
}

vy_err vy_readback_many(vy_core *c, const vy_readback *rbs, size_t n, vy_error *e)
{
	req *in = calloc(n ? n : 1, sizeof(*in));
	if (!in)
		return oom(e);
	for (size_t i = 0; i < n; i++)
		in[i] = (req){.handle = rbs[i].handle, .offset = rbs[i].offset, .len = rbs[i].len,
			      .host = rbs[i].dst};
	vy_err rc = transfer(c, in, n, TO_HOST, e);
	free(in);
	return rc;
}

vy_err vy_upload_whole(vy_core *c, vy_handle h, const void *src, uint64_t len, vy_error *e)
{
	vy_buffer_view v;
	vy_err rc = vy_store_view(c->store, h, &v, e);
	if (rc != VY_OK)
		return rc;
	if (len != v.len)
		return vy_fail(e, VY_EINVAL, "upload exactly the buffer's length, or upload at an offset",
			       "length drift: resident handle %llu holds %llu bytes but %llu were given",
			       (unsigned long long)h, (unsigned long long)v.len, (unsigned long long)len);
	vy_upload up = {.handle = h, .offset = 0, .src = src, .len = len};
	return vy_upload_many(c, &up, 1, e);
}

/* Pin `n` handles and check each range (those from `first_written` on are
 * written): the common start of every device-side operation. */
static vy_err device_op_begin(vy_core *c, const vy_handle *hs, const uint64_t *offs, const uint64_t *lens,
			      size_t n, size_t first_written, vy_buffer_view *views, const char *what, vy_error *e)
{
	vy_err rc = vy_store_pin_many(c->store, hs, n, views, e);
	if (rc != VY_OK)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if (!vy_range_within(offs[i], lens[i], views[i].len))
			rc = vy_fail(e, VY_ERANGE, "keep offset + length within the buffer's size",
				     "%s of %llu bytes at offset %llu overruns resident handle %llu of %llu bytes",
				     what, (unsigned long long)lens[i], (unsigned long long)offs[i],
				     (unsigned long long)hs[i], (unsigned long long)views[i].len);
		else if (i >= first_written && views[i].holes && !vy_store_backed(c->store, hs[i], offs[i], lens[i]))
			rc = write_into_hole(e, hs[i], offs[i], lens[i]);
		if (rc != VY_OK) {
			vy_store_unpin_many(c->store, hs, n, NULL);
			return rc;
		}
	}
	return VY_OK;
}

/* Sync, give the stream back, unpin; the first failure wins. */
static vy_err device_op_end(vy_core *c, vy_stream *s, const vy_handle *hs, size_t n, vy_err rc, vy_error *e)
{
	vy_error err;
	if (s) {
		vy_err sync = vy_core_sync(c, s, &err);
		vy_error_keep_first(&rc, sync, e, &err);
		if (sync == VY_OK)
			vy_streams_release(&c->streams, s);
	}
	vy_error_keep_first(&rc, vy_store_unpin_many(c->store, hs, n, &err), e, &err);
	return rc;
}

/* One device-side operation on [at, at+len) of one buffer, on a stream. */
typedef vy_err (*buffer_op)(vy_core *c, vy_stream *s, vy_dptr at, uint64_t len, void *arg, vy_error *e);

/* Pin h, check the range, run `op` on a stream unless there is nothing to
 * do, then sync and unpin. */
static vy_err on_buffer(vy_core *c, vy_handle h, uint64_t offset, uint64_t len, bool writes, const char *what,
			buffer_op op, void *arg, vy_error *e)
{
	vy_buffer_view v;
	vy_err rc = device_op_begin(c, &h, &offset, &len, 1, writes ? 0 : 1, &v, what, e);
	if (rc != VY_OK)
		return rc;
	vy_stream *s = NULL;
	if (len > 0) {
		rc = vy_streams_acquire(&c->streams, &s, e);
		if (rc == VY_OK)
			rc = op(c, s, v.ptr + offset, len, arg, e);
	}
	return device_op_end(c, s, &h, 1, rc, e);
}

static vy_err copy_to_host(vy_core *c, vy_stream *s, vy_dptr at, uint64_t len, void *dst, vy_error *e)
{
	vy_err rc = c->dev->ops->copy_dtoh(c->dev, s, dst, at, len, e);
	if (rc == VY_OK) {
		vy_telemetry_add(c->tel, d2h_ops, 1);
		vy_telemetry_add(c->tel, d2h_bytes, len);
	}
	return rc;
}

static vy_err copy_from_host(vy_core *c, vy_stream *s, vy_dptr at, uint64_t len, void *src, vy_error *e)
{
	vy_err rc = c->dev->ops->copy_htod(c->dev, s, at, src, len, e);
	if (rc == VY_OK) {
		vy_telemetry_add(c->tel, h2d_ops, 1);
		vy_telemetry_add(c->tel, h2d_bytes, len);
	}
	return rc;
}

static vy_err set_bytes(vy_core *c, vy_stream *s, vy_dptr at, uint64_t len, void *byte, vy_error *e)
{
	vy_err rc = c->dev->ops->memset8(c->dev, s, at, *(const uint8_t *)byte, len, e);
	if (rc == VY_OK) {
		vy_telemetry_add(c->tel, memset_ops, 1);
		vy_telemetry_add(c->tel, memset_bytes, len);
	}
	return rc;
}

vy_err vy_clear_past(vy_core *c, vy_handle h, uint64_t from, vy_error *e)
{
	vy_buffer_view v;
	vy_err rc = vy_store_pin_many(c->store, &h, 1, &v, e);
	if (rc != VY_OK)
		return rc;
	/* A single allocation is valid to its rounded-up size (alloc past
	 * len); a view's pieces are back to back over its len (alloc == len
	 * once it has no holes, and holes map the zero granule: only zeros
	 * are ever written there). */
	uint64_t end = v.holes ? v.len : v.alloc - v.lead > v.len ? v.alloc - v.lead : v.len;
	/* The lead (placement: bytes before byte 0) leaves too, where it has
	 * memory of its own (a hole's granule maps the zeros). */
	bool lead = v.lead && vy_store_backed(c->store, h, 0, 1);
	vy_stream *s = NULL;
	if (from < end || lead)
		rc = vy_streams_acquire(&c->streams, &s, e);
	if (rc == VY_OK && from < end)
		rc = set_bytes(c, s, v.ptr + from, end - from, &(uint8_t){0}, e);
	if (rc == VY_OK && lead)
		rc = set_bytes(c, s, v.ptr - v.lead, v.lead, &(uint8_t){0}, e);
	return device_op_end(c, s, &h, 1, rc, e);
}

vy_err vy_readback_pinned(vy_core *c, vy_handle h, uint64_t offset, void *dst, uint64_t len, vy_error *e)
{
	return on_buffer(c, h, offset, len, false, "readback", copy_to_host, dst, e);
}

vy_err vy_upload_pinned(vy_core *c, vy_handle h, uint64_t offset, const void *src, uint64_t len, vy_error *e)
{
	return on_buffer(c, h, offset, len, true, "upload", copy_from_host, (void *)src, e);
}

vy_err vy_fill(vy_core *c, vy_handle h, uint64_t offset, uint64_t len, uint8_t byte, vy_error *e)
{
	return on_buffer(c, h, offset, len, true, "fill", set_bytes, &byte, e);
}

vy_err vy_clear(vy_core *c, vy_handle h, vy_error *e)
{
	vy_buffer_view v;
	vy_err rc = vy_store_view(c->store, h, &v, e);
	return rc == VY_OK ? vy_fill(c, h, 0, v.len, 0, e) : rc;
}

static vy_err copy_d2d(vy_core *c, vy_stream *s, vy_dptr dst, vy_dptr src, uint64_t len, vy_error *e)
{
	vy_err rc = c->dev->ops->copy_dtod(c->dev, s, dst, src, len, e);
	if (rc == VY_OK) {
		vy_telemetry_add(c->tel, d2d_ops, 1);
		vy_telemetry_add(c->tel, d2d_bytes, len);
	}
	return rc;
}

vy_err vy_copy(vy_core *c, vy_handle src, uint64_t src_offset, vy_handle dst, uint64_t dst_offset, uint64_t len,
	       vy_error *e)
{
	vy_handle hs[2] = {src, dst};
	uint64_t offs[2] = {src_offset, dst_offset}, lens[2] = {len, len};
	vy_buffer_view v[2];
	vy_err rc = device_op_begin(c, hs, offs, lens, 2, 1, v, "copy", e);
	if (rc != VY_OK)
		return rc;
	vy_dptr from = v[0].ptr + src_offset, to = v[1].ptr + dst_offset;
	/* Nothing to move: no driver call. */
	if (len == 0 || from == to)
		return device_op_end(c, NULL, hs, 2, VY_OK, e);
	bool overlap = src == dst && (from < to ? to - from < len : from - to < len);
	vy_handle scratch = 0;
	vy_buffer_view sv;
	if (overlap) {
		/* The driver's copies may not overlap: bounce through a
		 * scratch buffer, which the pool then keeps for next time. */
		rc = vy_store_alloc(c->store, len, &scratch, e);
		if (rc == VY_OK)
			rc = vy_store_view(c->store, scratch, &sv, e);
		if (rc != VY_OK) {
			if (scratch)
				vy_store_free(c->store, scratch, NULL);
			return device_op_end(c, NULL, hs, 2, rc, e);
		}
	}
	vy_stream *s = NULL;
	rc = vy_streams_acquire(&c->streams, &s, e);
	if (rc == VY_OK && overlap) {
		rc = copy_d2d(c, s, sv.ptr, from, len, e);
		if (rc == VY_OK)
			rc = copy_d2d(c, s, to, sv.ptr, len, e);
	} else if (rc == VY_OK) {
		rc = copy_d2d(c, s, to, from, len, e);
	}
	rc = device_op_end(c, s, hs, 2, rc, e);
	if (scratch) {
		vy_error err;
		vy_error_keep_first(&rc, vy_store_free(c->store, scratch, &err), e, &err);
	}
	return rc;
}
