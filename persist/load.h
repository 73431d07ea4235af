/* The state region's image sections and log records applied to a shadow
 * (persist/shadow.h): what a successor loads (replay.c) and what a standby
 * follows ahead (preload.c). */
#ifndef VY_PERSIST_LOAD_H
#define VY_PERSIST_LOAD_H
#include "persist/shadow.h"
#include "state/state.h"

typedef struct vy_load_ctx {
	vy_shadow *shadow;
	uint64_t records; /* applied */
} vy_load_ctx;

/* vy_state_section_fn and vy_state_rec_fn over a vy_load_ctx. */
vy_err vy_load_section(void *ctx, uint32_t type, const void *p, uint64_t len, vy_error *e);
vy_err vy_load_record(void *ctx, const vy_state_rec *r, vy_error *e);
#endif
