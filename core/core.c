/* Opening and closing the core's parts in order. */
#include "core/core.h"

#include <stdlib.h>
#include <string.h>

void vy_core_options_default(vy_core_options *o)
{
	*o = (vy_core_options){
		.device = {.backend = VY_BACKEND_AUTO},
		.store = {.budget_bytes = 0, .pool_cap = VY_POOL_CAP_DEFAULT},
		.staging_cache = 128ull << 20,
		.staging_chunk = 64ull << 20,
		.streams = 8,
	};
}

vy_err vy_core_attach(vy_device *dev, const vy_core_options *o, vy_core **out, vy_error *e)
{
	if (o->staging_chunk < VY_STAGING_MIN_BUCKET)
		return vy_fail(e, VY_EINVAL, "use a staging chunk of at least 4 KiB",
			       "staging chunk of %llu bytes is too small", (unsigned long long)o->staging_chunk);
	vy_core *c = calloc(1, sizeof(*c));
	if (!c)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the core");
	c->dev = dev;
	c->staging_chunk = o->staging_chunk;
	c->tel = o->counters ? o->counters : &c->own_tel;
	if (!o->counters)
		vy_telemetry_init(c->tel);
	vy_err rc = vy_store_open(dev, c->tel, &o->store, &c->store, e);
	if (rc != VY_OK)
		goto fail;
	rc = vy_staging_open(dev, c->tel, o->staging_cache, &c->staging, e);
	if (rc != VY_OK)
		goto fail_store;
	rc = vy_streams_init(&c->streams, dev, o->streams, e);
	if (rc != VY_OK)
		goto fail_staging;
	*out = c;
	return VY_OK;
fail_staging:
	vy_staging_close(c->staging, NULL);
fail_store:
	vy_store_close(c->store, NULL);
fail:
	free(c);
	return rc;
}

vy_err vy_core_open(const vy_core_options *o, vy_core **out, vy_error *e)
{
	vy_device *dev;
	char note[VY_NOTE_MAX];
	vy_err rc = vy_device_open(&o->device, &dev, note, sizeof(note), e);
	if (rc != VY_OK)
		return rc;
	rc = vy_core_attach(dev, o, out, e);
	if (rc != VY_OK) {
		vy_device_close(dev);
		return rc;
	}
	(*out)->owns_dev = true;
	memcpy((*out)->note, note, sizeof(note));
	return VY_OK;
}

vy_err vy_core_close(vy_core *c, vy_error *e)
{
	if (!c)
		return VY_OK;
	vy_err first = VY_OK;
	vy_error err;
	/* Streams first: nothing can be queued once buffers go. */
	vy_err rc = vy_streams_destroy(&c->streams, &err);
	if (rc != VY_OK && first == VY_OK) {
		first = rc;
		if (e)
			*e = err;
	}
	rc = vy_store_close(c->store, &err);
	if (rc != VY_OK && first == VY_OK) {
		first = rc;
		if (e)
			*e = err;
	}
	rc = vy_staging_close(c->staging, &err);
	if (rc != VY_OK && first == VY_OK) {
		first = rc;
		if (e)
			*e = err;
	}
	if (c->owns_dev)
		vy_device_close(c->dev);
	free(c);
	return first;
}

vy_err vy_core_sync(vy_core *c, vy_stream *s, vy_error *e)
{
	vy_telemetry_add(c->tel, syncs, 1);
	return c->dev->ops->stream_sync(c->dev, s, e);
}

/* One device operation on a stream of the core, then a wait for it. */
static vy_err on_stream_and_wait(vy_core *c, vy_err (*op)(vy_core *, vy_stream *, vy_dptr, vy_dptr, uint64_t, vy_error *),
				 vy_dptr dst, vy_dptr src, uint64_t len, vy_error *e)
{
	vy_stream *s;
	vy_err rc = vy_streams_acquire(&c->streams, &s, e);
	if (rc != VY_OK)
		return rc;
	rc = op(c, s, dst, src, len, e);
	vy_error err;
	vy_err sync = vy_core_sync(c, s, &err);
	vy_error_keep_first(&rc, sync, e, &err);
	if (sync == VY_OK)
		vy_streams_release(&c->streams, s);
	return rc;
}

static vy_err copy_op(vy_core *c, vy_stream *s, vy_dptr dst, vy_dptr src, uint64_t len, vy_error *e)
{
	vy_err rc = c->dev->ops->copy_dtod(c->dev, s, dst, src, len, e);
	if (rc == VY_OK) {
		vy_telemetry_add(c->tel, d2d_ops, 1);
		vy_telemetry_add(c->tel, d2d_bytes, len);
	}
	return rc;
}

static vy_err zero_op(vy_core *c, vy_stream *s, vy_dptr dst, vy_dptr src, uint64_t len, vy_error *e)
{
	(void)src;
	vy_err rc = c->dev->ops->memset8(c->dev, s, dst, 0, len, e);
	if (rc == VY_OK) {
		vy_telemetry_add(c->tel, memset_ops, 1);
		vy_telemetry_add(c->tel, memset_bytes, len);
	}
	return rc;
}

/* The move's copy (vy_store_share). */
static vy_err share_copy(void *ctx, vy_dptr dst, vy_dptr src, uint64_t len, vy_error *e)
{
	return on_stream_and_wait(ctx, copy_op, dst, src, len, e);
}

/* New memory for a hole: zeros (vy_store_back). */
static vy_err hole_zero(void *ctx, vy_dptr p, uint64_t len, vy_error *e)
{
	return on_stream_and_wait(ctx, zero_op, p, 0, len, e);
}

vy_err vy_core_back(vy_core *c, vy_handle h, uint64_t off, uint64_t len, vy_buffer_view *out, vy_error *e)
{
	return vy_store_back(c->store, h, off, len, hole_zero, c, out, e);
}

vy_err vy_core_share(vy_core *c, vy_handle h, vy_error *e)
{
	/* Another process maps every byte: holes get memory first. */
	vy_err rc = vy_core_back(c, h, 0, UINT64_MAX, NULL, e);
	return rc == VY_OK ? vy_store_share(c->store, h, share_copy, c, e) : rc;
}
