/* Inside libvyrefs: which vyrefs mount holds a file, by the kernel's word
 * (/proc/self/mountinfo), never by a file a user could write. */
#ifndef VY_CLIENT_MOUNTINFO_H
#define VY_CLIENT_MOUNTINFO_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

/* One line of mountinfo, its escapes (\040 ...) decoded. */
typedef struct vy_mount_entry {
	unsigned major, minor;
	char root[PATH_MAX];  /* the directory of the filesystem mounted here ("/": its root) */
	char point[PATH_MAX]; /* where, in this process's view */
	char fstype[64];
	bool has_user;        /* super options named user_id= (FUSE's: the mounting uid) */
	uid_t user;
} vy_mount_entry;

/* Parse one line (without its newline); false if it is not one. */
bool vy_mountinfo_parse(const char *line, vy_mount_entry *e);

/* A vyrefs mount's root as this process sees it: where the root of the
 * filesystem is mounted, and the uid that mounted it (its daemon's). */
typedef struct vy_client_mount {
	char root[PATH_MAX];
	uid_t user;
} vy_client_mount;

/* The root of the vyrefs mount of device `dev` that holds `file`: a mount
 * entry of the device whose root field is "/" and whose mount point this
 * process reaches on that device (a bind mount of a subdirectory is not
 * the root). Sets vy_last_error and returns -errno: -ENOTSUP for a file not
 * on vyrefs (*is_vyrefs false) or on one whose root this process cannot
 * see (*is_vyrefs true). */
int vy_client_mount_root(const char *file, dev_t dev, vy_client_mount *m, bool *is_vyrefs);

#endif
