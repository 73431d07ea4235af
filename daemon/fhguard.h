/* An adopted session's guard on file handles. Until handles are stable ids
 * (docs/survive.md, session 4), an fh is a pointer into the daemon that
 * gave it out: one a dead daemon gave names nothing here. In a successor
 * every request carrying an fh is checked against the handles this process
 * gave out; an unknown one is answered at once (EBADF, or success for a
 * flush or release: nothing of it is left to flush or free), never
 * dereferenced. Only the adopted session pays for it. */
#ifndef VY_FHGUARD_H
#define VY_FHGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

void vy_fhguard_start(void);

/* A request just read (n bytes): true when it names a handle this process
 * never gave out; *err is then its answer (0 or a positive errno). */
bool vy_fhguard_request(const void *buf, size_t n, int *err);

/* A reply on its way out: an open's, create's or opendir's handle is
 * learned. */
void vy_fhguard_reply(const struct iovec *iov, int count);

#endif
