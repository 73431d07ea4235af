/* -o key=value parsing into vy_core_options. */
#include "config/options.h"
#include "config/size.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define KEYS "backend, ordinal, host_memory, resident_budget, pool_budget, staging_cache"

static vy_err bad_value(vy_error *e, const char *key, const char *value, const char *allowed)
{
	return vy_fail(e, VY_EINVAL, allowed, "bad value '%s' for %s", value, key);
}

static vy_err size_value(const char *key, const char *value, uint64_t *out, vy_error *e)
{
	vy_error why;
	if (vy_size_parse(value, out, &why) != VY_OK)
		return bad_value(e, key, value, "write a whole number of bytes, optionally with K, M, G or T, e.g. 512M");
	return VY_OK;
}

vy_err vy_options_set(vy_core_options *o, const char *key, const char *value, vy_error *e)
{
	if (!strcmp(key, "backend")) {
		if (!vy_backend_parse(value, &o->device.backend))
			return bad_value(e, key, value, "use backend=auto, backend=cuda or backend=host");
		return VY_OK;
	}
	if (!strcmp(key, "ordinal")) {
		char *end = NULL;
		errno = 0;
		long v = isdigit((unsigned char)value[0]) ? strtol(value, &end, 10) : -1;
		if (v < 0 || errno || *end || v > INT_MAX)
			return bad_value(e, key, value, "use a device number from `nvidia-smi -L`, e.g. ordinal=0");
		o->device.ordinal = (int)v;
		return VY_OK;
	}
	if (!strcmp(key, "host_memory")) {
		uint64_t v;
		vy_err rc = size_value(key, value, &v, e);
		if (rc == VY_OK && v == 0)
			return bad_value(e, key, value, "give the host backend at least 1M, e.g. host_memory=4G");
		if (rc == VY_OK)
			o->device.host_memory = v;
		return rc;
	}
	if (!strcmp(key, "resident_budget")) {
		size_t len = strlen(value);
		if (len > 1 && value[len - 1] == '%') {
			char *end = NULL;
			errno = 0;
			unsigned long pct = isdigit((unsigned char)value[0]) ? strtoul(value, &end, 10) : 0;
			if (errno || end != value + len - 1 || pct < 1 || pct > 100)
				return bad_value(e, key, value, "use a percentage from 1% to 100%, or a size such as 8G");
			o->store.budget_bytes = 0;
			o->store.budget_percent = (unsigned)pct;
			return VY_OK;
		}
		uint64_t v;
		vy_err rc = size_value(key, value, &v, e);
		if (rc == VY_OK && v == 0)
			return bad_value(e, key, value, "use a percentage such as 90% or a size such as 8G");
		if (rc == VY_OK) {
			o->store.budget_bytes = v;
			o->store.budget_percent = 0;
		}
		return rc;
	}
	if (!strcmp(key, "pool_budget"))
		return size_value(key, value, &o->store.pool_cap, e);
	if (!strcmp(key, "staging_cache"))
		return size_value(key, value, &o->staging_cache, e);
	return vy_fail(e, VY_EINVAL, "use one of: " KEYS, "unknown option '%s'", key);
}

vy_err vy_options_parse(vy_core_options *o, const char *list, vy_error *e)
{
	char *copy = strdup(list);
	if (!copy)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot copy the option list");
	vy_core_options next = *o;
	vy_err rc = VY_OK;
	char *save = NULL;
	for (char *item = strtok_r(copy, ",", &save); item && rc == VY_OK; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		if (!eq) {
			rc = vy_fail(e, VY_EINVAL, "write options as key=value, e.g. -o backend=host",
				     "option '%s' has no value", item);
			break;
		}
		*eq = '\0';
		rc = vy_options_set(&next, item, eq + 1, e);
	}
	free(copy);
	if (rc == VY_OK)
		*o = next;
	return rc;
}
