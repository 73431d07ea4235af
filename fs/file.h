/* Regular files' bytes: one device buffer per file.
 *
 * Bytes [0, size) are the file; those past the buffer's capacity (`cap`)
 * are the tail, a hole in no buffer that reads as zeros. Capacity grows geometrically (doubling, in
 * 4 KiB steps), so writing a file front to back costs linear time; bytes
 * between the old end and a new one always read as zeros (the device
 * buffer is zeroed there, never left with a pool buffer's old bytes). After
 * a file was written, its last close fits capacity to the size plus 1/8 of
 * headroom, so appends stay linear; truncation releases capacity when it is
 * far larger than needed. The caller holds the inode's lock: write for
 * changes, read for reads. */
#ifndef VY_FILE_H
#define VY_FILE_H

#include "fs/fs.h"
#include "fs/readahead.h"

/* The largest file: offsets stay positive as off_t. */
#define VY_FILE_MAX ((uint64_t)INT64_MAX)

/* Up to `size` bytes from `off`, *got of them (fewer at the end): from
 * readahead memory when it holds them (hit->chunk set: the bytes are at
 * hit->data until vy_readahead_put), else copied by the device into a
 * staging buffer acquired into *buf (the caller releases it). */
vy_err vy_file_read(vy_fs *fs, vy_inode *in, uint64_t off, size_t size, vy_ra_hit *hit, vy_staging_buf *buf,
		    size_t *got, vy_error *e);
vy_err vy_file_write(vy_fs *fs, vy_inode *in, uint64_t off, const void *buf, size_t size, vy_error *e);
vy_err vy_file_truncate(vy_fs *fs, vy_inode *in, uint64_t size, vy_error *e);
/* Make room for [off, off+len); unless keep_size, extend the file over it. */
vy_err vy_file_allocate(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t len, bool keep_size, vy_error *e);
/* Punch a hole: [off, off+len) within the size reads as zeros, the size
 * stays; whole pieces inside it go back (holes), the rest is zeroed. */
vy_err vy_file_punch(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t len, vy_error *e);
/* Copy up to len bytes on the device (both locked; the same inode once);
 * *copied says how many (fewer at the source's end). */
vy_err vy_file_copy(vy_fs *fs, vy_inode *src, uint64_t off_in, vy_inode *dst, uint64_t off_out, uint64_t len,
		    uint64_t *copied, vy_error *e);
/* SEEK_DATA (`data`) or SEEK_HOLE from `off` into *at: 0, or ENXIO (at or
 * past the end; no data after `off`). Read lock held. */
int vy_file_seek(vy_fs *fs, vy_inode *in, uint64_t off, bool data, uint64_t *at);
/* Every byte written so far on the device (write-behind, wbehind.h); an
 * error if some never got there. For flush and fsync. */
vy_err vy_file_settle(vy_fs *fs, vy_inode *in, vy_error *e);
/* Make the file's memory mappable by another process (the launcher, a
 * client): every byte written is on the device, readahead is dropped,
 * holes get memory and a small file moves to memory of its own. The
 * caller holds the file's write lock. */
vy_err vy_file_share(vy_fs *fs, vy_inode *in, vy_error *e);
/* Memory for every hole of [off, end) of the file, before it is written
 * other than through vy_file_write (which does it itself). Write lock held. */
vy_err vy_file_back(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e);
/* Move the file to device `dev` (an index of fs->dev) by a copy between
 * the devices (core/peer.h), keeping its holes; the old memory is freed
 * after. Write lock held: readers see the file before or after, never
 * half moved. EBUSY while a program maps it; on failure nothing changed. */
vy_err vy_file_move(vy_fs *fs, vy_inode *in, unsigned dev, vy_error *e);
/* The last open file closed: readahead memory back, capacity fitted after
 * writing. */
void vy_file_closed(vy_fs *fs, vy_inode *in);
/* Free the buffer. */
void vy_file_drop(vy_fs *fs, vy_inode *in);
/* Free what nothing refers to any more (ns held): the buffer once no name
 * and no open handle is left (here), then what the namespace frees
 * (vy_ns_reap: the xattrs, and the inode once the kernel forgot it). */
void vy_inode_reap(vy_fs *fs, vy_inode *in);

#endif
