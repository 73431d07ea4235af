/* The filesystem's state: the inode table, the namespace lock, and the
 * mount's devices: one core each (a file's buffer lives in the core of the
 * device its inode names), with a launcher and modules of its own.
 *
 * Locking: `ns` guards the inode table, every directory's entries and each
 * inode's nlink (written under ns, read anywhere), nlookup and opens (what
 * decides an inode's lifetime). Each inode's rwlock guards its data (size,
 * buffer, xattrs) and may be held across device work; its `meta` mutex
 * guards mode, owner and times and is never held for long, so namespace
 * changes never wait on a file's data. Order: ns, then inode rwlocks (two
 * in ascending ino), then meta. */
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
#include "fs/dir.h"
#include "fs/xattr.h"

/* VY_MODULE: a file in .vyre/modules/, kept in host memory (it is code for
 * the JIT, not a GPU buffer). VY_SPECIAL: a FIFO, character or block device
 * or socket: mode and rdev only, no buffer; the kernel gives it its
 * behaviour and never opens it through vyrefs. */
typedef enum vy_kind { VY_DIR, VY_FILE, VY_SYMLINK, VY_VIRTUAL, VY_MODULE, VY_SPECIAL } vy_kind;

/* The files of .vyre/ whose content vyrefs makes. */
typedef enum vy_virtual {
	VY_V_NONE, VY_V_CTL, VY_V_LOG, VY_V_STATS, VY_V_METRICS, VY_V_DEVICE, VY_V_CONFIG,
	VY_V_MODLOG, /* modules/NAME.log: the JIT log of module NAME (target) */
	VY_V_SOCKET, /* the name of the socket client programs map files through */
} vy_virtual;

typedef struct vy_inode {
	uint64_t ino;
	vy_kind kind;
	vy_virtual virt;
	bool fixed; /* root, .vyre and its entries: not removed or renamed */
	pthread_rwlock_t lock;
	pthread_mutex_t meta;
	mode_t mode; /* its S_IFMT bits never change */
	dev_t rdev;  /* VY_SPECIAL: the device number */
	uid_t uid;
	gid_t gid;
	struct timespec atime, mtime, ctime;
	struct timespec btime; /* creation (statx's btime): never changes */
	/* chattr flags (FS_IOC_SETFLAGS), meta: FS_IMMUTABLE_FL,
	 * FS_APPEND_FL, FS_NODUMP_FL, FS_NOATIME_FL, as tmpfs keeps. The
	 * kernel does not see them on a FUSE inode: vyrefs enforces i and a. */
	unsigned attr_flags;
	_Atomic uint32_t nlink; /* written under ns */
	uint64_t nlookup; /* ns: the kernel's references */
	uint32_t opens;   /* ns: open file handles */
	/* VY_FILE: bytes [0, size) are the file; the buffer holds cap bytes. */
	uint64_t size, cap;
	uint64_t holes; /* bytes of cap with no device memory (sparse: core/view.h) */
	vy_handle buf; /* 0: no buffer (empty file) */
	/* VY_FILE: the mount's device (fs->dev index) that holds buf; set at
	 * creation, changed only by a move (fs/devices.h) under the write
	 * lock. */
	uint8_t dev;
	/* VY_DIR, ns: 1 + the fs->dev index its new files go to (its
	 * user.vyre.device); 0: the device with the most free budget. */
	uint8_t place;
	uint32_t maps; /* client mappings (fs/mapsrv.c): the buffer may not move */
	bool written;  /* since the last capacity fit */
	bool linkable; /* ns: an O_TMPFILE without O_EXCL, which linkat may name */
	struct vy_wbehind *wb; /* write-behind slots (wbehind.h), or NULL */
	_Atomic(struct vy_readahead *) ra; /* readahead chunks (readahead.h), or NULL */
	/* VY_DIR */
	vy_dir dir;
	uint64_t parent;
	/* VY_SYMLINK: the link; VY_MODULE and VY_V_MODLOG: the module name */
	char *target;
	/* VY_MODULE: the image */
	char *data;
	size_t dlen;
	bool overflowed; /* VY_MODULE: a write went past the largest module */
	vy_xattrs xattrs;
} vy_inode;

/* An open file (fi->fh). Listed in the fs: the kernel sends RELEASE
 * asynchronously and may drop the last ones at unmount. */
typedef struct vy_open {
	vy_inode *in;
	char *text; /* a virtual file's content, made at open */
	size_t len;
	/* .vyre/ctl: text that waits for the rest of its statement, the next
	 * line's number, and the reply of the last sequence (read once). */
	char *pending;
	size_t plen;
	int next_line;
	char *reply;
	size_t reply_len, reply_pos;
	bool written; /* a module written through this handle: load at flush */
	bool discard; /* ctl: the rest of a refused over-long line is dropped */
	pthread_mutex_t ctl; /* one sequence at a time through one open file */
	struct vy_open *prev, *next; /* ns */
} vy_open;

#define VY_LOG_KEEP 256

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
	vy_fsdev dev[VY_DEVICES_MAX];
	unsigned ndev;
	/* direct[i * ndev + j]: device i reaches device j's memory (peer
	 * access, and peer=on): copies between them stay on the devices. */
	bool direct[VY_DEVICES_MAX * VY_DEVICES_MAX];
	vy_config cfg;
	pthread_mutex_t ns;
	vy_u64map inodes;
	uint64_t next_ino;
	uint64_t vyre_ino, modules_ino;
	vy_open *opens; /* every open file, ns */
	struct vy_mapsrv *mapsrv; /* client mappings over .vyre/socket */
	pthread_mutex_t log_lock; /* the sequence log and numbering */
	char *log[VY_LOG_KEEP];  /* a ring, oldest at log_head */
	size_t log_head, log_count;
	uint64_t next_seq;
	/* Every entry's generation: inode numbers are never reused within a
	 * mount, and a handle from an earlier mount finds another number. */
	uint32_t generation;
	uid_t owner; /* the mounting user */
	gid_t group;
	struct fuse_session *se;
	_Atomic unsigned wb_slots; /* write-behind slots held, all files */
	_Atomic unsigned ra_chunks; /* readahead chunks held, all files */
	vy_xattr_budget xattr_budget; /* every inode's xattrs count here */
	/* The kernel enforces POSIX ACLs (FUSE_POSIX_ACL, with FUSE_DONT_MASK:
	 * the umask is ours to apply); set at INIT, before any other request. */
	bool acl;
} vy_fs;

/* Attribute and entry timeouts for the kernel (seconds). */
#define VY_ATTR_TIMEOUT 1.0

/* Build the root and .vyre/ over n opened cores (the caller keeps them),
 * with a launcher and modules for each. */
vy_err vy_fs_init(vy_fs *fs, vy_core *const *cores, unsigned n, const vy_config *cfg, vy_error *e);

/* The core that holds a file's buffer. */
static inline vy_core *vy_fs_core(const vy_fs *fs, const vy_inode *in)
{
	return fs->dev[in->dev].core;
}
/* Free every inode and its buffer. */
void vy_fs_destroy(vy_fs *fs);

/* The inode for `ino`, or NULL. Takes and drops ns. */
vy_inode *vy_fs_inode(vy_fs *fs, uint64_t ino);

/* A new inode in the table (ns held); NULL when memory runs out. */
vy_inode *vy_inode_new(vy_fs *fs, vy_kind kind, mode_t mode, uid_t uid, gid_t gid);
/* Free what nothing refers to any more (ns held): the buffer once no name
 * and no open handle is left, the inode once the kernel forgot it too. */
void vy_inode_reap(vy_fs *fs, vy_inode *in);
/* A new open file for `in` (not yet tracked); NULL without memory. */
vy_open *vy_open_new(vy_inode *in);
/* Track an open file / stop tracking it and free it (ns held). */
void vy_open_add(vy_fs *fs, vy_open *o);
void vy_open_free(vy_fs *fs, vy_open *o);

/* Fill a stat for the kernel (inode lock held, read is enough). */
void vy_inode_stat(vy_fs *fs, vy_inode *in, struct stat *st);
/* ctime (and mtime too, when `modified`) is now. */
void vy_inode_touch(vy_inode *in, bool modified);
/* chattr's flags (FS_*_FL) now, read under the inode's meta lock. */
unsigned vy_inode_attr_flags(vy_inode *in);
/* A regular file's bytes changed through `req`: times, and suid/sgid
 * dropped as the kernel leaves that to us (fs/session.h). True when the
 * mode changed: the kernel's cached attributes must go. */
bool vy_inode_wrote(vy_inode *in, fuse_req_t req);
/* The S_IFMT bits: fixed at creation, read without locks. */
mode_t vy_inode_type(const vy_inode *in);
void vy_now(struct timespec *ts);

#endif
