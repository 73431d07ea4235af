/* Telemetry counters: snapshot, reset and `key value` rendering. */
#include "core/telemetry.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define VY_KIND_IS_COUNTER_COUNTER true
#define VY_KIND_IS_COUNTER_GAUGE false

void vy_telemetry_init(vy_telemetry *t)
{
#define VY_INIT(name, kind) atomic_init(&t->name, 0);
	VY_TELEMETRY_FIELDS(VY_INIT)
#undef VY_INIT
}

void vy_telemetry_snapshot_take(const vy_telemetry *t, vy_telemetry_snapshot *out)
{
#define VY_LOAD(name, kind) \
	out->name = atomic_load_explicit(&t->name, memory_order_relaxed);
	VY_TELEMETRY_FIELDS(VY_LOAD)
#undef VY_LOAD
}

void vy_telemetry_reset(vy_telemetry *t)
{
#define VY_RESET(name, kind)                                                   \
	if (VY_KIND_IS_COUNTER_##kind)                                         \
		atomic_store_explicit(&t->name, 0, memory_order_relaxed);
	VY_TELEMETRY_FIELDS(VY_RESET)
#undef VY_RESET
}

size_t vy_telemetry_format(const vy_telemetry_snapshot *s, char *buf, size_t cap)
{
	size_t need = 0;
	if (cap)
		buf[0] = '\0';
#define VY_FORMAT(name, kind)                                                  \
	{                                                                      \
		char *at = need < cap ? buf + need : NULL;                     \
		int n = snprintf(at, at ? cap - need : 0, "%s %" PRIu64 "\n", \
				 #name, s->name);                              \
		if (n > 0)                                                     \
			need += (size_t)n;                                     \
	}
	VY_TELEMETRY_FIELDS(VY_FORMAT)
#undef VY_FORMAT
	return need;
}
