/* The namespace: inodes, names, links, attributes, xattrs, ACLs, and the
 * lookup and open counts that decide an inode's lifetime. Pure data: no
 * FUSE and no device calls. A regular file's bytes live on a device, which
 * the layer above (fs/) reaches through the fields it keeps here (buf,
 * size, cap, dev ...); this layer only stores them.
 *
 * Locking: `ns` guards the inode table, every directory's entries and each
 * inode's nlink (written under ns, read anywhere), nlookup and opens (what
 * decides an inode's lifetime), and every change to the handle table (a
 * file's id is looked up without it: ns/handles.h). Each inode's rwlock
 * guards its data (size, buffer, xattrs) and may be held across device
 * work; its `meta` mutex guards mode, owner and times and is never held
 * for long, so namespace changes never wait on a file's data. Order: ns, then inode rwlocks (two
 * in ascending ino), then meta. */
#ifndef VY_NS_H
#define VY_NS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "core/u64map.h"
#include "ns/dir.h"
#include "ns/handles.h"
#include "ns/xattr.h"

/* The root directory's inode number (FUSE_ROOT_ID). */
#define VY_NS_ROOT 1

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
	VY_V_UPGRADE, /* a write hands the mount to the binary now installed (survive=on) */
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
	uint64_t buf; /* a vy_handle of the device's store (core/store.h); 0: none (empty file) */
	/* VY_FILE: the mount's device (fs->dev index) that holds buf; set at
	 * creation, changed only by a move (fs/devices_xattr.h) under the write
	 * lock. */
	uint8_t dev;
	/* VY_FILE: its byte 0 is this far into its buffer's memory (core/place.h),
	 * so its format's data lands where its readers want it; every buffer
	 * the file gets (growth, a move, a takeover) is placed so. 0 while
	 * the file has no bytes. Under the write lock. */
	uint16_t lead;
	/* VY_FILE: a change reached its first bytes after they decided its
	 * lead (a header written last, a file sized first), so its last close
	 * after writing or its first mapping decides again from them
	 * (fs/file_place.h). Write lock; not kept: a successor sets it on
	 * every file it adopts. */
	bool head_due;
	/* VY_DIR, ns: 1 + the fs->dev index its new files go to (its
	 * user.vyre.device); 0: where fs/devices.c places them. VY_FILE,
	 * write lock: 1 + the index it was asked to live on (its own or its
	 * directory's user.vyre.device), so it never spills; 0: it may. */
	uint8_t place;
	uint32_t maps; /* client mappings (sock/mapsrv.c): the buffer may not move */
	uint64_t mapped_counted; /* its bytes in mapped_bytes, once however many maps (in->lock) */
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
	uint32_t kept_slot; /* VY_MODULE: the keeper's slot of its loaded image (fs/moddir_keep.c); 0: none */
	vy_xattrs xattrs;
	/* backing=DIR: what the mount knows of it in DIR (tier/item.h); NULL
	 * on other mounts and for .vyre's. Freed with the inode by fs/. */
	struct vy_tier_item *tier;
	/* ns: fs/'s own references (write-back, eviction at work on it):
	 * the inode is not freed while any is held. */
	uint32_t holds;
} vy_inode;

/* An open file. The kernel names it by `fh`, its id in the handle table
 * (ns/handles.h), which also lets vy_ns_destroy find the ones the kernel
 * never released (it sends RELEASE asynchronously and may drop the last
 * ones at unmount). */
typedef struct vy_open {
	vy_inode *in;
	uint64_t fh; /* its id (ns), 0 until vy_open_add */
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
	/* ctl, in a successor: the write whose sequence the dead daemon was
	 * running (its resend is refused, not run twice), and the bytes of an
	 * unfinished statement it held (the next write is refused) */
	uint64_t interrupted, interrupted_seq;
	uint32_t lost_text;
	pthread_mutex_t ctl; /* one sequence at a time through one open file */
} vy_open;

typedef struct vy_ns {
	pthread_mutex_t ns;
	vy_u64map inodes;
	uint64_t next_ino;
	vy_handles handles; /* every open file and directory (fi->fh), ns */
	/* Every entry's generation: inode numbers are never reused within a
	 * mount, and a handle from an earlier mount finds another number. */
	uint32_t generation;
	uid_t owner; /* the mounting user */
	gid_t group;
	vy_xattr_budget xattr_budget; /* every inode's xattrs and symlink targets count here */
	uint64_t extra_links; /* names of files past each one's first: they count against max_inodes, as on tmpfs (ns) */
	uint64_t lookups;     /* ns: the nlookup of every inode outside .vyre/, summed (.vyre/stats kernel_lookups) */
	/* ns: references the kernel forgot that were never counted here (a
	 * bookkeeping fault, or counts a successor could not take back) */
	uint64_t forgets_unmatched;
} vy_ns;

/* An empty table whose first inode will be VY_NS_ROOT, xattrs capped at
 * `xattr_max` bytes in all; false when the lock cannot be made. */
bool vy_ns_init(vy_ns *ns, uint64_t xattr_max);
/* Free every open file and inode (their data must be gone already). */
void vy_ns_destroy(vy_ns *ns);

/* The inode for `ino`, or NULL. Takes and drops ns. */
vy_inode *vy_ns_inode(vy_ns *ns, uint64_t ino);

/* A new inode in the table (ns held); NULL when memory runs out. */
vy_inode *vy_inode_new(vy_ns *ns, vy_kind kind, mode_t mode, uid_t uid, gid_t gid);
/* The same with number `ino` (a successor remaking a kept inode): NULL
 * also when that number is taken or not one; later numbers follow it. */
vy_inode *vy_inode_new_at(vy_ns *ns, uint64_t ino, vy_kind kind, mode_t mode, uid_t uid, gid_t gid);
/* A takeover's bulk load, made on several threads and put in the table on
 * one: an inode with number `ino` and no times (nothing else touched, so
 * any thread may make one), vy_ns_insert to put it in the table (ns held;
 * false when its number is taken or not one, or no memory: it is still
 * the caller's), vy_inode_discard to free one that is in no table. */
vy_inode *vy_inode_make(vy_ns *ns, uint64_t ino, vy_kind kind, mode_t mode, uid_t uid, gid_t gid);
bool vy_ns_insert(vy_ns *ns, vy_inode *in);
void vy_inode_discard(vy_inode *in);
/* Room for `more` inodes than there are, made with no rehash on the way
 * (a takeover's bulk load); false with no memory, changing nothing. */
bool vy_ns_reserve(vy_ns *ns, size_t more);
/* A bulk load's hint: inode `ino` is made soon (vy_u64map_prefetch). */
void vy_ns_prefetch(vy_ns *ns, uint64_t ino);
/* No name and no open handle is left: nobody can reach its bytes again. */
bool vy_inode_unreachable(const vy_inode *in);
/* Free what nothing refers to any more (ns held): the xattrs once the
 * inode is unreachable, the inode once the kernel forgot it too. Its
 * bytes must be gone first (fs/file.h: vy_inode_reap). */
void vy_ns_reap(vy_ns *ns, vy_inode *in);
/* The kernel took (an entry reply) or did not take (its reply failed)
 * one more reference to `in` (ns held). */
void vy_ns_looked_up(vy_ns *ns, vy_inode *in);
void vy_ns_not_looked_up(vy_ns *ns, vy_inode *in);
/* Its count is `n` (a successor taking the counts over; ns held or not
 * serving yet). */
void vy_ns_lookups_set(vy_ns *ns, vy_inode *in, uint64_t n);
/* The kernel forgets `n` references to `ino` (FORGET, BATCH_FORGET; ns
 * held): its count goes down, to 0 at least. The inode, for the caller to
 * reap (fs/file.h: vy_inode_reap), or NULL when there is none. */
vy_inode *vy_ns_forget(vy_ns *ns, uint64_t ino, uint64_t n);

/* ns/open.c: open files and their ids. */
/* Open files and directories at most (a cap on the handle table): past it
 * opens fail with ENFILE. */
#define VY_NS_HANDLES_MAX (1u << 22)
/* A new open file for `in` (not yet tracked); NULL without memory. */
vy_open *vy_open_new(vy_inode *in);
/* Give `o` its id, o->fh (ns held): 0, ENFILE (VY_NS_HANDLES_MAX are
 * open) or ENOMEM. The inode's open count is the caller's. */
int vy_open_add(vy_ns *ns, vy_open *o);
/* The open file `fh` names, or NULL when it names none (stale, forged,
 * a directory's). No lock (ns/handles.h says why). */
vy_open *vy_open_of(vy_ns *ns, uint64_t fh);
/* End its id, if it has one, and free it (ns held). */
void vy_open_free(vy_ns *ns, vy_open *o);
/* Free an open file that never had an id (no lock). */
void vy_open_discard(vy_open *o);

/* ctime (and mtime too, when `modified`) is now. */
void vy_inode_touch(vy_inode *in, bool modified);

/* chattr's flags (FS_*_FL) now, read under the inode's meta lock. */
unsigned vy_inode_attr_flags(vy_inode *in);
/* The S_IFMT bits: fixed at creation, read without locks. */
mode_t vy_inode_type(const vy_inode *in);
void vy_now(struct timespec *ts);

#endif
