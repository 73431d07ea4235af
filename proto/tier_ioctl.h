/* The ioctls `vyrefs prefetch` and `vyrefs evict` send on a file of a
 * backing mount (docs/tier.md): no argument, the kernel checked the fd's
 * open. 0, or an errno: EINVAL where the mount has no backing directory,
 * EBUSY for an eviction of a file that is dirty, mapped or pinned. */
#ifndef VY_PROTO_TIER_IOCTL_H
#define VY_PROTO_TIER_IOCTL_H

#include <sys/ioctl.h>

#define VY_IOC_PREFETCH _IO('v', 0x70) /* every byte of the file on the device */
#define VY_IOC_EVICT _IO('v', 0x71)    /* the file's device memory back, if clean */

#endif
