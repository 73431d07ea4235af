/* Running a parsed sequence: look up and lock its files, validate every
 * step against them and the device (all or nothing), pin them, then hand
 * the sequence to the runner (ctl/runner.h): the launcher process of the
 * files' device runs the steps in order on one stream with one
 * synchronization, timed by device events. A device failure there costs only the files the sequence could
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
	/* Every byte of the file where a device can reach it, before any lock
	 * (a file whose bytes load from elsewhere: loaded). May be NULL. */
	vy_err (*ready)(void *ctx, void *file, vy_error *e);
	/* Make the file's buffer shareable with the runner's process (moving a
	 * small one to memory of its own), with the file held alone. */
	vy_err (*share)(void *ctx, void *file, vy_error *e);
	/* Hold a file against resizing for the run (called in ino order). */
	void (*lock)(void *ctx, void *file);
	void (*unlock)(void *ctx, void *file);
	/* Its buffer, size and device (an index into vy_ctl_devices), while
	 * locked (handle 0: an empty file), with every byte written to it on
	 * the device; or why the file's bytes cannot be trusted. */
	vy_err (*state)(void *ctx, void *file, vy_handle *handle, uint64_t *size, unsigned *dev, vy_error *e);
	/* Whether the sequence may write the file at `path` (may be NULL). */
	vy_err (*writable)(void *ctx, void *file, const char *path, vy_error *e);
	/* The device may have written the file: drop cached pages. */
	void (*written)(void *ctx, void *file, uint64_t ino);
	/* The file's reference is no longer needed. */
	void (*release)(void *ctx, void *file);
	/* Non-zero once the sequence should stop (its writer got a signal):
	 * it stops at its next step. May be NULL. */
	const _Atomic uint32_t *stop;
} vy_ctl_files;

/* The devices files live on: each with its core, modules and runner. A
 * step runs on the device of its files; a sequence that uses several
 * runs as consecutive parts, one per stretch of steps on one device (one
 * sync each); a copy between two devices is a peer copy (core/peer.h). */
typedef struct vy_ctl_device {
	vy_core *core;
	vy_modules *mods;
	vy_runner *runner;
} vy_ctl_device;

typedef struct vy_ctl_devices {
	const vy_ctl_device *dev;
	unsigned n;
	/* direct[i * n + j]: device i reaches j's memory (NULL: none does). */
	const bool *direct;
	/* How a user moves a file to device N, for a Fix (NULL: not said). */
	const char *move_hint;
} vy_ctl_devices;

/* The most parts one sequence may run as: a repeat whose steps change
 * device costs a part per stretch per turn. */
#define VY_CTL_MAX_PARTS 100000u

typedef struct vy_ctl_result {
	uint64_t steps;
	double device_us, wall_us;
} vy_ctl_result;

vy_err vy_ctl_run(const vy_ctl_devices *devs, const vy_ctl_files *files, const vy_ctl_plan *plan,
		  vy_ctl_result *res, vy_ctl_error *err);

#endif
