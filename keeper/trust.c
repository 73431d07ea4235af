/* StrictModes for the binary an upgrade runs (trust.h). */
#include "keeper/trust.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FIX "install vyrefs where only root (or the mounting user) may write it and every directory above, e.g. make install"

/* One path: its owner and its write bits. */
static bool owned_and_closed(const char *p, uid_t owner, bool file, char *why, size_t cap)
{
	struct stat st;
	if (stat(p, &st) != 0) {
		snprintf(why, cap, "%s: %s (Fix: %s)", p, strerror(errno), FIX);
		return false;
	}
	if (file && !S_ISREG(st.st_mode)) {
		snprintf(why, cap, "%s is not a regular file (Fix: %s)", p, FIX);
		return false;
	}
	if (st.st_uid != 0 && st.st_uid != owner) {
		snprintf(why, cap, "%s belongs to uid %u, neither root nor the mount's (Fix: %s)", p, (unsigned)st.st_uid, FIX);
		return false;
	}
	/* A directory others may write but not rename in (the sticky bit, as
	 * /tmp's) cannot have our entry replaced: it is as good as closed. */
	bool sticky = !file && (st.st_mode & S_ISVTX);
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky) {
		snprintf(why, cap, "%s may be written by its group or others (mode %04o) (Fix: %s)", p,
			 (unsigned)(st.st_mode & 07777), FIX);
		return false;
	}
	return true;
}

bool vy_trusted_binary(const char *path, uid_t owner, char *why, size_t cap)
{
	char real[PATH_MAX];
	if (!realpath(path, real)) {
		snprintf(why, cap, "%s: %s (Fix: %s)", path, strerror(errno), FIX);
		return false;
	}
	if (!owned_and_closed(real, owner, true, why, cap))
		return false;
	/* Every directory above, up to /. */
	for (char *slash = strrchr(real, '/'); slash; slash = strrchr(real, '/')) {
		if (slash == real) {
			real[1] = '\0';
			return owned_and_closed(real, owner, false, why, cap);
		}
		*slash = '\0';
		if (!owned_and_closed(real, owner, false, why, cap))
			return false;
	}
	return true;
}
