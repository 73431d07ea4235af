/* Readahead of our own: a file read in order has its next bytes copied from
 * the device into pinned host memory while the kernel still consumes the
 * bytes before them, so a sequential read is answered from host memory and
 * waits for no device copy of its own.
 *
 * The kernel asks for 128 KiB at a time (its readahead window), each a
 * round trip; a device copy and its sync add ~10 µs to each. Here a read
 * that continues the last one is served from a 2 MiB chunk, and the first
 * read served from a chunk queues the copy of the next chunk.
 *
 * Two chunks per file, capped fs-wide (VY_RA_CHUNKS). A chunk is a snapshot:
 * everything that changes the file's bytes (writes, truncation, allocation,
 * copies into it, control sequences) calls vy_readahead_forget, and a chunk
 * taken before that is never served again. A readahead that fails is only a
 * miss: the read goes to the device directly and reports what it finds.
 *
 * Locks: vy_readahead_get and _put run under the inode's read lock with the
 * file settled (write-behind); the reply is made under it, so _release and
 * _free, which take the write lock, never free a chunk in use. _forget
 * needs the inode's lock, read or write. */
#ifndef VY_READAHEAD_H
#define VY_READAHEAD_H

#include <stdbool.h>

#include "fs/fs.h"

#define VY_RA_CHUNK (2u << 20)
#define VY_RA_CHUNKS 32

typedef struct vy_ra_hit {
	const void *data;
	size_t len;
	struct ra_chunk *chunk; /* held until vy_readahead_put */
} vy_ra_hit;

/* Serve [off, off+len) from readahead (off + len <= the file's size): true
 * with *hit set when it holds the bytes, or fetched them because the read
 * continues the last one. */
bool vy_readahead_get(vy_fs *fs, vy_inode *in, uint64_t off, size_t len, vy_ra_hit *hit);
/* The reply is made: the chunk may be reused. */
void vy_readahead_put(vy_fs *fs, vy_inode *in, vy_ra_hit *hit);
/* The file's bytes changed: no chunk taken before is served again. */
void vy_readahead_forget(vy_inode *in);
/* Give the pinned memory back (the last close): write lock held. */
void vy_readahead_release(vy_fs *fs, vy_inode *in);
/* Release and free the state (the file's buffer is going): write lock held,
 * or the inode unreachable. */
void vy_readahead_free(vy_fs *fs, vy_inode *in);

#endif
