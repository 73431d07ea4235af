/* Messages over a unix stream socket: a vy_msg_header, a body, and at most
 * VY_PROTO_FDS_MAX file descriptors on the header's first byte
 * (SCM_RIGHTS), as OpenSSH's monitor_fdpass.c passes them. */
#ifndef VY_CHANNEL_H
#define VY_CHANNEL_H

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

/* Send one message: the header, then `parts` body pieces (iov-style). */
vy_err vy_chan_send(int sock, uint16_t opcode, uint64_t unique, const void *const *parts, const size_t *lens,
		    unsigned nparts, const int *fds, unsigned nfds, vy_error *e);

/* Receive one message, waiting at most timeout_ms for its start (-1: no
 * limit). VY_ETIMEDOUT when nothing came; VY_EDEVICE when the peer closed
 * (EOF) or broke the framing; the channel is unusable after either.
 * For the first spin_us microseconds it polls without sleeping: a message
 * that comes soon (a launch's reply, the next launch) is then taken without
 * the scheduler's wake-up, which costs more than the launch itself. */
vy_err vy_chan_recv(int sock, int timeout_ms, unsigned spin_us, vy_msg *m, vy_error *e);

/* Free the body and close fds still owned. */
void vy_msg_free(vy_msg *m);

/* Take fd i out of the message (the caller owns it now); -1 if none. */
int vy_msg_take_fd(vy_msg *m, unsigned i);

#endif
