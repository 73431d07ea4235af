/* A request's changes and its answer, kept together (persist/README.md,
 * "Requests"): the records fs/ writes while a worker serves a request that
 * changes names, handles or lookup counts wait in that thread, and go into
 * the log as one record (all or none) with the reply, just before the reply
 * is written to the kernel. A daemon killed between the two leaves a
 * successor the change and its answer: the kernel's resend of the request
 * is answered with that reply instead of being run again (a resent mkdir
 * gets its entry, not EEXIST; a resent lookup counts its reference once).
 * Killed before it, the change is not kept, and the resend runs it anew.
 *
 * The session (daemon/) calls these from its read and write hooks, on the
 * worker that serves the request. With survive=off each returns at once. */
#ifndef VY_PERSIST_REQUEST_H
#define VY_PERSIST_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct vy_fs;

/* This thread now serves request `unique` (bit 63 clear); `with_answer`:
 * its records wait for its reply, else they are kept at once (a write, a
 * setattr: run again, they give the same result). What an earlier request
 * of this thread left unanswered is kept first. */
void vy_persist_request(struct vy_fs *fs, uint64_t unique, bool with_answer);
/* The request this thread serves (0: none). */
uint64_t vy_persist_serving(void);
/* From now on the records of the request this thread serves wait for its
 * reply, as if it had been read `with_answer` (a write to .vyre/ctl, which
 * must not run its sequence twice). */
void vy_persist_with_answer(struct vy_fs *fs);
/* A reply (the fuse_out_header first) is about to be written: keep the
 * request's records with it. A reply of another request (or larger than
 * VY_P_REPLY_MAX) keeps them with no answer. */
void vy_persist_reply(struct vy_fs *fs, uint64_t unique, const struct iovec *iov, int count);
/* The reply was written: its answer is no longer needed. */
void vy_persist_sent(struct vy_fs *fs, uint64_t unique);

/* A successor: the reply the dead daemon kept for request `unique` (the
 * kernel's resend, bit 63 cleared), copied into `buf` (its length
 * returned) and forgotten; 0 when none was kept (run it anew). */
size_t vy_persist_resent(struct vy_fs *fs, uint64_t unique, void *buf, size_t cap);

#endif
