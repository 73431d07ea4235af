/* mount(8)'s standard flags: which ones libfuse passes to the kernel at the
 * mount, which ones vyrefs applies itself right after it (libfuse 3.14
 * does not know them), and which ones are accepted and do nothing, as the
 * kernel's own filesystems accept them. One table for the mount, the
 * remount and --help. */
#ifndef VY_MOUNTFLAGS_H
#define VY_MOUNTFLAGS_H

#include <stdbool.h>
#include <stddef.h>

typedef enum vy_mountflag_kind {
	VY_MF_LIBFUSE, /* libfuse's mount passes it to the kernel */
	VY_MF_LATE,    /* a per-mount flag vyrefs sets after the mount */
	VY_MF_NOOP,    /* accepted and dropped (fstab's, or nothing to do) */
} vy_mountflag_kind;

typedef struct vy_mountflag {
	const char *name;
	vy_mountflag_kind kind;
	unsigned long set, clear; /* MS_* bits it sets and clears */
} vy_mountflag;

/* The flag called `name` (x-* and comment=... are no-ops), or NULL. */
const vy_mountflag *vy_mountflag_find(const char *name);

/* The mount's MS_* bits after the flags of comma-separated `list`, from
 * `flags`. */
unsigned long vy_mountflags_apply(unsigned long flags, const char *list);

/* The items of `list` that libfuse's mount takes, comma-separated, into
 * out (cap bytes; list fits, so they do). */
void vy_mountflags_libfuse(const char *list, char *out, size_t cap);

/* The per-mount flags mountinfo's sixth field lists for `mountpoint` (an
 * absolute path; the topmost mount there): MS_RDONLY, MS_NOSUID, MS_NODEV,
 * MS_NOEXEC, the atime flags (MS_STRICTATIME where none is listed),
 * MS_NODIRATIME, MS_NOSYMFOLLOW; false when it is not there. */
bool vy_mountflags_now(const char *mountpoint, unsigned long *mf);

/* Set the LATE flags of `list` on the live mount at `mountpoint` (an
 * absolute path) with one bind remount, starting from its per-mount flags
 * as /proc/self/mountinfo shows them (nothing asks the daemon, whose loop
 * need not run yet). 0, or an errno with `why` filled (a Fix included). */
int vy_mountflags_late(const char *mountpoint, const char *list, char *why, size_t cap);

#endif
