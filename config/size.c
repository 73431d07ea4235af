/* Parsing and printing byte sizes. */
#include "config/size.h"
#include "core/checked.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define FIX_SIZE "write a whole number of bytes, optionally with K, M, G or T (powers of 1024), e.g. 512M"

vy_err vy_size_parse(const char *text, uint64_t *out, vy_error *e)
{
	const char *p = text;
	uint64_t v = 0;
	if (!isdigit((unsigned char)*p))
		return vy_fail(e, VY_EINVAL, FIX_SIZE, "'%s' is not a size", text);
	for (; isdigit((unsigned char)*p); p++)
		if (!vy_mul_u64(v, 10, &v) || !vy_add_u64(v, (uint64_t)(*p - '0'), &v))
			return vy_fail(e, VY_EOVERFLOW, FIX_SIZE, "size '%s' is too large", text);
	unsigned shift = 0;
	switch (toupper((unsigned char)*p)) {
	case 'K': shift = 10; p++; break;
	case 'M': shift = 20; p++; break;
	case 'G': shift = 30; p++; break;
	case 'T': shift = 40; p++; break;
	default: break;
	}
	if (shift && (!strcasecmp(p, "iB") || !strcasecmp(p, "B")))
		p += strlen(p);
	if (*p != '\0')
		return vy_fail(e, VY_EINVAL, FIX_SIZE, "'%s' is not a size", text);
	if (shift && v > (UINT64_MAX >> shift))
		return vy_fail(e, VY_EOVERFLOW, FIX_SIZE, "size '%s' is too large", text);
	*out = v << shift;
	return VY_OK;
}

void vy_size_format(uint64_t bytes, char *buf, unsigned long cap)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	unsigned u = 0;
	while (v >= 1024 && u < sizeof(units) / sizeof(units[0]) - 1) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, cap, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, cap, "%.1f %s", v, units[u]);
}
