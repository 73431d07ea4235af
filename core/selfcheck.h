/* The core self-check: open the backend, move known bytes through every path
 * (upload, ranged and fused readback, fill, device copy, pool reuse), verify
 * each byte and the accounting, close, and confirm the device's memory is back
 * where it started. `vyrefs --self-check` runs it. */
#ifndef VY_SELFCHECK_H
#define VY_SELFCHECK_H

#include <stdio.h>

#include "core/core.h"

/* Prints progress and a telemetry summary to `out`; VY_OK when every check
 * passed, else the first failure in `e`. */
vy_err vy_selfcheck(const vy_core_options *opt, FILE *out, vy_error *e);

#endif
