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
	bool quiet;             /* started as mount(8) starts it (SOURCE MOUNTPOINT): a mount that
				 * succeeds prints nothing, as tmpfs's (tools compare the output) */
	char mount_flags[512];  /* ro, nosuid, nodev, ... for the kernel */
	/* survive=on: what the keeper's daemons are started with. */
	const char *settings;   /* -o key=value items as given, or NULL */
	const char *config;     /* -o config=FILE, or NULL */
} vy_mount_args;

/* The process's exit status: 0 after a clean unmount (or, detached, once
 * the mount is ready), 1 on failure. */
int vy_mount_run(const vy_mount_args *a);

/* Serve a mount: the first daemon mounts (adopt NULL) and, with a
 * keeper, makes the state region; a successor takes over the live
 * /dev/fuse fd and the region `st` it was handed (adopt.c), which this
 * closes. `keeper` NULL or unlinked: no keeper. The exit status. */
struct vy_keeper_link;
struct vy_keeper_adoption;
struct vy_state;
int vy_mount_serve(const vy_mount_args *a, struct vy_keeper_link *keeper, struct vy_keeper_adoption *adopt,
		   struct vy_state *st);

#endif
