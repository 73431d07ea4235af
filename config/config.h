/* The effective configuration: embedded defaults, then an INI file, then
 * `-o key=value` options, each overriding the one before.
 *
 * Keys (docs/manual.md documents them for users, its table made from
 * config/options.c):
 *   backend          auto | cuda | host
 *   ordinal          which GPU
 *   devices          all | N[,N...]: one mount over these GPUs
 *   host_devices     devices the host backend presents (1..16)
 *   peer             cross-device copies device to device (on | off)
 *   host_memory      the host backend's capacity (size)
 *   resident_budget  size, or percent of device memory ("90%")
 *   pool_budget      idle pooled bytes (size; 0 turns the pool off)
 *   staging_cache    idle pinned host bytes (size)
 *   max_write        largest FUSE write (size, 4K..1M)
 *   page_cache       keep the kernel's page cache across opens (on | off)
 *   write_behind     gather small writes in pinned slots, copied to the
 *                    device asynchronously; errors at flush/fsync (on | off)
 *   readahead        copy the next bytes of a file read in order into pinned
 *                    memory ahead of the reads (on | off)
 *   idle_threads     idle FUSE workers that wait on the kernel at once once
 *                    requests come one at a time, 2 to 10 (2); the others
 *                    sleep, last in first out. 0: libfuse's own loop, where
 *                    every idle worker always waits there
 *   kernel_cache     the CUDA JIT cache for modules (size; 0 turns it off)
 *   allow_other      let other users reach the mount (on | off)
 *   vyre_dir         .vyre in the root's listings (hidden | visible)
 *   launch_timeout   a control sequence's time limit (60s; 500ms, 2m, 0:
 *                    none): past it its launcher is killed
 *   survive          a keeper holds the mount through the daemon's death
 *                    and starts a successor (on | off; off)
 *   survive_standby  that successor is started ahead, its devices open
 *                    (on | off; on)
 *   backing          a directory the mount shows and keeps (docs/tier.md):
 *                    files load from it when used, dirty bytes go back
 *   writeback_delay  how long a file's written bytes wait before they are
 *                    written back to the backing directory (5s)
 * A bad key or value is refused naming the key, the value and what is
 * allowed, and leaves the configuration as it was. */
#ifndef VY_CONFIG_H
#define VY_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#define VY_CONFIG_DEFAULT_FILE "/etc/vyrefs.conf"
#define VY_CONFIG_SECTION "vyrefs"
/* The most devices one mount serves. */
#define VY_DEVICES_MAX 16

typedef struct vy_config {
	vy_core_options core;
	uint64_t max_write;
	bool page_cache;
	bool write_behind;
	bool readahead;
	unsigned idle_threads;
	uint64_t kernel_cache;
	bool allow_other;
	bool vyre_dir_visible; /* .vyre in the root's listings (vyre_dir=visible) */
	uint64_t launch_timeout_ms; /* 0: no limit */
	uint64_t xattr_budget;      /* bytes of extended attributes, all files */
	uint64_t max_inodes;        /* files, directories and links at most */
	char kernel_cflags[256];    /* NVRTC options for every .cu module */
	bool pool_budget_set; /* pool_budget given (else device memory / 32) */
	/* devices=: all of them, or this list of ordinals (none: `ordinal`). */
	bool devices_all;
	unsigned ndevices;
	int devices[VY_DEVICES_MAX];
	unsigned host_devices; /* the host backend presents 0..host_devices-1 */
	bool peer;             /* device-to-device copies between devices */
	bool survive;          /* a keeper process (keeper/) holds the mount */
	bool survive_set;      /* survive= given: no fallback to off (daemon/mount.c) */
	uint64_t survive_log;  /* the state region's log: a power of two, 64K..1G */
	bool survive_standby;  /* the keeper starts each successor ahead, its devices open */
	char backing[4096];    /* backing=DIR (an absolute path), or "": a volatile mount */
	uint64_t writeback_delay_ms; /* dirty bytes wait this long before going back to DIR */
} vy_config;

void vy_config_defaults(vy_config *c);

/* Set one key. On failure `c` is unchanged. */
vy_err vy_config_set(vy_config *c, const char *key, const char *value, vy_error *e);

/* Apply a comma-separated list of key=value pairs, all or none. */
vy_err vy_config_parse_list(vy_config *c, const char *list, vy_error *e);

/* Apply an INI file: keys at the top or in a [vyrefs] section, `#` or `;`
 * comments. All or none; errors name the file and line. */
vy_err vy_config_load_file(vy_config *c, const char *path, vy_error *e);

/* The configuration as an INI file that vy_config_load_file reads back to
 * the same configuration. Returns the length needed, like snprintf. */
size_t vy_config_format_ini(const vy_config *c, char *buf, size_t cap);

#endif
