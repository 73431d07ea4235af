/* The writer: every change of the namespace goes into the state region's
 * log as the whole present state of what changed (persist/format.h), under
 * one lock that orders the records, before the change is answered. fs/
 * calls these after it changed something, holding the locks it changed it
 * under (never an inode's meta mutex, which the writer takes to read).
 * Lock order: ns, then inode rwlocks, then the writer's lock, then meta.
 *
 * With survive=off (fs->persist NULL) every call returns at once. */
#ifndef VY_PERSIST_WRITER_H
#define VY_PERSIST_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct vy_fs;
struct vy_inode;
struct vy_state;
struct vy_shadow;

/* Keep fs's namespace in `st` from now on. `from` NULL: a first daemon,
 * whose namespace is its root alone (recorded now); else a successor's
 * shadow, built by replay from `st` and matching fs (the writer takes it). */
vy_err vy_persist_start(struct vy_fs *fs, struct vy_state *st, struct vy_shadow *from, vy_error *e);
/* Stop keeping and free the writer (the region stays the caller's). */
void vy_persist_stop(struct vy_fs *fs);

/* An inode's attributes (a symlink's target with them). */
void vy_persist_inode(struct vy_fs *fs, struct vy_inode *in);
/* The entry `name` of directory `dir` as it is now (gone if absent). ns held. */
void vy_persist_name(struct vy_fs *fs, struct vy_inode *dir, const char *name);
/* Inode `ino` is freed. */
void vy_persist_gone(struct vy_fs *fs, uint64_t ino);
/* Every xattr of `in` (its ACLs among them). The inode's lock held. */
void vy_persist_xattrs(struct vy_fs *fs, struct vy_inode *in);
/* Whether inode `in`'s xattrs can be kept with `name` set to `size` bytes
 * (always with survive=off): fs/ refuses a set past it with ENOSPC before
 * anything changes, so a client's xattrs never make a record the log
 * cannot hold (issue "survive 2": that ended the mount's survival). A
 * directory's default ACL must fit twice, as a new subdirectory inherits
 * it as both of its ACLs. The inode's lock held. */
bool vy_persist_xattr_fits(struct vy_fs *fs, const struct vy_inode *in, const char *name, size_t size);
/* A regular file's memory (buffer, capacity, holes, device). Its write
 * lock held. */
void vy_persist_layout(struct vy_fs *fs, struct vy_inode *in);

/* Handle `id` (the kernel's fh) is open on `in` (NULL: released), a
 * VY_HANDLE_FILE or VY_HANDLE_DIR with readdir's `limit`. ns held. */
void vy_persist_handle(struct vy_fs *fs, uint64_t id, struct vy_inode *in, unsigned kind, uint64_t limit);
/* The kernel's references to `in` (its nlookup) as they are now. ns held. */
void vy_persist_lookup(struct vy_fs *fs, struct vy_inode *in);
/* The open .vyre/ctl file `h` as its writer would find it (vy_p_ctl): its
 * reply, the `pending` bytes of unfinished text it holds, its last
 * sequence `seq`, and
 * `running`: the unique of the write whose sequence starts now, kept at
 * once (0: none; kept with the request's answer when it waits for one).
 * h->ctl held. */
struct vy_open;
void vy_persist_ctl(struct vy_fs *fs, const struct vy_open *h, uint64_t running, uint64_t seq, uint32_t pending);

/* A client connection that maps files, as it is now (a vy_p_mapconn and
 * its mappings, `len` bytes; open 0: it ended), kept at once: the map
 * server calls it before it takes a request off the socket, and before it
 * answers one. */
void vy_persist_mapconn(struct vy_fs *fs, const void *rec, uint32_t len);

/* Module file `in` of .vyre/modules/ as it is now, kept at once: `where`
 * gives its name's place, its log's, and the keeper's slot of its image
 * (persist/format.h vy_p_module: slot 0, the module is gone); the writer
 * fills in its number and attributes and appends `name`. Later attribute
 * changes (vy_persist_inode) keep the rest. */
struct vy_p_module;
void vy_persist_module(struct vy_fs *fs, struct vy_inode *in, const struct vy_p_module *where, const char *name);

/* The write-behind region (fs/wbehind_keep.h) as it is now, kept at once
 * (slot 0: none). */
struct vy_p_wbehind;
void vy_persist_wbehind(struct vy_fs *fs, const struct vy_p_wbehind *r);

/* backing=DIR (fs/backed_keep.c): DIR's entry `name` of `dir`, adopted
 * as inode `in` (its attributes, its name, its xattrs), kept at once and
 * never with the request that found it: adopting is not that request's
 * change (its resend finds the inode made), and a listing's thousands of
 * records would overflow one group. ns held; nobody else holds `in` yet. */
void vy_persist_adopted(struct vy_fs *fs, struct vy_inode *dir, const char *name, struct vy_inode *in);
/* backing=DIR: DIR lost the entry `name` of `dir` (inode `in`) behind the
 * mount, and the namespace forgot it: the name gone, both inodes as they
 * are now, kept at once for the same reasons (and so no adoption of the
 * name's new file, kept at once, is undone by a group kept after it). ns
 * held. */
void vy_persist_lost(struct vy_fs *fs, struct vy_inode *dir, const char *name, struct vy_inode *in);
/* A backing mount's file as it is now (a vy_p_tier and its runs, `len`
 * bytes, past what a record holds: the mount no longer survives), kept at
 * once. Its inode's lock held. */
void vy_persist_tier(struct vy_fs *fs, const void *rec, uint32_t len);

/* What the writer did, for .vyre/stats. */
/* File memory the keeper could not be handed (daemon/keeper_memory.c,
 * any thread, store locks held): counted in kept_failures, and the mount
 * no longer survives (vy_persist_lose's fail-closed). */
void vy_persist_memory_lost(struct vy_fs *fs, const char *why);

typedef struct vy_persist_counts {
	uint64_t records, checkpoints, failures;
	uint64_t resends_answered; /* resent requests answered with the dead daemon's kept reply */
} vy_persist_counts;
void vy_persist_counts_get(struct vy_fs *fs, vy_persist_counts *out);

#endif
