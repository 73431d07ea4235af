/* `-o key=value[,key=value...]` for the core's settings.
 *
 * Keys: backend (auto|cuda|host), ordinal, host_memory (size),
 * resident_budget (size, or percent of device memory such as 90%),
 * pool_budget (size; 0 turns the pool off), staging_cache (size).
 * Unknown keys and bad values are refused naming the key, the value and what
 * is allowed; the options are left as they were. */
#ifndef VY_OPTIONS_H
#define VY_OPTIONS_H

#include "core/core.h"

vy_err vy_options_set(vy_core_options *o, const char *key, const char *value, vy_error *e);

/* Apply a comma-separated list of key=value pairs, all or none. */
vy_err vy_options_parse(vy_core_options *o, const char *list, vy_error *e);

#endif
