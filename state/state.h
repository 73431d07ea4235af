/* The state region library: what a daemon keeps for its successor, in
 * three memfds a keeper holds (docs/survive.md, state/README.md). No FUSE,
 * no device calls. One header for its callers:
 *
 *   first daemon:  vy_state_create -> vy_state_set_init -> serve:
 *                  vy_state_append under the namespace lock for every
 *                  change; vy_state_image_* when the log wants it
 *   successor:     vy_state_adopt(fds) -> vy_state_load(callbacks) -> serve
 *                  on, appending as above
 *   both:          vy_state_close (the keeper still holds its copies) */
#ifndef VY_STATE_STATE_H
#define VY_STATE_STATE_H

#include "state/image.h"

/* A fresh region with a log of `log_bytes` (a power of two >= 4096). */
vy_err vy_state_create(uint64_t log_bytes, vy_state **out, vy_error *e);

/* Take over a predecessor's region: check its header (another format is
 * VY_ENOTSUP, with the message to log, and nothing written), find the log's
 * committed end (what a killed writer left half-done is not there; a torn or
 * bad record below the tail stops the log there, said in *found), and be
 * ready to append after it. On success *out owns the fds; on failure they
 * stay the caller's. `found` may be NULL. */
vy_err vy_state_adopt(const vy_state_fds *fds, vy_state **out, vy_state_scan *found, vy_error *e);

/* Unmap and close this process's fds; NULL is fine. */
void vy_state_close(vy_state *s);

#endif
