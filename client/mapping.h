/* Inside libvyrefs: what client/copy.c shares with libvyrefs.c beyond
 * vyrefs.h (finding, trusting and asking the mount's daemon, and the error
 * slot). */
#ifndef VY_CLIENT_MAPPING_H
#define VY_CLIENT_MAPPING_H

#include "client/mountinfo.h"
#include "client/vyrefs.h"
#include "core/err.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A connection to a mount's daemon, whose uid SO_PEERCRED proved to be
 * the mount's (the uid that mounted it). */
typedef struct vy_client_conn {
	int sock;
	uid_t uid; /* the daemon's, as the kernel tells it */
	pid_t pid;
	uint64_t unique;     /* the last request's: an answer to an earlier one is dropped */
	char root[PATH_MAX]; /* the mount's root */
} vy_client_conn;

/* Connected to the daemon of the mount holding `file` (on `dev`): the
 * server's uid checked before anything is sent (EPERM if it is not the
 * mount's). */
int vy_client_connect(const char *file, dev_t dev, vy_client_conn *c);
void vy_client_close(vy_client_conn *c);
/* survive=on: daemon `dead` ended a connection with no answer. Once it
 * has exited (its pidfd, within a few seconds: else *died is false, it
 * did not die, and nothing is set), connected to its successor as
 * vy_client_connect finds it: each try's read of the mount's .vyre/socket
 * waits in FUSE until a daemon serves, as any request does; a successor
 * that dies before it answers is waited past too. -ETIMEDOUT after a
 * minute, and an error with a Fix when the mount is gone. */
int vy_client_connect_successor(const char *file, dev_t dev, pid_t dead, vy_client_conn *c, bool *died);
/* One request (with `nfds` fds), its reply of at least `min` bytes that
 * begins with a status; PROGRESS messages before it go to `progress`. */
struct vy_msg;
int vy_client_call(vy_client_conn *c, uint16_t op, const void *in, size_t len, const int *fds, unsigned nfds,
		   size_t min, void (*progress)(uint64_t, uint64_t, void *), void *ctx, struct vy_msg *r);
/* Set vy_last_error() and return -err. */
int vy_client_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same from a vy_error. */
int vy_client_fail_vy(const vy_error *e);
/* For an error of the device layer in this process: -EMFILE with its own
 * message when the fd table is what ran out, else as vy_client_fail_vy. */
int vy_client_fail_local(const vy_error *e);
/* For errno EMFILE or ENFILE: set the message that says so ("WHAT: too
 * many open files ...") and return -err; else 0. */
int vy_client_fail_fds(int err, const char *what);
/* Whether `need` more fds would not fit this process's table. */
bool vy_client_fds_short(unsigned need);
/* This process's umask, read without changing it (umask(2) would race
 * with other threads). */
mode_t vy_client_umask(void);

#endif
