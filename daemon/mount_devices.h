/* A mount's devices, opened from its configuration: by the daemon as it
 * mounts, or by a standby successor before the death it waits for
 * (keeper/keeper.h), so that the driver's start is behind it. */
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

/* Every device `cfg` names, or none (an error says why). */
vy_err vy_mount_devices_open(const vy_config *cfg, vy_mount_devices *out, vy_error *e);
void vy_mount_devices_close(vy_mount_devices *d);

#endif
