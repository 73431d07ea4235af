/* The custom io of a session that adopts a live /dev/fuse (survive=on):
 * the successor's first read returns the kernel's INIT request recorded by
 * the first daemon (its unique replaced by a marker), the reply libfuse
 * makes to it is swallowed and checked against the recorded reply, and
 * before the next read FUSE_NOTIFY_RESEND puts every request the dead
 * daemon had read and not answered back in the kernel's queue. session.c's
 * hooks call these; each does nothing in a session that mounted. */
#ifndef VY_ADOPT_IO_H
#define VY_ADOPT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Keep copies of the recorded INIT request and reply; the session is then
 * adopted. 0, or -1 when either is not an INIT exchange. */
int vy_adopt_io_start(const void *init_req, size_t req_len, const void *init_reply, size_t reply_len);
bool vy_adopt_active(void);

/* read(2) of /dev/fuse as the adopted session sees it. */
ssize_t vy_adopt_io_read(int fd, void *buf, size_t len);
/* libfuse's reply to the replayed INIT: compared, logged where it
 * differs, never written. Returns the bytes "written". */
ssize_t vy_adopt_init_reply(const struct iovec *iov, int count);
/* A reply on its way out (not the INIT's). */
void vy_adopt_io_reply(void);

/* CLOCK_MONOTONIC of the adopted session's first answer, 0 before it;
 * `fn` (if set) is called once with it, from the worker that answered. */
uint64_t vy_adopt_first_answer_ns(void);
void vy_adopt_on_first_answer(void (*fn)(uint64_t ns));

#endif
