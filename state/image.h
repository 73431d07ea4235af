/* Checkpoint images A and B and loading a region.
 *
 * A checkpoint is written whole into the image the root does not name
 * (begin, add sections, publish), under the same lock as appends; publish
 * stores the root (the commit: one 8-byte store) and then drops every log
 * record it holds. A daemon killed at any instruction leaves either the old
 * root, its image untouched, and the log as it was, or the new root: a
 * successor loads the same state either way. */
#ifndef VY_STATE_IMAGE_H
#define VY_STATE_IMAGE_H

#include "state/log.h"

/* The streaming hash's state, kept in the writer: no allocation. */
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

typedef struct vy_state_image_writer {
	vy_state *s;
	unsigned which;    /* the image being written: not the published one */
	uint64_t bytes;    /* written so far, header included */
	uint32_t sections;
	XXH3_state_t hash; /* of everything after the header */
	bool failed;       /* a write failed: publish refuses */
} vy_state_image_writer;

/* Start a checkpoint in the inactive image (emptied first). */
vy_err vy_state_image_begin(vy_state *s, vy_state_image_writer *w, vy_error *e);
/* One typed section of the caller's (a table of inodes, of names, ...). */
vy_err vy_state_image_add(vy_state_image_writer *w, uint32_t type, const void *p, uint64_t len, vy_error *e);
/* Seal it at the last committed seq, publish it, drop the log it holds.
 * The caller appends nothing between begin and publish (the same lock). */
vy_err vy_state_image_publish(vy_state_image_writer *w, vy_error *e);

typedef vy_err (*vy_state_section_fn)(void *ctx, uint32_t type, const void *p, uint64_t len, vy_error *e);

typedef struct vy_state_loaded {
	vy_state_root root; /* the image loaded (root.set false: none) */
	uint64_t sections;
	vy_state_scan log;  /* the records replayed after it */
} vy_state_loaded;

/* The image `root` names, read from `fd` into private memory and checked
 * whole (as below) before its first section is handed over. */
vy_err vy_state_image_load(vy_state_root root, int fd, vy_state_section_fn fn, void *ctx, uint64_t *sections,
			   vy_error *e);
/* What a successor does: the published image (magic, format, seq equal to
 * the root's, checksum, every section's bounds, all checked before the
 * first section is handed over: a bad image is refused whole, VY_EINVAL),
 * then each log record after its seq, in order. Callbacks may be NULL. */
vy_err vy_state_load(vy_state *s, vy_state_section_fn on_section, vy_state_rec_fn on_record, void *ctx,
		     vy_state_loaded *out, vy_error *e);

#endif
