/* Helpers over any backend's table: warm streams, close, allocation sizes
 * (backend.c picks the backend). */
#include "core/device.h"
#include "core/slab.h"

vy_err vy_device_warm_streams(vy_device *d, unsigned n, vy_error *e)
{
	enum { MAX = 64 };
	vy_stream *s[MAX];
	unsigned made = 0;
	vy_err rc = VY_OK;
	for (; made < n && made < MAX; made++) {
		rc = d->ops->stream_create(d, &s[made], e);
		if (rc != VY_OK)
			break;
	}
	while (made-- > 0) {
		vy_error err;
		vy_error_keep_first(&rc, d->ops->stream_destroy(d, s[made], &err), e, &err);
	}
	return rc;
}

void vy_device_close(vy_device *d)
{
	if (d)
		d->ops->close(d);
}

uint64_t vy_device_alloc_size(const vy_device *d, uint64_t len)
{
	uint64_t g = d->info.share_granularity;
	if (len > 0 && len <= d->slab_max)
		return vy_slab_size(len); /* a slot of its class */
	if (!g || (len < g && !d->whole_granules))
		return len;
	uint64_t rem = len % g;
	if (!rem)
		return len;
	return len > UINT64_MAX - (g - rem) ? 0 : len + (g - rem);
}

uint64_t vy_device_largest_fit(const vy_device *d, uint64_t room)
{
	uint64_t g = d->share ? d->info.share_granularity : 0;
	if (g && room >= g)
		return room / g * g;
	if (!g || !d->whole_granules)
		return room; /* below a granule, what is asked (cuMemAlloc, a host slot) */
	uint64_t fit = room < d->slab_max ? room : d->slab_max, cls = 0;
	for (uint64_t c = VY_SLAB_MIN; c && c <= fit; c <<= 1)
		cls = c; /* a slot of class c takes c bytes */
	return cls;
}
