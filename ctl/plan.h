/* A parsed dispatch sequence: what the control language says, before any
 * buffer is looked up. Steps come in groups: a `repeat N ... end` block is a
 * group run N times; a statement outside one is a group of its own, run
 * once. */
#ifndef VY_PLAN_H
#define VY_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum vy_arg_kind {
	VY_ARG_BUFFER, /* PATH or PATH+OFFSET: the device pointer (8 bytes) */
	VY_ARG_SIZE,   /* size:PATH: the file's size (u64) */
	VY_ARG_SCALAR, /* u32: i32: u64: i64: f32: f64: */
} vy_arg_kind;

typedef struct vy_ctl_arg {
	vy_arg_kind kind;
	char *path;
	uint64_t offset;      /* PATH+OFFSET */
	unsigned char value[8]; /* a scalar's bytes */
	size_t size;          /* a scalar's width: 4 or 8 */
	const char *type;     /* "u32", ... for messages */
} vy_ctl_arg;

typedef enum vy_step_kind { VY_STEP_LAUNCH, VY_STEP_FILL, VY_STEP_COPY } vy_step_kind;

typedef struct vy_ctl_step {
	vy_step_kind kind;
	int line;
	/* launch: grid= and block=, or n=COUNT (vyrefs chooses them from the
	 * kernel's occupancy; grid=auto: at most one device-filling wave) */
	char *module, *entry;
	unsigned grid[3], block[3];
	uint64_t count;
	bool has_count, grid_auto;
	uint32_t shared;
	vy_ctl_arg *args;
	size_t nargs;
	/* fill / clear: path, byte, [offset [length]] */
	/* copy: path -> path2, [offset offset2 length] */
	char *path, *path2;
	uint8_t byte;
	uint64_t offset, offset2, length;
	bool has_offset, has_length;
} vy_ctl_step;

typedef struct vy_ctl_group {
	uint64_t times;
	size_t first, count; /* steps[first .. first+count) */
	int line;            /* of `repeat`, or of the statement */
} vy_ctl_group;

typedef struct vy_ctl_plan {
	vy_ctl_step *steps;
	size_t nsteps, cap_steps;
	vy_ctl_group *groups;
	size_t ngroups, cap_groups;
} vy_ctl_plan;

void vy_ctl_plan_free(vy_ctl_plan *p);
/* Steps the plan runs, repeats counted (saturating at UINT64_MAX). */
uint64_t vy_ctl_plan_steps(const vy_ctl_plan *p);

#endif
