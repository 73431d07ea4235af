/* The kept namespace: the last record of each thing (persist/format.h),
 * applied in order. The writer keeps one beside the live namespace so a
 * checkpoint is a dump of it, never a walk of the live inodes under their
 * locks; a successor builds one from the image and the log, then makes the
 * live namespace from it (persist/replay.c) and writes on with it.
 *
 * Not locked: its owner holds the lock that orders its records. */
#ifndef VY_PERSIST_SHADOW_H
#define VY_PERSIST_SHADOW_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"
#include "core/u64map.h"
#include "persist/format.h"
#include "ns/dir.h"

typedef struct vy_shadow_node {
	uint64_t ino;
	uint8_t *inode, *xattrs, *layout, *tier; /* the last payload of each type, or NULL */
	uint32_t inode_len, xattrs_len, layout_len, tier_len;
	uint64_t layout_seq; /* the log seq of the layout (0: from an image) */
	uint64_t nlookup;    /* the kernel's references (VY_P_LOOKUP) */
	bool has_names;
	vy_dir names; /* a directory's entries (has_names) */
} vy_shadow_node;

typedef struct vy_shadow {
	vy_u64map nodes;   /* ino -> vy_shadow_node */
	vy_u64map handles; /* handle id -> vy_p_handle (a copy): the live ones */
	vy_u64map ctls;    /* handle id -> vy_p_ctl and its reply (a copy): the open .vyre/ctl files */
	vy_u64map mapconns; /* keeper slot -> vy_p_mapconn and its mappings (a copy): client connections that map */
	vy_u64map modules;  /* ino -> vy_p_module and its name (a copy): the loaded modules */
	vy_u64map answers; /* the answers kept for resends (persist/answers.h) */
	vy_p_wbehind wbehind; /* the write-behind slots (slot 0: none) */
	uint64_t next_ino;
	uint64_t sequences; /* the largest .vyre/ctl sequence number kept */
	uint32_t generation;
	bool has_ns;
} vy_shadow;

void vy_shadow_init(vy_shadow *s);
void vy_shadow_destroy(vy_shadow *s);

/* Check one record and make it the last of its thing (a group: each of its
 * records, then its answer). VY_EINVAL (nothing changed, for a group: its
 * framing checked first) for a record that is not one; VY_ENOMEM. */
vy_err vy_shadow_apply(vy_shadow *s, uint16_t type, const void *p, uint32_t len, uint64_t seq, vy_error *e);

/* Forget inode `ino` (a successor freed it: no handle is on it). */
void vy_shadow_forget(vy_shadow *s, uint64_t ino);
/* Forget handle `id` (a successor could not take it back), with its
 * control file's state. */
void vy_shadow_forget_handle(vy_shadow *s, uint64_t id);

/* Forget the client connection kept in `slot`. */
void vy_shadow_forget_mapconn(vy_shadow *s, uint64_t slot);
/* Forget the module file `ino` (a successor could not load it again). */
void vy_shadow_forget_module(vy_shadow *s, uint64_t ino);

/* Every record of the state, for an image: the numbering, each node's
 * inode, xattrs, layout, backing record and lookups, then every name (a name after both
 * its inodes, so a replay never meets one it cannot place), then every
 * handle, each open control file's state, each client connection that
 * maps, each loaded module, then every kept answer (a group of no records). */
/* The nodes in inode-number order: a malloc'd array of *n (*out NULL
 * when there are none); VY_ENOMEM. Walks in this order touch
 * memory in the order a load made it (the map's own order is salted:
 * a walk in it misses the cache at every node). */
vy_err vy_shadow_by_ino(const vy_shadow *s, vy_shadow_node ***out, size_t *n, vy_error *e);

typedef vy_err (*vy_shadow_emit_fn)(void *ctx, uint16_t type, const void *p, uint32_t len, vy_error *e);
vy_err vy_shadow_dump(const vy_shadow *s, vy_shadow_emit_fn emit, void *ctx, vy_error *e);

#endif
