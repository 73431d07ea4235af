/* Spans: exported allocations mapped back to back (see span.h). */
#include "core/span.h"
#include "core/checked.h"

#include <string.h>

vy_err vy_span_import(vy_device *d, const int *fds, const uint64_t *chunk, uint32_t n, vy_span *out, vy_error *e)
{
	memset(out, 0, sizeof(*out));
	if (!d->share)
		return vy_fail(e, VY_ENOTSUP, "use a backend that can share memory",
			       "this device cannot map another process's memory");
	if (n == 0 || n > VY_CHUNKS_MAX)
		return vy_fail(e, VY_EINVAL, "map a buffer as it was exported",
			       "a buffer of %u allocations (1 to %u are possible)", n, VY_CHUNKS_MAX);
	uint64_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		if (chunk[i] == 0 || !vy_add_u64(total, chunk[i], &total))
			return vy_fail(e, VY_EINVAL, "map a buffer as it was exported",
				       "allocation %u of the buffer has a bad size (%llu bytes)", i,
				       (unsigned long long)chunk[i]);
	vy_err rc = d->share->reserve(d, total, &out->ptr, e);
	if (rc != VY_OK)
		return rc;
	out->reserved = total;
	for (uint32_t i = 0; i < n && rc == VY_OK; i++) {
		rc = d->share->map_fd(d, fds[i], chunk[i], out->ptr + out->bytes, e);
		if (rc == VY_OK) {
			out->chunk[out->n++] = chunk[i];
			out->bytes += chunk[i];
		}
	}
	if (rc != VY_OK)
		vy_span_release(d, out, NULL);
	return rc;
}

vy_err vy_span_release(vy_device *d, vy_span *sp, vy_error *e)
{
	vy_err first = VY_OK;
	uint64_t off = sp->bytes;
	for (uint32_t i = sp->n; i-- > 0;) {
		off -= sp->chunk[i];
		vy_err rc = d->share->unmap(d, sp->ptr + off, sp->chunk[i], first == VY_OK ? e : NULL);
		if (first == VY_OK)
			first = rc;
	}
	if (sp->reserved) {
		vy_err rc = d->share->unreserve(d, sp->ptr, sp->reserved, first == VY_OK ? e : NULL);
		if (first == VY_OK)
			first = rc;
	}
	memset(sp, 0, sizeof(*sp));
	return first;
}
