/* Backend selection: auto | cuda | host. */
#include "core/device.h"

#include <stdio.h>
#include <string.h>

int vy_backend_parse(const char *s, vy_backend_kind *out)
{
	if (!strcmp(s, "auto"))
		*out = VY_BACKEND_AUTO;
	else if (!strcmp(s, "cuda"))
		*out = VY_BACKEND_CUDA;
	else if (!strcmp(s, "host"))
		*out = VY_BACKEND_HOST;
	else
		return 0;
	return 1;
}

const char *vy_backend_name(vy_backend_kind k)
{
	switch (k) {
	case VY_BACKEND_AUTO: return "auto";
	case VY_BACKEND_CUDA: return "cuda";
	case VY_BACKEND_HOST: return "host";
	}
	return "unknown";
}

vy_err vy_device_open(const vy_device_options *opt, vy_device **out, char *note, size_t note_cap, vy_error *e)
{
	if (note && note_cap)
		note[0] = '\0';
	switch (opt->backend) {
	case VY_BACKEND_CUDA:
		return vy_device_cuda_open(opt->ordinal, out, e);
	case VY_BACKEND_HOST:
		return vy_device_host_open(opt->host_memory, out, e);
	case VY_BACKEND_AUTO:
		break;
	}
	vy_error why;
	vy_error_clear(&why);
	vy_err rc = vy_device_cuda_open(opt->ordinal, out, &why);
	if (rc != VY_ENODEV) {
		/* A GPU is there: use it, or report why it failed. */
		if (rc != VY_OK && e)
			*e = why;
		return rc;
	}
	if (note && note_cap)
		snprintf(note, note_cap, "no usable CUDA device, using the host backend: %s", why.msg);
	return vy_device_host_open(opt->host_memory, out, e);
}

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
	if (!g || len < g)
		return len;
	uint64_t rem = len % g;
	if (!rem)
		return len;
	return len > UINT64_MAX - (g - rem) ? 0 : len + (g - rem);
}
