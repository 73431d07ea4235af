/* The daemon's file copies (`vyrefs cp`, vyrefs.copy): between a file of
 * the mount and any regular file whose fd a client passed, with the
 * daemon's threads, pinned staging memory and streams. FUSE's one request
 * at a time is not in the way, and the client needs no CUDA context of its
 * own. Permissions are the fds': the kernel checked them when the client
 * opened the files, and the map server (sock/mapsrv.c) checked what each fd
 * is and how it was opened. No lock of the file is held while the client's
 * fd is read or written: a client whose file stalls holds only its copy. */
#ifndef VY_COPYSRV_H
#define VY_COPYSRV_H

#include "fs/fs.h"
#include "sock/clientcred.h"

typedef struct vy_copysrv_job {
	vy_inode *in;     /* the mount's file, held like an open file */
	int other;        /* the other file's fd: the copy's to close, on every path */
	bool into;        /* into the mount's file (else out of it) */
	uint64_t size;    /* into: the bytes to copy, at most in's size */
	unsigned threads; /* 0: one per core, at most 16 */
	/* The client, as the kernel names it: out of the mount, its fd is
	 * written (and sized) with its credentials; into it, the mount's
	 * file loses set-id bits as its write(2) would make it. */
	const vy_clientcred *cred;
	/* Called every 50 ms from the calling thread: report progress; true
	 * to stop (the client went away). */
	bool (*tick)(void *ctx, uint64_t done, uint64_t total);
	void *ctx;
} vy_copysrv_job;

/* Copy; *done gets the data bytes moved (holes of a sparse source are
 * neither read nor counted: the file's memory already reads as zeros). */
vy_err vy_copysrv_run(vy_fs *fs, const vy_copysrv_job *job, uint64_t *done, uint64_t *total, vy_error *e);

/* Whether no copy's worker is left (one may be stuck in a client's fd
 * after its copy was abandoned), waiting at most wait_ms for them. */
bool vy_copysrv_quiet(vy_fs *fs, int wait_ms);

#endif
