/* The runner seam: where validated sequences run and kernel modules live.
 *
 * ctl/exec.c binds, validates and pins; then executing is one call here.
 * Two runners fill this table (as wlroots' backends fill theirs):
 * - local (ctl/run_local.c): in this process, over a device it is given.
 *   The launcher process runs sequences with it; unit tests use it directly.
 * - launcher (ctl/run_launcher.c): the daemon's stub for a launcher process
 *   of its own (launcher/), so a faulting or endless kernel takes down only
 *   that process, never the daemon's context and its files.
 * Modules belong to the runner, since they belong to one CUDA context. */
#ifndef VY_RUNNER_H
#define VY_RUNNER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "core/store.h"
#include "proto/seq.h"

typedef struct vy_runner vy_runner;

/* What a sequence did, for the reply and the telemetry. */
typedef struct vy_run_result {
	uint64_t steps, launches;
	uint64_t memset_ops, memset_bytes, d2d_ops, d2d_bytes, syncs;
	double device_us;
	int failed_step;   /* plan index of the step that failed, or -1 */
	bool process_lost; /* the launcher died or was killed: restarted */
} vy_run_result;

typedef struct vy_runner_ops {
	/* Load (or replace) a module; *log gets the JIT log (malloc'd, may be
	 * NULL), whether or not the load worked. */
	vy_err (*load)(vy_runner *r, const char *name, const void *image, size_t len, char **log, vy_error *e);
	vy_err (*unload)(vy_runner *r, const char *name, vy_error *e);
	vy_err (*kernel)(vy_runner *r, const char *module, const char *entry, vy_function_info *info, vy_error *e);
	/* Run a validated sequence; views[i] is seq->buffers[i], pinned.
	 * Once *stop (may be NULL) turns non-zero the sequence stops at its
	 * next step (VY_EINTR), or its launcher is killed if a kernel keeps
	 * it busy a second longer. */
	vy_err (*run)(vy_runner *r, const vy_seq *seq, const vy_buffer_view *views, const _Atomic uint32_t *stop,
		      vy_run_result *res, vy_error *e);
	/* Give back mappings of buffers freed or replaced since (without
	 * waiting for a running sequence). */
	void (*sweep)(vy_runner *r);
	void (*close)(vy_runner *r);
} vy_runner_ops;

struct vy_runner {
	const vy_runner_ops *ops;
	bool shares; /* runs in another process: buffers must be shareable */
};

/* In this process, over `dev` (which the caller keeps). */
vy_err vy_runner_local_open(vy_device *dev, vy_runner **out, vy_error *e);
/* Run over device pointers (ptrs[i] for seq->buffers[i]); *stop as for run. */
vy_err vy_runner_local_run_ptrs(vy_runner *r, const vy_seq *seq, const vy_dptr *ptrs, const _Atomic uint32_t *stop,
				vy_run_result *res, vy_error *e);

typedef struct vy_launcher_options {
	const char *exe;        /* this program, run with --launcher */
	vy_backend_kind backend; /* what the daemon opened: cuda or host */
	int ordinal;
	uint64_t host_memory;
	uint64_t timeout_ms;    /* a sequence's limit; 0: none */
	/* True once the mount is going away: running sequences stop. */
	bool (*exiting)(void *ctx);
	void *exiting_ctx;
} vy_launcher_options;

/* The daemon's stub for a launcher process, started on first use and again
 * after it died. */
vy_err vy_runner_launcher_open(vy_store *store, vy_telemetry *tel, const vy_launcher_options *o, vy_runner **out,
			       vy_error *e);
/* The launcher's pid now (0: none running), for tests and logs. */
int vy_runner_launcher_pid(vy_runner *r);

static inline void vy_runner_close(vy_runner *r)
{
	if (r)
		r->ops->close(r);
}

#endif
