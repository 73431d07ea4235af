/* Asynchronous pinned copies finished by events (see async.h). */
#include "core/async.h"
#include "core/checked.h"

static vy_err start(vy_core *c, vy_async *a, vy_handle h, uint64_t off, uint64_t len, bool to_device,
		    void *host, vy_error *e)
{
	if (a->inflight)
		return vy_fail(e, VY_EINTERNAL, "report this bug", "an asynchronous copy started over one in flight");
	vy_buffer_view v;
	vy_err rc = vy_store_pin_many(c->store, &h, 1, &v, e);
	if (rc != VY_OK)
		return rc;
	if (!vy_range_within(off, len, v.len) || (to_device && v.holes && !vy_store_backed(c->store, h, off, len))) {
		vy_store_unpin_many(c->store, &h, 1, NULL);
		if (vy_range_within(off, len, v.len))
			return vy_fail(e, VY_EINTERNAL, "report this bug; nothing was written",
				       "a write of %llu bytes at offset %llu of resident handle %llu falls in a hole",
				       (unsigned long long)len, (unsigned long long)off, (unsigned long long)h);
		return vy_fail(e, VY_ERANGE, "keep offset + length within the buffer's size",
			       "a copy of %llu bytes at offset %llu overruns resident handle %llu of %llu bytes",
			       (unsigned long long)len, (unsigned long long)off, (unsigned long long)h,
			       (unsigned long long)v.len);
	}
	vy_device *d = c->dev;
	vy_stream *s = NULL;
	bool queued = false;
	rc = a->done ? VY_OK : d->ops->event_create(d, &a->done, e);
	if (rc == VY_OK)
		rc = vy_streams_acquire(&c->streams, &s, e);
	if (rc == VY_OK)
		rc = to_device ? d->ops->copy_htod(d, s, v.ptr + off, host, len, e)
			       : d->ops->copy_dtoh(d, s, host, v.ptr + off, len, e);
	if (rc == VY_OK) {
		queued = true;
		rc = d->ops->event_record(d, a->done, s, e);
	}
	if (rc == VY_OK) {
		vy_streams_release(&c->streams, s);
		if (to_device) {
			vy_telemetry_add(c->tel, h2d_ops, 1);
			vy_telemetry_add(c->tel, h2d_bytes, len);
		} else {
			vy_telemetry_add(c->tel, d2h_ops, 1);
			vy_telemetry_add(c->tel, d2h_bytes, len);
		}
		a->pinned = h;
		a->inflight = true;
		return VY_OK;
	}
	if (s) {
		/* Fence a copy that may have been queued before the host memory
		 * is touched again; a stream in an unknown state is not reused. */
		vy_error ignored;
		if (!queued || vy_core_sync(c, s, &ignored) == VY_OK)
			vy_streams_release(&c->streams, s);
	}
	vy_store_unpin_many(c->store, &h, 1, NULL);
	return rc;
}

vy_err vy_async_htod(vy_core *c, vy_async *a, vy_handle h, uint64_t off, const void *src, uint64_t len,
		     vy_error *e)
{
	return start(c, a, h, off, len, true, (void *)src, e);
}

vy_err vy_async_dtoh(vy_core *c, vy_async *a, vy_handle h, uint64_t off, void *dst, uint64_t len, vy_error *e)
{
	return start(c, a, h, off, len, false, dst, e);
}

vy_err vy_async_wait(vy_core *c, vy_async *a, vy_error *e)
{
	if (!a->inflight)
		return VY_OK;
	vy_err rc = c->dev->ops->event_sync(c->dev, a->done, e);
	vy_telemetry_add(c->tel, syncs, 1);
	a->inflight = false;
	vy_error why;
	vy_error_keep_first(&rc, vy_store_unpin_many(c->store, &a->pinned, 1, &why), e, &why);
	return rc;
}

vy_err vy_async_destroy(vy_core *c, vy_async *a, vy_error *e)
{
	vy_err rc = vy_async_wait(c, a, e);
	if (a->done) {
		vy_error why;
		vy_error_keep_first(&rc, c->dev->ops->event_destroy(c->dev, a->done, &why), e, &why);
		a->done = NULL;
	}
	return rc;
}
