/* The module registry: kernel modules by name (a file in .vyre/modules/
 * without its extension), loaded through the runner (the launcher's
 * context, ctl/runner.h), each with its JIT log and the shape of the
 * kernels sequences asked for, so validation needs no round trip twice.
 * A module a running sequence uses cannot be unloaded or replaced (EBUSY).
 * Thread-safe. */
#ifndef VY_MODULES_H
#define VY_MODULES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/device.h"
#include "ctl/runner.h"

typedef struct vy_modules vy_modules;

vy_err vy_modules_open(vy_runner *runner, vy_modules **out, vy_error *e);
void vy_modules_close(vy_modules *m);

/* Load (or replace) module `name` from an image. The JIT log is kept for
 * vy_modules_log whether or not the load worked. */
vy_err vy_modules_load(vy_modules *m, const char *name, const void *image, size_t len, vy_error *e);
vy_err vy_modules_unload(vy_modules *m, const char *name, vy_error *e);
/* Record that module `name` could not be made (its source did not
 * compile): not loaded, with `log` (copied) as its log. */
vy_err vy_modules_failed(vy_modules *m, const char *name, const char *log, vy_error *e);
/* The JIT log of the last load of `name` (malloc'd), or NULL if none. */
char *vy_modules_log(vy_modules *m, const char *name);
bool vy_modules_loaded(vy_modules *m, const char *name);

/* A kernel for a sequence: found, described, and its module held in use
 * until vy_modules_put. */
vy_err vy_modules_get(vy_modules *m, const char *module, const char *entry, vy_function_info *info, vy_error *e);
void vy_modules_put(vy_modules *m, const char *module);

#endif
