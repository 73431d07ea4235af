/* survive=on: the .vyre/stats counters in memory the keeper holds, so a
 * successor's counts go on from the dead daemon's (issue "survive": the
 * region keeps "the counters of .vyre/stats").
 *
 * One memfd per mount: a header (a magic, a random key, the telemetry's
 * field list as vy_telemetry_layout, the devices by ordinal), then one
 * vy_telemetry per device, which that device's core counts into directly
 * (vy_core_options.counters): nothing is copied, so a death at any
 * instruction leaves every count made. The state region's header names
 * its keeper slot and key (vy_state_set_counters); a memfd there is these
 * counters only if its header holds that key, which no file's bytes can
 * (a slot another binary dropped may hold a file's memory later).
 *
 * A successor keeps every counter and zeroes the gauges (it sets them
 * from what it holds). Another build's field list, or other devices: the
 * counts start again from zero, logged. */
#ifndef VY_KEPT_COUNTERS_H
#define VY_KEPT_COUNTERS_H

#include "core/device.h"
#include "core/device_keep.h"
#include "core/telemetry.h"
#include "state/region.h"

typedef struct vy_kept_counters vy_kept_counters;

/* Fresh counters for these devices, all zero; NULL (logged) when no
 * memfd can be made: the cores count on their own, from zero after a
 * takeover. */
vy_kept_counters *vy_kept_counters_new(vy_device *const *dev, unsigned n);
/* A successor: the dead daemon's, mapped from their fd in `mem`; NULL
 * when none was kept or they do not fit (logged, and the region stops
 * naming them). */
vy_kept_counters *vy_kept_counters_adopt(vy_state *st, vy_keep_fds *mem, vy_device *const *dev, unsigned n);
/* Their fd out of `mem`, once the keeper's memory slots are counted
 * (vy_keeper_memory_init counts the slots `mem` holds as in use) and
 * before what is left there is dropped (vy_keeper_memory_settle): the
 * keeper's copy stays in its slot. NULL, or not adopted: nothing. */
void vy_kept_counters_claim(vy_kept_counters *k, vy_keep_fds *mem);

/* Device d's counters (d < n). */
vy_telemetry *vy_kept_counters_device(vy_kept_counters *k, unsigned d);

/* To the keeper, named in the region (a no-op for adopted ones, which are
 * there already). Failing (logged) costs only their survival. */
void vy_kept_counters_hand(vy_kept_counters *k, vy_state *st, const vy_keep_sink *sink);

/* Unmap: after every core counting into them is closed. NULL is fine. */
void vy_kept_counters_free(vy_kept_counters *k);

#endif
