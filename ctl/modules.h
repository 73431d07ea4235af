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

/* Makes the image of a built-in module (the std module: CUDA C compiled by
 * NVRTC) when a sequence first names a module that is not loaded: *image
 * and *log malloc'd (log may stay NULL). VY_ENOENT: no built-in of that
 * name. */
typedef vy_err (*vy_modules_maker)(void *ctx, const char *name, void **image, size_t *len, char **log, vy_error *e);
/* Set once, before sequences run. A module copied in under the same name
 * is used instead of the built-in while it is there. */
void vy_modules_set_maker(vy_modules *m, vy_modules_maker fn, void *ctx);

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
/* Whether a running sequence holds the module now. */
bool vy_modules_busy(vy_modules *m, const char *name);

/* A kernel for a sequence: found (a built-in module is made and loaded
 * first if need be), described, and its module held in use until
 * vy_modules_put. */
vy_err vy_modules_get(vy_modules *m, const char *module, const char *entry, vy_function_info *info, vy_error *e);
void vy_modules_put(vy_modules *m, const char *module);

#endif
