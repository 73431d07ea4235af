/* The daemon <-> launcher channel: a unix stream socket and a mailbox in
 * shared memory beside it.
 *
 * Messages (a vy_msg_header and a body) go through the mailbox: one slot
 * for requests, one for replies, each announced by bumping a sequence
 * number. The receiver polls that number for a short while before it sleeps
 * on it (a futex), so a message that comes soon (a launch's reply, the next
 * launch) costs no system call and no scheduler wake-up; those cost more
 * than a launch. A message with fds (SCM_RIGHTS, as OpenSSH's
 * monitor_fdpass.c passes them) or too large for a slot goes over the
 * socket, and its slot says so. The socket also tells either side that the
 * other is gone (EOF). Without a mailbox (VY_CHANNEL=socket, to measure the
 * difference) every message goes over the socket.
 *
 * One request is outstanding at a time: the daemon sends the next only
 * after the reply to the last. */
#ifndef VY_CHANNEL_H
#define VY_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "proto/proto.h"

typedef struct vy_msg {
	vy_msg_header h;
	void *body;      /* malloc'd, h.len - sizeof(h) bytes (NULL when empty) */
	size_t len;
	int fds[VY_PROTO_FDS_MAX];
	unsigned nfds;   /* the receiver owns these: vy_msg_free closes them */
} vy_msg;

typedef struct vy_mailbox vy_mailbox; /* the shared memory's layout */

typedef struct vy_chan {
	int sock;
	vy_mailbox *mb;  /* NULL: socket only */
	int mb_fd;       /* the daemon's, to hand to the launcher (-1 after) */
	bool daemon;     /* which slot is ours to send into */
	uint32_t seen;   /* the peer's sequence number we have taken */
	uint32_t max_len; /* the longest message taken (0: VY_PROTO_MSG_MAX) */
	uint16_t max_fds; /* the most fds a message may carry (0: VY_PROTO_FDS_MAX) */
	int msg_ms;       /* a message that has begun ends within this (0: no limit) */
	const char *peer; /* who is at the other end, for messages (NULL: the launcher) */
} vy_chan;

/* The daemon's end: a mailbox to share, unless VY_CHANNEL=socket. */
vy_err vy_chan_open_daemon(vy_chan *c, int sock, vy_error *e);
/* The launcher's end, over the mailbox fd it was given (-1: none). The fd
 * stays the caller's. */
vy_err vy_chan_open_launcher(vy_chan *c, int sock, int mb_fd, vy_error *e);
/* Unmap the mailbox, close its fd and the socket. */
void vy_chan_close(vy_chan *c);

/* Send one message: the header, then `parts` body pieces (iov-style). */
vy_err vy_chan_send(vy_chan *c, uint16_t opcode, uint64_t unique, const void *const *parts, const size_t *lens,
		    unsigned nparts, const int *fds, unsigned nfds, vy_error *e);

/* Receive one message, waiting at most timeout_ms (-1: no limit), polling
 * without sleeping for the first spin_us microseconds. VY_ETIMEDOUT when
 * nothing came; VY_EDEVICE when the peer is gone or broke the framing; the
 * channel is unusable after either. */
vy_err vy_chan_recv(vy_chan *c, int timeout_ms, unsigned spin_us, vy_msg *m, vy_error *e);

/* Socket channels (no mailbox): wait at most timeout_ms for a message,
 * then look at it without taking it: its header, and the first `cap`
 * bytes (at most VY_CHAN_PEEK_MAX) of its body into `body` (*got). It
 * returns once the header and those bytes are there (within msg_ms of
 * the first byte). VY_ETIMEDOUT when nothing came; VY_EDEVICE when the
 * peer is gone or broke the framing. */
#define VY_CHAN_PEEK_MAX 64u
vy_err vy_chan_peek(vy_chan *c, int timeout_ms, vy_msg_header *h, void *body, size_t cap, size_t *got, vy_error *e);
/* Take the message vy_chan_peek saw (`h`), in one system call when it
 * is all there: a process killed around it took it whole or not at all. */
vy_err vy_chan_take(vy_chan *c, const vy_msg_header *h, vy_msg *m, vy_error *e);

/* The mailbox's stop flag: the daemon sets it to stop the running
 * sequence at its next step; the launcher reads it between steps. Without
 * a mailbox there is none (NULL; setting it does nothing). */
void vy_chan_set_stop(vy_chan *c, uint32_t v);
_Atomic uint32_t *vy_chan_stop_flag(vy_chan *c);

/* Free the body and close fds still owned. */
void vy_msg_free(vy_msg *m);

/* Take fd i out of the message (the caller owns it now); -1 if none. */
int vy_msg_take_fd(vy_msg *m, unsigned i);

#endif
