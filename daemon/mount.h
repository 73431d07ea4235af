/* Mounting: open the core, mount, serve until unmounted or signalled, then
 * release every device byte. Without `foreground` the process detaches once
 * the mount is ready; errors until then still reach the terminal. */
#ifndef VY_MOUNT_H
#define VY_MOUNT_H

#include <stdbool.h>

#include "config/config.h"

typedef struct vy_mount_args {
	vy_config cfg;
	const char *source;     /* the mount's fsname, e.g. "vyrefs" */
	const char *mountpoint;
	bool foreground;
	bool debug;             /* FUSE's request trace; implies foreground */
	char mount_flags[512];  /* ro, nosuid, nodev, ... for the kernel */
} vy_mount_args;

/* The process's exit status: 0 after a clean unmount (or, detached, once
 * the mount is ready), 1 on failure. */
int vy_mount_run(const vy_mount_args *a);

#endif
