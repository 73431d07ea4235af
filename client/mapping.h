/* Inside libvyrefs: what client/copy.c shares with libvyrefs.c beyond
 * vyrefs.h (finding and asking the mount's daemon, and the error slot). */
#ifndef VY_CLIENT_MAPPING_H
#define VY_CLIENT_MAPPING_H

#include "client/vyrefs.h"
#include "core/err.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The root of the mount that holds `file` (on device `dev`). */
int vy_client_mount_root(const char *file, dev_t dev, char *root, size_t cap);
/* Connected to the daemon of the mount holding `file` (on `dev`). */
int vy_client_connect(const char *file, dev_t dev, int *sock);
/* One request (with `nfds` fds), its reply of at least `min` bytes that
 * begins with a status; PROGRESS messages before it go to `progress`. */
struct vy_msg;
int vy_client_call(int sock, uint16_t op, const void *in, size_t len, const int *fds, unsigned nfds, size_t min,
		   void (*progress)(uint64_t, uint64_t, void *), void *ctx, struct vy_msg *r);
/* Set vy_last_error() and return -err. */
int vy_client_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same from a vy_error. */
int vy_client_fail_vy(const vy_error *e);

#endif
