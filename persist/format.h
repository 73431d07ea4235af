/* The records a daemon keeps its namespace in (persist/README.md): each is
 * the whole present state of one thing, never a step, so replaying the last
 * record of each thing gives the namespace, whatever came before it. They
 * are the payloads of state/ log records (their state type is the record
 * type) and, back to back, the sections of a checkpoint image.
 *
 * Host byte order, fixed-width fields, positions never pointers. A record's
 * variable part (a name, a target, xattrs, pieces) follows its struct. */
#ifndef VY_PERSIST_FORMAT_H
#define VY_PERSIST_FORMAT_H

#include <stdint.h>
#include <time.h>

#include "core/store_keep.h"

enum vy_p_type {
	VY_P_NS = 1,     /* vy_p_ns: the mount's numbering */
	VY_P_INODE = 2,  /* vy_p_inode + target: an inode's attributes */
	VY_P_NAME = 3,   /* vy_p_name + name: an entry of a directory (ino 0: none) */
	VY_P_GONE = 4,   /* vy_p_gone: an inode freed, with its xattrs and memory */
	VY_P_XATTRS = 5, /* vy_p_xattrs + entries: every xattr of an inode (ACLs too) */
	VY_P_LAYOUT = 6, /* vy_p_layout + pieces: a regular file's memory */
	VY_P_HANDLE = 7, /* vy_p_handle: an open file or directory the kernel holds (ino 0: released) */
	VY_P_LOOKUP = 8, /* vy_p_lookup: the kernel's references to an inode */
	VY_P_GROUP = 9,  /* vy_p_group + reply + records: one request's changes and its answer */
	VY_P_CTL = 10,   /* vy_p_ctl + reply: an open .vyre/ctl (its handle's) reply and whether a sequence runs */
	VY_P_MAPCONN = 11, /* vy_p_mapconn + mappings: a client connection that maps files (format 5) */
	VY_P_MODULE = 12,  /* vy_p_module + name: a loaded module file of .vyre/modules/ (format 6) */
	VY_P_WBEHIND = 13, /* vy_p_wbehind: where gathered writes wait for their device (format 7) */
	VY_P_TIER = 14,    /* vy_p_tier + runs: a backing mount's file, what DIR holds of it (format 9) */
};

/* An image section holds records back to back, each a vy_p_head and its
 * payload, the next at a multiple of 8. */
#define VY_P_SECTION_RECORDS 1u

typedef struct vy_p_head {
	uint32_t len; /* of the payload */
	uint16_t type;
	uint16_t zero;
} vy_p_head;

typedef struct vy_p_ns {
	uint64_t next_ino;   /* inode numbers are never reused within a mount */
	uint32_t generation; /* the kernel's node generation of the mount */
	uint32_t zero;
	uint64_t sequences; /* the last .vyre/ctl sequence's number (format 4; format 3's record ends before it) */
} vy_p_ns;
#define VY_P_NS_V3_BYTES 16u

typedef struct vy_p_time {
	int64_t sec, nsec;
} vy_p_time;

/* A kept time from a struct timespec. */
static inline vy_p_time vy_p_time_of(struct timespec t)
{
	return (vy_p_time){.sec = t.tv_sec, .nsec = t.tv_nsec};
}

typedef struct vy_p_inode {
	uint64_t ino;
	uint64_t size;
	uint64_t parent; /* a directory's */
	uint64_t rdev;
	vy_p_time atime, mtime, ctime, btime;
	uint32_t kind; /* vy_kind: VY_DIR, VY_FILE, VY_SYMLINK or VY_SPECIAL */
	uint32_t mode;
	uint32_t uid, gid;
	uint32_t attr_flags;
	uint32_t nlink;
	uint8_t dev, place, linkable, zero;
	uint32_t target_len; /* a symlink's target follows */
} vy_p_inode;

typedef struct vy_p_name {
	uint64_t parent;
	uint64_t ino;    /* 0: the name is gone */
	uint64_t cookie; /* its place in readdir order (ns/dir.h), so an open directory reads on */
	uint32_t name_len; /* the name follows, no NUL */
	uint32_t zero;
} vy_p_name;

typedef struct vy_p_gone {
	uint64_t ino;
} vy_p_gone;

/* n entries follow, each {uint32 name_len, uint32 value_len, name, value}. */
typedef struct vy_p_xattrs {
	uint64_t ino;
	uint32_t n;
	uint32_t zero;
} vy_p_xattrs;

typedef struct vy_p_layout {
	uint64_t ino;
	uint64_t cap;   /* vy_inode.cap: the buffer's length, holes included */
	uint64_t holes; /* vy_inode.holes */
	uint16_t dev;   /* the mount's device index that holds it */
	uint16_t lost;  /* 1: its memory is not with the keeper (a successor empties the file) */
	uint32_t n;     /* pieces that follow (vy_keep_piece); 0 with cap 0: no buffer */
	uint32_t lead;  /* vy_inode.lead: byte 0 this far into the memory (format 8) */
	uint32_t zero;
} vy_p_layout;
/* A layout of format 7 or before: the first 32 bytes, no lead (0). */
#define VY_P_LAYOUT_V7_BYTES 32u

/* The kernel's `fh`: a handle id (ns/handles.h), taken back as it is. */
typedef struct vy_p_handle {
	uint64_t id;
	uint64_t ino;   /* 0: released */
	uint64_t limit; /* a directory's: readdir shows entries with a cookie below it */
	uint32_t kind;  /* VY_HANDLE_FILE or VY_HANDLE_DIR */
	uint32_t zero;
} vy_p_handle;

/* How many references (entry replies not yet forgotten) the kernel holds. */
typedef struct vy_p_lookup {
	uint64_t ino;
	uint64_t nlookup;
} vy_p_lookup;

/* An open file of .vyre/ctl, as its writer would find it: the reply of its
 * last sequence (read once: the text follows), the unfinished statement it
 * holds (kept as a length: a successor refuses its rest), and the write
 * whose sequence runs now (a successor answers that write's resend with an
 * error that says the daemon restarted, never with a second run). Forgotten
 * with its handle. */
#define VY_P_CTL_REPLY_MAX 2048u
typedef struct vy_p_ctl {
	uint64_t id;      /* the handle's (vy_p_handle.id) */
	uint64_t running; /* the kernel's unique of the write running a sequence now (0: none) */
	uint64_t seq;     /* the number of its last sequence (.vyre/log); the mount's numbering goes on after the largest */
	uint32_t pending; /* bytes of an unfinished statement held */
	int32_t next_line;
	uint32_t reply_len; /* the reply text follows */
	uint32_t zero;
} vy_p_ctl;

/* A request's records, kept together (one log record: all of them or none)
 * with the reply the daemon gave it, so a successor answers the kernel's
 * resend of it with that reply instead of running it again. The reply (its
 * fuse_out_header first, `reply_len` bytes, padded to 8) follows, then
 * `records` records, each a vy_p_head and its payload padded to 8. An image
 * keeps groups of no records: the answers not yet known to be received. */
#define VY_P_REPLY_MAX 512u
typedef struct vy_p_group {
	uint64_t unique;    /* the kernel's request id (bit 63 clear) */
	uint32_t thread;    /* the answering thread's id: its next group says this answer was sent */
	uint32_t takeover;  /* the daemon's place in the mount's line (0: the first) */
	uint32_t reply_len; /* 0: no answer kept (a resend runs again) */
	uint32_t records;
} vy_p_group;

/* A client connection that maps files (sock/mapsrv.c), as a successor
 * serves it on: its socket is with the keeper in `slot` (the record's key),
 * each of its mappings holds its file as an open file does, and the request
 * it serves is kept in two steps: `phase` 1 before the request is taken off
 * the socket, 2 once it is done (before its reply). A successor that finds
 * phase 1 and an empty socket knows the request was taken and not done; a
 * phase 2 request it answers again (the client drops an answer it has by
 * its unique). `open` 0: the connection ended. */
#define VY_P_MAPCONN_MAPS_MAX 1024u
typedef struct vy_p_mapconn {
	uint32_t slot;
	uint32_t open;
	uint32_t uid;   /* the client's (SO_PEERCRED) */
	uint32_t minor; /* its protocol minor (HELLO) */
	uint64_t next_id;
	uint64_t unique;  /* the request served last (0: none yet) */
	uint64_t ref;     /* the mapping it named (SYNC, UNMAP) or made (MAP) */
	uint16_t opcode;
	uint16_t phase;   /* 1 or 2 (0: none) */
	int32_t status;   /* phase 2: its vy_err */
	uint32_t n;       /* vy_p_mapping entries that follow */
	uint32_t flags;   /* VY_P_MAPCONN_*: the request's (0 before 2.4) */
} vy_p_mapconn;
/* The MAP that `ref` made handed out read-only memory: answered again so. */
#define VY_P_MAPCONN_READONLY 1u

typedef struct vy_p_mapping {
	uint64_t id;
	uint64_t ino;
	uint64_t bytes; /* the memory mapped (the file's allocations) */
} vy_p_mapping;

/* A module file of .vyre/modules/ that loaded (fs/moddir_keep.c), as a
 * successor makes it again: its image is a sealed memfd of `bytes` the
 * keeper holds in `slot`; the file and its JIT log (NAME.log) keep their
 * numbers and places in the listing; its name (NAME.ptx, .cubin, .fatbin
 * or .cu) follows. `slot` 0: the module is gone. Keyed by `ino`. A module
 * being written is not kept until it loads (its writer's handle is not). */
#define VY_P_MODULE_MAX_BYTES (256ull << 20)
typedef struct vy_p_module {
	uint64_t ino, cookie;
	uint64_t log_ino, log_cookie; /* 0: no log */
	uint64_t bytes;
	vy_p_time atime, mtime, ctime, btime;
	uint32_t slot;
	uint32_t mode, uid, gid;
	uint32_t name_len;
	uint32_t zero;
} vy_p_module;

_Static_assert(sizeof(vy_p_module) == 128, "persist/format.h: fixed layout");

/* The write-behind slots (fs/wbehind_keep.h): a memfd of `bytes` the
 * keeper holds in `slot`, of `slots` slots of `slot_bytes` after a header
 * that says which file's bytes each holds. One per mount, the last wins;
 * `slot` 0: none. */
#define VY_P_WBEHIND_SLOTS_MAX 1024u
#define VY_P_WBEHIND_SLOT_MAX (64ull << 20)
typedef struct vy_p_wbehind {
	uint32_t slot, slots;
	uint64_t slot_bytes, bytes;
} vy_p_wbehind;

_Static_assert(sizeof(vy_p_wbehind) == 24, "persist/format.h: fixed layout");

/* A regular file of a backing mount (fs/backed_keep.c), as a successor
 * knows it again: which file of DIR's it is, what DIR held when the mount
 * last agreed with it, and which 2 MiB units the device holds (present)
 * and holds while DIR does not yet (dirty: written, or maybe changed by a
 * mapping). `present` runs then `dirty` runs follow, each {first, count}
 * of units, in order, not touching. Its name is the namespace's (VY_P_NAME);
 * the root's record names DIR itself, so a successor over another
 * directory refuses. Keyed by `ino`; goes with the inode (VY_P_GONE). */
#define VY_P_TIER_RUNS_MAX 4096u
#define VY_P_TIER_PINNED 1u
typedef struct vy_p_tier {
	uint64_t ino;
	uint64_t dev, dir_ino; /* DIR's file (st_dev, st_ino) */
	uint64_t size;         /* DIR's size when last agreed */
	vy_p_time mtime, ctime; /* DIR's, when last agreed */
	uint64_t src;          /* bytes [0, src) come from DIR where not present */
	uint32_t present, dirty; /* runs that follow */
	uint32_t flags;          /* VY_P_TIER_* */
	uint32_t zero;
} vy_p_tier;

typedef struct vy_p_run {
	uint64_t first, count;
} vy_p_run;

_Static_assert(sizeof(vy_p_tier) == 88 && sizeof(vy_p_run) == 16, "persist/format.h: fixed layout");

_Static_assert(sizeof(vy_p_mapconn) == 56 && sizeof(vy_p_mapping) == 24, "persist/format.h: fixed layout");

_Static_assert(sizeof(vy_p_head) == 8 && sizeof(vy_p_ns) == 24 && sizeof(vy_p_group) == 24 && sizeof(vy_p_inode) == 128 && sizeof(vy_p_name) == 32 &&
		       sizeof(vy_p_handle) == 32 && sizeof(vy_p_lookup) == 16 && sizeof(vy_p_ctl) == 40 &&
		       sizeof(vy_p_layout) == 40 && sizeof(vy_keep_piece) == 32,
	       "persist/format.h: fixed layout");

#endif
