/* Copies between devices: peer where possible, staged otherwise. */
#include "core/peer.h"
#include "core/checked.h"
#include "core/transfer.h"

vy_err vy_peer_pair(vy_core *const *cores, unsigned n, bool *direct, vy_error *e)
{
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < n; j++) {
			bool on = false;
			if (i != j) {
				vy_device *d = cores[i]->dev;
				vy_err rc = d->ops->peer_enable ? d->ops->peer_enable(d, cores[j]->dev, &on, e) : VY_OK;
				if (rc != VY_OK)
					return rc;
			}
			direct[i * n + j] = on;
		}
	return VY_OK;
}

static vy_err check(vy_store *s, vy_handle h, uint64_t off, uint64_t len, const char *what, vy_buffer_view *v,
		    vy_error *e)
{
	vy_err rc = vy_store_view(s, h, v, e);
	if (rc == VY_OK && !vy_range_within(off, len, v->len))
		rc = vy_fail(e, VY_ERANGE, "keep offset + length within the buffer",
			     "a peer copy's %s range (%llu bytes at %llu) is outside its %llu-byte buffer", what,
			     (unsigned long long)len, (unsigned long long)off, (unsigned long long)v->len);
	return rc;
}

/* Both buffers pinned: one driver copy on the destination's stream. */
static vy_err copy_direct(vy_core *to, vy_handle dst, uint64_t dst_off, vy_core *from, vy_handle src,
			  uint64_t src_off, uint64_t len, vy_error *e)
{
	vy_buffer_view dv, sv;
	vy_err rc = vy_store_pin_many(to->store, &dst, 1, &dv, e);
	if (rc != VY_OK)
		return rc;
	rc = vy_store_pin_many(from->store, &src, 1, &sv, e);
	if (rc != VY_OK) {
		vy_store_unpin_many(to->store, &dst, 1, NULL);
		return rc;
	}
	vy_stream *s = NULL;
	rc = vy_streams_acquire(&to->streams, &s, e);
	if (rc == VY_OK)
		rc = to->dev->ops->copy_peer(to->dev, s, dv.ptr + dst_off, from->dev, sv.ptr + src_off, len, e);
	if (s) {
		vy_error why;
		vy_err sync = vy_core_sync(to, s, &why);
		vy_error_keep_first(&rc, sync, e, &why);
		if (sync == VY_OK) /* a stream in an unknown state is not reused */
			vy_streams_release(&to->streams, s);
	}
	vy_store_unpin_many(from->store, &src, 1, NULL);
	vy_store_unpin_many(to->store, &dst, 1, NULL);
	if (rc == VY_OK) {
		vy_telemetry_add(to->tel, peer_copies, 1);
		vy_telemetry_add(to->tel, peer_bytes, len);
	}
	return rc;
}

/* Through one pinned buffer of the source's staging, a chunk at a time. */
static vy_err copy_staged(vy_core *to, vy_handle dst, uint64_t dst_off, vy_core *from, vy_handle src,
			  uint64_t src_off, uint64_t len, vy_error *e)
{
	uint64_t chunk = from->staging_chunk ? from->staging_chunk : (64ull << 20);
	if (chunk > len)
		chunk = len;
	vy_staging_buf b;
	vy_err rc = vy_staging_acquire(from->staging, (size_t)chunk, &b, e);
	if (rc != VY_OK)
		return rc;
	for (uint64_t at = 0; rc == VY_OK && at < len; at += chunk) {
		uint64_t n = len - at < chunk ? len - at : chunk;
		rc = vy_readback_pinned(from, src, src_off + at, b.ptr, n, e);
		if (rc == VY_OK)
			rc = vy_upload_pinned(to, dst, dst_off + at, b.ptr, n, e);
	}
	vy_staging_release(from->staging, &b);
	if (rc == VY_OK)
		vy_telemetry_add(to->tel, peer_staged_bytes, len);
	return rc;
}

vy_err vy_peer_copy(vy_core *to, vy_handle dst, uint64_t dst_off, vy_core *from, vy_handle src, uint64_t src_off,
		    uint64_t len, bool direct, vy_error *e)
{
	vy_buffer_view dv, sv;
	vy_err rc = check(to->store, dst, dst_off, len, "destination", &dv, e);
	if (rc == VY_OK)
		rc = check(from->store, src, src_off, len, "source", &sv, e);
	if (rc != VY_OK || len == 0)
		return rc;
	/* What is written must not land on the zeros a hole maps. */
	if (dv.holes && !vy_store_backed(to->store, dst, dst_off, len))
		return vy_fail(e, VY_EINTERNAL, "report this bug", "a peer copy into holes the caller did not back");
	if (direct && to->dev->ops->copy_peer)
		return copy_direct(to, dst, dst_off, from, src, src_off, len, e);
	return copy_staged(to, dst, dst_off, from, src, src_off, len, e);
}
