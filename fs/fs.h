/* The filesystem's state: the namespace (ns/ns.h) and the mount's devices:
 * one core each (a file's buffer lives in the core of the device its inode
 * names), with a launcher and modules of its own; the control directory's
 * and the servers' state. The namespace's locking rules are in ns/ns.h.
 * A header alone: every fs/ file reads the state, fs/lifecycle.c makes
 * and ends it (above the files that read it). */
#ifndef VY_FS_H
#define VY_FS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "config/config.h"
#include "core/core.h"
#include "core/u64map.h"
#include "ctl/modules.h"
#include "fs/seqlog.h"
#include "ns/ns.h"

/* One device of the mount: its core, and the launcher process and kernel
 * modules of its context. */
typedef struct vy_fsdev {
	struct vy_fs *fs; /* back, for callbacks given a device */
	unsigned index;   /* in fs->dev */
	vy_core *core;
	vy_runner *runner; /* where sequences on this device run */
	vy_modules *modules;
} vy_fsdev;

typedef struct vy_fs {
	/* The namespace, its fields reached as the filesystem's own (fs->ns,
	 * fs->inodes ...); first, so vy_fs_ns() is the same address. */
	struct vy_ns;
	vy_fsdev dev[VY_DEVICES_MAX];
	unsigned ndev;
	/* direct[i * ndev + j]: device i reaches device j's memory (peer
	 * access, and peer=on): copies between them stay on the devices. */
	bool direct[VY_DEVICES_MAX * VY_DEVICES_MAX];
	vy_config cfg;
	uint64_t vyre_ino, modules_ino;
	struct vy_mapsrv *mapsrv; /* client mappings over .vyre/socket */
	_Atomic unsigned copy_runs; /* daemon copies with a thread left (sock/copysrv.c) */
	/* The map server's socket name (.vyre/socket shows it after an @);
	 * set by the process that starts the server (daemon/mount.c), so the
	 * filesystem never calls up into sock/. NULL: no server. */
	const char *(*socket_name)(struct vy_fs *fs);
	vy_seqlog seqlog; /* .vyre/log and the sequences' numbering */
	struct fuse_session *se;
	_Atomic unsigned wb_slots; /* write-behind slots held, all files */
	/* survive=on: the slots in memory the keeper holds (wbehind_keep.h);
	 * NULL: write-behind is off. */
	struct vy_wbk *wbk;
	_Atomic unsigned ra_chunks; /* readahead chunks held, all files */
	/* The kernel enforces POSIX ACLs (FUSE_POSIX_ACL, with FUSE_DONT_MASK:
	 * the umask is ours to apply); set at INIT, before any other request. */
	bool acl;
	/* survive=on (daemon/ sets them, .vyre/stats shows them): the keeper
	 * (0: none, or gone), the takeovers so far and the CLOCK_MONOTONIC
	 * time of the last daemon's death, and of its successor's steps: begun,
	 * devices open, namespace and memory made again (0: not a successor). */
	_Atomic int keeper_pid;
	_Atomic int standby_pid; /* the keeper's standby successor, ready (0: none) */
	uint64_t takeovers, death_ns;
	uint64_t started_ns, devices_ns, replayed_ns;
	/* survive=on with a keeper: hand the mount to a successor at a quiet
	 * point (.vyre/upgrade, daemon/upgrade.c); 0 or an errno. NULL: this
	 * mount cannot. */
	int (*upgrade)(struct vy_fs *fs);
	/* survive=on: the namespace's writer into the state region
	 * (persist/writer.h); NULL: nothing is kept. */
	struct vy_persist *persist;
	/* survive=on: the keeper's slots (daemon/keeper_memory.h), for the map
	 * server's connections and loaded modules; NULL: no keeper. */
	const struct vy_keep_sink *keep_sink;
	/* Where the mount is (daemon/ sets it), and its atime flags as
	 * mountinfo lists them (fs/atime.h); 0 until read: relatime's rule
	 * is not applied, strictatime's is. */
	const char *mountpoint;
	_Atomic unsigned atime_flags;
	/* backing=DIR (tier/tier.h, fs/backed.h); NULL: a volatile mount. */
	struct vy_tier *tier;
	pthread_t writeback; /* fs/backed_wb.c's thread, while tier is set */
	pthread_mutex_t wb_lock;
	pthread_cond_t wb_wake;
	bool wb_started, wb_stop;
} vy_fs;

/* Whether this mount keeps fds other than memory for a successor (a client
 * connection's socket, a module's image): a keeper to hold them and a
 * writer to keep their records. */
static inline bool vy_fs_keeps_fds(const vy_fs *fs)
{
	return fs->keep_sink && fs->persist;
}

/* Attribute and entry timeouts for the kernel (seconds). */
#define VY_ATTR_TIMEOUT 1.0

/* The namespace under the filesystem. */
static inline vy_ns *vy_fs_ns(vy_fs *fs)
{
	return (vy_ns *)(void *)fs; /* its first member */
}

/* The core that holds a file's buffer. */
static inline vy_core *vy_fs_core(const vy_fs *fs, const vy_inode *in)
{
	return fs->dev[in->dev].core;
}

/* The inode for `ino`, or NULL. Takes and drops ns. */
static inline vy_inode *vy_fs_inode(vy_fs *fs, uint64_t ino)
{
	return vy_ns_inode(vy_fs_ns(fs), ino);
}

#endif
