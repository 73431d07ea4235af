/* .vyre/ctl: dispatch sequences written as text, run through ctl/, replied
 * to on the same open file, and logged (fs/seqlog.h: .vyre/log). */
#ifndef VY_CTL_FILE_H
#define VY_CTL_FILE_H

#include <sys/types.h>

#include "fs/fs.h"

/* Run every complete statement of this write as one sequence; partial text
 * waits. Returns 0 or the errno for write(): EINVAL for bad input, ENOSPC,
 * EBUSY, EIO for a device failure. */
int vy_ctlfile_write(vy_fs *fs, vy_open *h, const char *buf, size_t size, pid_t pid, const _Atomic uint32_t *stop);
/* At flush: what is left unfinished is an error (0 or EINVAL). */
int vy_ctlfile_flush(vy_fs *fs, vy_open *h, pid_t pid);
/* Read the reply of the last sequence written through `h`, once. */
size_t vy_ctlfile_read(vy_open *h, char *buf, size_t size);
/* A successor: open control file `h` as the dead daemon left it (kept by
 * vy_persist_ctl): its reply, its last sequence `seq`, `running` the write
 * whose sequence was running (0: none; its resend gets EIO and the reply
 * says the daemon restarted), and `pending` bytes of an unfinished
 * statement (lost: the next write is refused and says so). */
void vy_ctlfile_adopt(vy_fs *fs, vy_open *h, uint64_t running, uint64_t seq, uint32_t pending, int next_line,
		      const char *reply, size_t reply_len);

/* A .vyre file written only (ctl, upgrade): a truncate to 0 (the shell's
 * `>`) passes as nothing, any other size is EPERM (vy_kind_ops.resize). */
bool vy_ctl_truncated_only(fuse_req_t req, vy_fs *fs, vy_inode *in, off_t size, bool *resized);

#endif
