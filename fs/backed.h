/* A mount over a directory (backing=DIR, docs/tier.md): the namespace
 * shows DIR's tree and its changes reach DIR (backed_ns.c); a file's bytes
 * load from DIR when used, and give their device memory back when others
 * need it (backed_data.c); what is written goes back to DIR after
 * writeback_delay, at fsync and at unmount (backed_wb.c). tier/ does DIR's
 * I/O and bookkeeping; this layer ties it to inodes and devices. Every
 * entry is a no-op (0 / VY_OK / true) on a mount without backing, or for
 * an inode without an item (.vyre's). */
#ifndef VY_BACKED_H
#define VY_BACKED_H

#include "fs/fs.h"
#include "tier/tier.h"

/* fs/lifecycle.c: open DIR and give the root DIR's attributes; at the end,
 * every dirty byte written back (said in the log if it cannot be), then
 * every item freed. */
vy_err vy_backed_start(vy_fs *fs, vy_inode *root, vy_error *e);
void vy_backed_stop(vy_fs *fs);
/* The unmount's write-back alone (the thread stopped, every dirty file
 * into DIR, failures logged): vy_backed_stop's first step, and all of it
 * for a daemon that exits without teardown. */
void vy_backed_last_write_back(vy_fs *fs);

/* Names (ns held). */
/* DIR's entries of directory `d` into the namespace, once; with `again`,
 * also the names DIR gained since (opendir). 0 or errno. */
int vy_backed_list(vy_fs *fs, vy_inode *d, bool again);
/* The kernel forgets the names the mount forgot as DIR lost them: no
 * lock held (the kernel may ask the mount meanwhile). */
void vy_backed_notify(vy_fs *fs);
/* A name the namespace lacks, looked for in DIR (another host made it):
 * the inode now holding it, or NULL. */
vy_inode *vy_backed_lookup(vy_fs *fs, vy_inode *d, const char *name);
/* Before a new entry goes into the namespace: make it in DIR, as its owner.
 * *st: what DIR made. 0 or errno (nothing changed then). */
int vy_backed_make(vy_fs *fs, vy_inode *p, const char *name, mode_t mode, uid_t uid, gid_t gid,
		   const char *target, dev_t rdev, struct stat *st);
/* A resent make (survive=on) whose name the namespace lacks: DIR's entry
 * of that name, where it is what this very request made before its daemon
 * died (the kind asked, owned by the maker or the daemon, empty, the same
 * target or device, no file the mount knows), is removed, so the make runs
 * again and answers as the first would have. Anything else stays (EEXIST
 * then, as for any name taken). */
void vy_backed_unmake(vy_fs *fs, vy_inode *p, const char *name, mode_t kind, uid_t uid, const char *target,
		      dev_t rdev);
/* After it went in: the new inode's item. 0 or ENOMEM. */
int vy_backed_made(vy_fs *fs, vy_inode *p, const char *name, vy_inode *in, const struct stat *st);
/* Before `name` (inode `in`) goes from `p`: gone from DIR. 0 or errno. */
int vy_backed_remove(vy_fs *fs, vy_inode *p, const char *name, vy_inode *in, bool dir);
/* rename(2) in DIR, before the namespace's; then the items' names after
 * it (`target`: the inode the new name held; `wh`: a whiteout made). */
int vy_backed_rename(vy_fs *fs, vy_inode *p, const char *name, vy_inode *np, const char *newname, unsigned flags);
void vy_backed_renamed(vy_fs *fs, vy_inode *p, const char *name, vy_inode *np, const char *newname, vy_inode *in,
		       vy_inode *target, unsigned flags);
/* After a change of its entries: directory `d` takes DIR's times (ns held). */
void vy_backed_dir_times(vy_fs *fs, vy_inode *d);
/* link(2) in DIR, before the namespace's. */
int vy_backed_link(vy_fs *fs, vy_inode *in, vy_inode *np, const char *newname);
/* Where `in`'s name is in DIR (ns held): its directory's fd (opened
 * beneath DIR the first time) and *name; -errno when it has none. */
int vy_backed_where(vy_fs *fs, vy_inode *in, const char **name);

/* Attributes (no lock held): mode, owner and given times into DIR first;
 * 0 or errno (the namespace is then left as it was). */
int vy_backed_setattr(vy_fs *fs, vy_inode *in, int to_set, const struct stat *attr);
/* After an attribute change: the times DIR gave it (filesystems differ:
 * ext4 stamps a truncate to the same size, tmpfs does not), unless the
 * file has bytes DIR does not hold yet. No lock held. */
void vy_backed_times(vy_fs *fs, vy_inode *in);
void vy_backed_times_locked(vy_fs *fs, vy_inode *in); /* the same, ns held */
/* Whether xattr `xname` is DIR's (user.*, and ACLs where the kernel
 * enforces them): it is read from DIR and set there. */
bool vy_backed_xattr_kept(vy_fs *fs, const char *xname);
/* setxattr (value NULL: removexattr) in DIR first, for a name DIR keeps
 * (else nothing): 0 or DIR's errno. No lock held. */
int vy_backed_setxattr(vy_fs *fs, vy_inode *in, const char *xname, const void *value, size_t size, int flags);
/* statfs: DIR's room and files. 0 or errno. */
int vy_backed_statfs(vy_fs *fs, struct statvfs *out);

/* Data (backed_data.c). */
/* Before the inode's lock: its file in DIR open for loads and write-back.
 * 0 or errno. */
int vy_backed_prepare(vy_fs *fs, vy_inode *in);
/* Whether bytes [off, end) are on the device (the lock held). */
bool vy_backed_present(const vy_inode *in, uint64_t off, uint64_t end);
/* Bytes [off, end) from DIR onto the device where they are not yet (the
 * write lock held); VY_ENOSPC when the device has no room. */
vy_err vy_backed_load(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e);
/* vy_backed_load taking the write lock itself, and on VY_ENOSPC giving
 * back the least recently used clean files' memory and trying again: no
 * lock held before or after. */
vy_err vy_backed_load_room(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e);
/* Where a read of [off, end) should load to: `end`, or further ahead for
 * a reader going in order (the read lock held). */
uint64_t vy_backed_ahead(const vy_inode *in, uint64_t off, uint64_t end);
/* A read of [off, off + len) that the device has no room for, from DIR
 * where not present and the device where present, into buf (read lock). */
vy_err vy_backed_read_direct(vy_fs *fs, vy_inode *in, uint64_t off, size_t len, void *buf, vy_error *e);
/* Bytes [off, end) were written on the device: dirty (the write lock). */
void vy_backed_wrote(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end);
/* The whole file on the device, for work that reaches its buffer
 * directly (a mapping, a sequence, vyrefs cp): the write lock held
 * (vy_backed_load_room first, for room). */
vy_err vy_backed_whole(vy_fs *fs, vy_inode *in, vy_error *e);
/* A mapping ended or a sequence ran that may have written the file: each
 * unit is compared with DIR's at write-back and written if it changed
 * (the write lock held). */
void vy_backed_suspect(vy_fs *fs, vy_inode *in);
/* The size changes to `size` (the write lock): DIR's too, at once. errno. */
int vy_backed_resize(vy_fs *fs, vy_inode *in, uint64_t size);
/* The file was used: newest in the order of use. */
void vy_backed_used(vy_fs *fs, vy_inode *in);
/* At open: DIR's copy changed behind the mount? A clean file forgets its
 * bytes and takes DIR's size and times; a dirty one keeps the mount's
 * (logged). No lock held. */
void vy_backed_revalidate(vy_fs *fs, vy_inode *in);
/* Device memory back from the least recently used clean files, not open
 * or mapped or pinned, on device `dev`, until `want` bytes went or none
 * is left to take: whether any went. No inode lock held. */
bool vy_backed_evict(vy_fs *fs, unsigned dev, uint64_t want);
/* `vyrefs evict`: this file's device memory back now, if it is clean and
 * unused: 0, EBUSY (open, mapped, dirty or pinned). No lock held. */
int vy_backed_evict_one(vy_fs *fs, vy_inode *in);
/* An inode by number held for background work (ns/ns.h: holds), so it is
 * not freed under it: NULL when there is none. vy_backed_let_go ends the
 * hold (ns taken: no inode lock may be held). */
vy_inode *vy_backed_hold(vy_fs *fs, uint64_t ino);
void vy_backed_let_go(vy_fs *fs, vy_inode *in);
/* user.vyre.pin: a file whose device memory is never given back (set),
 * or may be again (removed). 0, or EPERM for an inode without an item. */
#define VY_PIN_XATTR "user.vyre.pin"
int vy_backed_pin(vy_fs *fs, vy_inode *in, bool pin);
/* user.vyre.resident and user.vyre.dirty (the read lock): false for
 * other names. */
bool vy_backed_xattr(const vy_inode *in, const char *name, char *out, size_t cap);

/* survive=on (backed_keep.c). */
/* The file's record for a successor (its units, what DIR held when last
 * agreed, its pin), kept at once; the root's names DIR itself. The
 * inode's lock held (nobody else holds a new inode). */
void vy_backed_keep(vy_fs *fs, vy_inode *in);
/* A successor, before any request (persist/replay.c): inode `in`'s item
 * from its record `rec` of `len` bytes (NULL: none kept). VY_EACCES: the
 * root's record names another directory than DIR now (the mount fails
 * closed); VY_ENOMEM. */
vy_err vy_backed_kept(vy_fs *fs, vy_inode *in, const void *rec, uint32_t len, vy_error *e);
/* Then each item's name from the namespace, DIR's ids, the order of use. */
void vy_backed_kept_all(vy_fs *fs);
/* Last (daemon/adopt_ns.c, after the write-behind slots went to their
 * files): the dirty files written back a delay from now. How many. */
size_t vy_backed_kept_due(vy_fs *fs);

/* Write-back (backed_wb.c). */
/* This file's dirty bytes into DIR and DIR's fsync: 0 or DIR's errno (the
 * bytes stay dirty and on the device). No lock held. */
int vy_backed_flush(vy_fs *fs, vy_inode *in);
/* Every dirty file now (fsyncdir, unmount): 0 or the first errno. */
int vy_backed_flush_all(vy_fs *fs);
/* The thread that writes files back writeback_delay after they became dirty. */
vy_err vy_backed_wb_start(vy_fs *fs, vy_error *e);
void vy_backed_wb_stop(vy_fs *fs);

#endif
