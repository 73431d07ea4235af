/* statx's creation time (btime) through libfuse 3.14, which has no statx
 * operation. Since Linux 6.6 the kernel asks for btime with FUSE_STATX (FUSE
 * 7.39), and a filesystem that answers ENOSYS (libfuse 3.14 answers that for
 * an opcode it does not know) never gets asked again. The session's I/O
 * hooks (session.c) turn a FUSE_STATX into the GETATTR whose first fields it
 * shares, and its reply (a fuse_attr_out) into a fuse_statx_out with the
 * btime that the getattr operation gave for it.
 *
 * Thread-local: libfuse and vyrefs's loop read a request, run its operation
 * and send its reply in one worker thread, and getattr replies at once. */
#ifndef VY_FS_STATX_H
#define VY_FS_STATX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* io_read: a request of `n` bytes was read into `buf`; a FUSE_STATX becomes a
 * FUSE_GETATTR, remembered by its unique id. */
void vy_statx_request(void *buf, ssize_t n);

/* The getattr operation: the btime and chattr flags of the inode it is
 * about to reply for (used only if the request was a FUSE_STATX): statx
 * gets the btime, and STATX_ATTR_APPEND, IMMUTABLE and NODUMP in its
 * attributes, with those three in its mask, as tmpfs reports them. */
void vy_statx_of(const struct timespec *btime, unsigned fsflags);

/* io_writev: when this is the reply to a FUSE_STATX, write it to `fd` as a
 * fuse_statx_out and set *res to what writev returned; false otherwise
 * (the caller writes the reply as it is). */
bool vy_statx_reply(int fd, const struct iovec *iov, int count, ssize_t *res);

#endif
