/* What /proc/self/mountinfo says is mounted where: the map server finds its
 * mount's device number there (asking the kernel for the mountpoint's
 * attributes would send a request to itself), and mounting refuses a
 * directory that a vyrefs mount already covers. */
#ifndef VY_MOUNTINFO_H
#define VY_MOUNTINFO_H

#include <stdbool.h>
#include <sys/types.h>

/* Whether a filesystem whose type starts with `type` ("fuse", "fuse.vyrefs")
 * is mounted on `mountpoint` (an absolute path); *dev (may be NULL) gets
 * the device number of the topmost one. */
bool vy_mountinfo_find(const char *mountpoint, const char *type, dev_t *dev);

#endif
