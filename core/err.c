/* Error messages with a Fix: hint, and their errno mapping. */
#include "core/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

vy_err vy_fail(vy_error *e, vy_err code, const char *fix, const char *fmt, ...)
{
	if (!e)
		return code;
	e->code = code;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	size_t used = (size_t)n < sizeof(e->msg) ? (size_t)n : sizeof(e->msg) - 1;
	/* The hint is what the user acts on: if the text above it was long,
	 * cut the text, never the hint; a hint too long for the whole message
	 * is cut itself but still closes its parenthesis. */
	char hint[VY_ERROR_MSG_MAX];
	int h = snprintf(hint, sizeof(hint), " (Fix: %s)", fix);
	size_t hlen = h < 0 ? 0 : (size_t)h;
	if (hlen >= sizeof(hint)) {
		hlen = sizeof(hint) - 1;
		hint[hlen - 1] = ')';
	}
	if (used + hlen >= sizeof(e->msg))
		used = sizeof(e->msg) - 1 - hlen;
	snprintf(e->msg + used, sizeof(e->msg) - used, "%s", hint);
	return code;
}

void vy_error_prefix(vy_error *e, const char *fmt, ...)
{
	if (!e)
		return;
	char prefix[VY_ERROR_MSG_MAX / 2];
	va_list ap;
	va_start(ap, fmt);
	int p = vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	size_t plen = p < 0 ? 0 : ((size_t)p < sizeof(prefix) ? (size_t)p : sizeof(prefix) - 1);
	const char *hint = strstr(e->msg, " (Fix: ");
	size_t hlen = hint ? strlen(hint) : 0, body = hint ? (size_t)(hint - e->msg) : strlen(e->msg);
	char out[VY_ERROR_MSG_MAX];
	size_t room = sizeof(out) - 1;
	if (plen + hlen > room)
		hlen = room > plen ? room - plen : 0;
	if (plen + body + hlen > room)
		body = room - plen - hlen;
	memcpy(out, prefix, plen);
	memcpy(out + plen, e->msg, body);
	memcpy(out + plen + body, hint ? hint : "", hlen);
	out[plen + body + hlen] = '\0';
	memcpy(e->msg, out, sizeof(out));
}

void vy_error_keep_first(vy_err *first, vy_err rc, vy_error *dst, const vy_error *src)
{
	if (rc == VY_OK || *first != VY_OK)
		return;
	*first = rc;
	if (dst && src)
		*dst = *src;
}

void vy_error_clear(vy_error *e)
{
	if (!e)
		return;
	e->code = VY_OK;
	e->msg[0] = '\0';
}

const char *vy_err_name(vy_err code)
{
	switch (code) {
	case VY_OK: return "ok";
	case VY_EINVAL: return "einval";
	case VY_ERANGE: return "erange";
	case VY_ENOENT: return "enoent";
	case VY_ENOSPC: return "enospc";
	case VY_EBUSY: return "ebusy";
	case VY_EOVERFLOW: return "eoverflow";
	case VY_ENOMEM: return "enomem";
	case VY_ENODEV: return "enodev";
	case VY_EDEVICE: return "edevice";
	case VY_ENOTSUP: return "enotsup";
	case VY_EINTERNAL: return "einternal";
	case VY_ETIMEDOUT: return "etimedout";
	case VY_EACCES: return "eacces";
	case VY_EINTR: return "eintr";
	case VY_EPERM: return "eperm";
	case VY_EMFILE: return "emfile";
	case VY_EXDEV: return "exdev";
	}
	return "unknown";
}

int vy_err_errno(vy_err code)
{
	switch (code) {
	case VY_OK: return 0;
	case VY_EINVAL: return EINVAL;
	case VY_ERANGE: return EINVAL;
	case VY_ENOENT: return ENOENT;
	case VY_ENOSPC: return ENOSPC;
	case VY_EBUSY: return EBUSY;
	case VY_EOVERFLOW: return EOVERFLOW;
	case VY_ENOMEM: return ENOMEM;
	case VY_ENODEV: return ENODEV;
	case VY_EDEVICE: return EIO;
	case VY_ENOTSUP: return EOPNOTSUPP;
	case VY_EINTERNAL: return EIO;
	case VY_ETIMEDOUT: return ETIMEDOUT;
	case VY_EACCES: return EACCES;
	case VY_EINTR: return EINTR;
	case VY_EPERM: return EPERM;
	case VY_EMFILE: return EMFILE;
	case VY_EXDEV: return EXDEV;
	}
	return EIO;
}
