/* A successor's side, the first steps of replay.c: the kept inodes made
 * again, then the names between them, each step on several threads
 * (core/parallel.h: 100,000 inodes cost 45 to 55 ms on one thread of the
 * H100's machine, their names 25 to 40, most of it fresh memory faulted
 * in; docs/survive.md, session 14). */
#ifndef VY_PERSIST_REPLAY_NS_H
#define VY_PERSIST_REPLAY_NS_H

#include "core/err.h"
#include "persist/replay_counts.h"
#include "persist/shadow.h"

struct vy_fs;
struct vy_inode;

/* The shadow's nodes in number order, each beside the inode made of it
 * (NULL: none made here, or a module's, made by replay_modules.c). A node
 * dropped (drop_unheld) is NULL in both. While the names are made, `by`
 * finds an inode by its number when the numbers are dense (by[ino - base],
 * span entries; NULL: sparse): a directory's children were mostly made in
 * turn, so they are neighbours there, where the inode map scatters them. */
typedef struct vy_replay_walk {
	vy_shadow_node **node;
	struct vy_inode **in;
	size_t n;
	struct vy_inode **by;
	uint64_t base, span;
} vy_replay_walk;

/* Node i's inode: the one made of it, else the table's by its number. */
struct vy_inode *vy_replay_inode_at(struct vy_fs *fs, const vy_replay_walk *w, size_t i);

/* Every node's inode made and in fs's table (w->in; the root's attributes
 * set on fs's own root), counted in counts->inodes. An error: every inode
 * made but not put in the table is freed (w->in NULL there); those put in
 * before it stay, as fs's (the caller serves no such namespace). */
vy_err vy_replay_inodes(struct vy_fs *fs, vy_replay_walk *w, vy_replay_counts *counts, vy_error *e);

/* Each directory's names, each at its readdir place; a name of no kept
 * inode, or taken already, is logged and left out. counts->names. */
vy_err vy_replay_names(struct vy_fs *fs, vy_replay_walk *w, vy_replay_counts *counts, vy_error *e);

#endif
