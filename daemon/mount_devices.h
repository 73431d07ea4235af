/* A mount's devices, opened from its configuration: by the daemon as it
 * mounts, or by a standby successor before the death it waits for
 * (keeper/wire.h), so that the driver's start is behind it. */
#ifndef VY_MOUNT_DEVICES_H
#define VY_MOUNT_DEVICES_H

#include "config/config.h"
#include "core/core.h"
#include "core/device.h"

typedef struct vy_mount_devices {
	vy_device *dev[VY_DEVICES_MAX];
	unsigned n;
	char note[VY_NOTE_MAX]; /* why `auto` chose the host backend, or "" */
} vy_mount_devices;

/* The driver's environment `cfg` asks for (its JIT cache), set once,
 * before any device opens: vy_mount_devices_open sets it too, but a
 * thread that opens them must find it set. */
void vy_mount_devices_set_env(const vy_config *cfg);

/* Every device `cfg` names, or none (an error says why). */
vy_err vy_mount_devices_open(const vy_config *cfg, vy_mount_devices *out, vy_error *e);
void vy_mount_devices_close(vy_mount_devices *d);

/* The one line a mount says when it is ready (issue "newcomer 3"): where,
 * which backend and device, and how much memory files may take
 * (`budgets[i]`, device i's); on the host backend chosen by `auto`, why,
 * and that kernels need a GPU. No "Fix:": it is not an error. */
void vy_mount_devices_say(const vy_mount_devices *d, const uint64_t *budgets, const char *mountpoint, bool adopt,
			  char *out, size_t cap);

#endif
