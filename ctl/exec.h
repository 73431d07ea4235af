/* Running a parsed sequence: look up and lock its files, validate every
 * step against them and the device (all or nothing), pin them, then hand
 * the sequence to the runner (ctl/runner.h): the launcher process runs the
 * steps in order on one stream with one synchronization, timed by device
 * events. A device failure there costs only the files the sequence could
 * write, and the reply names them. */
#ifndef VY_EXEC_H
#define VY_EXEC_H

#include "core/core.h"
#include "ctl/modules.h"
#include "ctl/parse.h"
#include "ctl/runner.h"

/* Most steps one sequence may run (repeats counted): a bound, so a typo
 * like `repeat 99999999999` is refused rather than running for days. */
#define VY_CTL_MAX_STEPS 10000000ull

/* How the executor reaches files; the filesystem provides it. */
typedef struct vy_ctl_files {
	void *ctx;
	/* A regular file by path (relative to the mount root): an opaque
	 * reference and its inode number; errors say what is wrong. */
	vy_err (*lookup)(void *ctx, const char *path, void **file, uint64_t *ino, vy_error *e);
	/* Make the file's buffer shareable with the runner's process (moving a
	 * small one to memory of its own), with the file held alone. */
	vy_err (*share)(void *ctx, void *file, vy_error *e);
	/* Hold a file against resizing for the run (called in ino order). */
	void (*lock)(void *ctx, void *file);
	void (*unlock)(void *ctx, void *file);
	/* Its buffer and size, while locked (handle 0: an empty file), with
	 * every byte written to it on the device; or why the file's bytes
	 * cannot be trusted. */
	vy_err (*state)(void *ctx, void *file, vy_handle *handle, uint64_t *size, vy_error *e);
	/* The device may have written the file: drop cached pages. */
	void (*written)(void *ctx, void *file, uint64_t ino);
	/* The file's reference is no longer needed. */
	void (*release)(void *ctx, void *file);
	/* Non-zero once the sequence should stop (its writer got a signal):
	 * it stops at its next step. May be NULL. */
	const _Atomic uint32_t *stop;
} vy_ctl_files;

typedef struct vy_ctl_result {
	uint64_t steps;
	double device_us, wall_us;
} vy_ctl_result;

vy_err vy_ctl_run(vy_core *core, vy_modules *mods, vy_runner *runner, const vy_ctl_files *files,
		  const vy_ctl_plan *plan, vy_ctl_result *res, vy_ctl_error *err);

#endif
