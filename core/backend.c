/* Backend selection: auto | cuda | host. */
#include "core/backend.h"

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
