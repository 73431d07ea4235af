/* The tier's counters as .vyre/stats and .vyre/metrics show them (tier.h). */
#include "tier/tier.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

typedef struct field {
	const char *key;
	size_t at; /* offsetof in vy_tier_stats */
	bool gauge;
	const char *help;
} field;

#define F(k, g, h) {#k, offsetof(vy_tier_stats, k), g, h}
static const field fields[] = {
	F(hits, false, "reads whose bytes were all on the device"),
	F(misses, false, "reads that waited for bytes to load from the backing directory"),
	F(loads, false, "loads from the backing directory (a run of 2 MiB units each)"),
	F(loaded_bytes, false, "bytes loaded from the backing directory onto the device"),
	F(load_us, false, "microseconds spent loading"),
	F(direct_reads, false, "reads served from the backing directory: no room on the device"),
	F(evictions, false, "files whose device memory went back for others"),
	F(evicted_bytes, false, "device bytes given back by evictions"),
	F(writebacks, false, "files written back to the backing directory"),
	F(written_bytes, false, "bytes written back to the backing directory"),
	F(dirty_bytes, true, "bytes the backing directory does not hold yet (2 MiB units)"),
	F(errors, false, "the backing directory's errors: failed loads, listings and write-backs"),
	F(reloads, false, "files changed in the backing directory behind the mount, loaded again"),
};
#undef F

static void put(char *buf, size_t cap, size_t *at, int n)
{
	if (n > 0)
		*at += (size_t)n;
	(void)buf;
	(void)cap;
}

size_t vy_tier_stats_format(const vy_tier_stats *s, bool prometheus, char *buf, size_t cap)
{
	size_t at = 0;
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const field *f = &fields[i];
		uint64_t v = atomic_load((_Atomic uint64_t *)((const char *)s + f->at));
		char *dst = at < cap ? buf + at : NULL;
		size_t room = at < cap ? cap - at : 0;
		if (prometheus)
			put(buf, cap, &at,
			    snprintf(dst, room, "# HELP vyrefs_tier_%s%s %s\n# TYPE vyrefs_tier_%s%s %s\nvyrefs_tier_%s%s %" PRIu64 "\n",
				     f->key, f->gauge ? "" : "_total", f->help, f->key, f->gauge ? "" : "_total",
				     f->gauge ? "gauge" : "counter", f->key, f->gauge ? "" : "_total", v));
		else
			put(buf, cap, &at, snprintf(dst, room, "tier_%s %" PRIu64 "\n", f->key, v));
	}
	return at;
}
