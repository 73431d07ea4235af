/* The core: one device, its resident store and pool, staging, streams and
 * telemetry, opened and closed together. Layers above hold a vy_core. */
#ifndef VY_CORE_H
#define VY_CORE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/device.h"
#include "core/staging.h"
#include "core/store.h"
#include "core/streams.h"
#include "core/telemetry.h"

#define VY_NOTE_MAX 640

typedef struct vy_core_options {
	vy_device_options device;
	vy_store_options store;
	uint64_t staging_cache; /* idle pinned bytes kept (default 128 MiB) */
	uint64_t staging_chunk; /* bytes staged per fence (default 64 MiB) */
	unsigned streams;       /* streams at most (default 8) */
	/* Where the counters live: NULL, the core's own (from zero); else the
	 * caller's, used as they are (survive=on: memory the keeper holds,
	 * so a successor's .vyre/stats go on from the dead daemon's). */
	vy_telemetry *counters;
} vy_core_options;

typedef struct vy_core {
	vy_device *dev;
	bool owns_dev;
	vy_telemetry *tel; /* own_tel, or vy_core_options.counters */
	vy_telemetry own_tel;
	vy_store *store;
	vy_staging *staging;
	vy_streams streams;
	uint64_t staging_chunk;
	char note[VY_NOTE_MAX]; /* why `auto` chose the host backend, or "" */
} vy_core;

void vy_core_options_default(vy_core_options *o);

/* Open the device the options name, and everything over it. */
vy_err vy_core_open(const vy_core_options *o, vy_core **out, vy_error *e);
/* The same over a device the caller opened and keeps (tests compare the
 * device's memory before and after). */
vy_err vy_core_attach(vy_device *dev, const vy_core_options *o, vy_core **out, vy_error *e);
/* Free every buffer, drain pool and staging, and close what the core owns. */
vy_err vy_core_close(vy_core *c, vy_error *e);

/* Make buffer `h` shareable with another process: its holes get memory
 * (vy_core_back), and a small buffer moves to memory of its own by a
 * device-to-device copy (vy_store_share). The caller keeps everything else
 * off the buffer meanwhile. */
vy_err vy_core_share(vy_core *c, vy_handle h, vy_error *e);
/* Memory, zeroed, for every hole of [off, off + len) of `h` (core/view.h);
 * `out` (may be NULL) is the buffer after. */
vy_err vy_core_back(vy_core *c, vy_handle h, uint64_t off, uint64_t len, vy_buffer_view *out, vy_error *e);

/* Sync a stream, counted as a sync point. */
vy_err vy_core_sync(vy_core *c, vy_stream *s, vy_error *e);

#endif
