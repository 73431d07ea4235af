/* When a regular file is placed for its format (core/place.h decides the
 * lead from the file's first VY_PLACE_HEAD bytes; this says when those
 * bytes are read; fs/file.c moves the file). docs/core.md, "Placement":
 *  - at the write that completes the head of a file written from its
 *    start (its size is the write's offset): nothing past the head to
 *    move yet;
 *  - otherwise a change that reaches the head (a header written last,
 *    over a file sized first or written from several places) marks the
 *    file `head_due`, and its last close after writing decides again: a
 *    move on its device, the lead being under a page;
 *  - a file still marked at its first mapping (a mapping held while its
 *    header came; a move that found no room; a successor, which marks
 *    every file it adopts) is decided there, before its memory is handed
 *    out.
 * The caller holds the file's write lock. */
#ifndef VY_FS_FILE_PLACE_H
#define VY_FS_FILE_PLACE_H

#include "fs/fs.h"

/* A write of `size` bytes of `buf` at `off`: true with *lead set when it
 * is the one that decides the file's lead now; false otherwise, the file
 * marked head_due when the write reaches its head. */
bool vy_file_place_write(vy_fs *fs, vy_inode *in, uint64_t off, const void *buf, size_t size, uint32_t *lead);

/* A change other than a write (a copy into it, a hole punched, a size
 * set on a file that has bytes) from `off`: marks the file head_due when
 * that reaches its head. */
void vy_file_place_touch(vy_inode *in, uint64_t off);

/* The lead the file's head asks for now, into *lead: false when its head
 * cannot be read (fewer bytes than a head, or the device failed: logged). */
bool vy_file_place_head(vy_fs *fs, vy_inode *in, uint32_t *lead);

#endif
