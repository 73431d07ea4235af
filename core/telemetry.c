/* Telemetry counters: snapshot, reset and `key value` rendering. */
#include "core/telemetry.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define VY_KIND_IS_COUNTER_COUNTER true
#define VY_KIND_IS_COUNTER_GAUGE false

void vy_telemetry_init(vy_telemetry *t)
{
#define VY_INIT(name, kind, help) atomic_init(&t->name, 0);
	VY_TELEMETRY_FIELDS(VY_INIT)
#undef VY_INIT
}

void vy_telemetry_snapshot_take(const vy_telemetry *t, vy_telemetry_snapshot *out)
{
#define VY_LOAD(name, kind, help) \
	out->name = atomic_load_explicit(&t->name, memory_order_relaxed);
	VY_TELEMETRY_FIELDS(VY_LOAD)
#undef VY_LOAD
}

void vy_telemetry_reset(vy_telemetry *t)
{
#define VY_RESET(name, kind, help)                                                   \
	if (VY_KIND_IS_COUNTER_##kind)                                         \
		atomic_store_explicit(&t->name, 0, memory_order_relaxed);
	VY_TELEMETRY_FIELDS(VY_RESET)
#undef VY_RESET
}

void vy_telemetry_clear_gauges(vy_telemetry *t)
{
#define VY_CLEAR(name, kind, help)                                                   \
	if (!VY_KIND_IS_COUNTER_##kind)                                        \
		atomic_store_explicit(&t->name, 0, memory_order_relaxed);
	VY_TELEMETRY_FIELDS(VY_CLEAR)
#undef VY_CLEAR
}

uint64_t vy_telemetry_layout(void)
{
	static const char list[] =
#define VY_NAME(name, kind, help) #name " " #kind "\n"
		VY_TELEMETRY_FIELDS(VY_NAME)
#undef VY_NAME
		;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < sizeof(list) - 1; i++)
		h = (h ^ (uint8_t)list[i]) * 0x100000001b3ull;
	return h;
}

void vy_telemetry_snapshot_add(vy_telemetry_snapshot *a, const vy_telemetry_snapshot *b)
{
#define VY_TELEMETRY_SUM(name, kind, help) a->name += b->name;
	VY_TELEMETRY_FIELDS(VY_TELEMETRY_SUM)
#undef VY_TELEMETRY_SUM
}

size_t vy_telemetry_format(const vy_telemetry_snapshot *s, char *buf, size_t cap)
{
	size_t need = 0;
	if (cap)
		buf[0] = '\0';
#define VY_FORMAT(name, kind, help)                                                  \
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

/* Append like snprintf, tracking the length needed. */
static void put(char *buf, size_t cap, size_t *need, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *need, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *at = *need < cap ? buf + *need : NULL;
	int n = vsnprintf(at, at ? cap - *need : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*need += (size_t)n;
}

/* One family: NAME without the prefix and suffix; microsecond keys become
 * seconds, as Prometheus's base units ask. */
static void prom_family(char *buf, size_t cap, size_t *need, const char *key, bool counter, const char *help,
			uint64_t v)
{
	char name[96];
	size_t len = strlen(key);
	bool usec = len > 3 && !strcmp(key + len - 3, "_us");
	snprintf(name, sizeof(name), "vyrefs_%.*s%s%s", (int)(usec ? len - 3 : len), key, usec ? "_seconds" : "",
		 counter ? "_total" : "");
	put(buf, cap, need, "# HELP %s %s%s\n", name, help, usec ? " (seconds)" : "");
	put(buf, cap, need, "# TYPE %s %s\n", name, counter ? "counter" : "gauge");
	if (usec)
		put(buf, cap, need, "%s %" PRIu64 ".%06" PRIu64 "\n", name, v / 1000000, v % 1000000);
	else
		put(buf, cap, need, "%s %" PRIu64 "\n", name, v);
}

size_t vy_telemetry_format_prometheus(const vy_telemetry_snapshot *s, char *buf, size_t cap)
{
	size_t need = 0;
	if (cap)
		buf[0] = '\0';
#define VY_PROM(name, kind, help) prom_family(buf, cap, &need, #name, VY_KIND_IS_COUNTER_##kind, help, s->name);
	VY_TELEMETRY_FIELDS(VY_PROM)
#undef VY_PROM
	return need;
}
