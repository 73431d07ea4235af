/* mount(8)'s standard flags (see mountflags.h). */
#include "daemon/mountflags.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#ifndef MS_NOSYMFOLLOW
#define MS_NOSYMFOLLOW 256 /* Linux 5.10; glibc 2.36's headers lack it */
#endif

#ifndef MS_LAZYTIME
#define MS_LAZYTIME (1 << 25)
#endif

#define ATIMES (MS_NOATIME | MS_RELATIME | MS_STRICTATIME)

static const vy_mountflag flags[] = {
	{"ro", VY_MF_LIBFUSE, MS_RDONLY, 0},
	{"rw", VY_MF_LIBFUSE, 0, MS_RDONLY},
	{"nosuid", VY_MF_LIBFUSE, MS_NOSUID, 0},
	{"suid", VY_MF_LIBFUSE, 0, MS_NOSUID},
	{"nodev", VY_MF_LIBFUSE, MS_NODEV, 0},
	{"dev", VY_MF_LIBFUSE, 0, MS_NODEV},
	{"noexec", VY_MF_LIBFUSE, MS_NOEXEC, 0},
	{"exec", VY_MF_LIBFUSE, 0, MS_NOEXEC},
	{"sync", VY_MF_LIBFUSE, MS_SYNCHRONOUS, 0},
	{"async", VY_MF_LIBFUSE, 0, MS_SYNCHRONOUS},
	{"dirsync", VY_MF_LIBFUSE, MS_DIRSYNC, 0},
	{"noatime", VY_MF_LIBFUSE, MS_NOATIME, MS_RELATIME | MS_STRICTATIME},
	/* Not libfuse's: 3.15 and later refuse "atime" as an unknown option
	 * (Debian 13); clearing noatime needs nothing of the kernel's mount. */
	{"atime", VY_MF_LATE, 0, MS_NOATIME},
	/* libfuse 3.14 refuses these; they are the mount's, not the
	 * filesystem's, so a bind remount sets them. norelatime and
	 * nostrictatime leave the kernel's default (relatime), as on tmpfs. */
	{"relatime", VY_MF_LATE, MS_RELATIME, MS_NOATIME | MS_STRICTATIME},
	{"norelatime", VY_MF_LATE, 0, MS_RELATIME},
	{"strictatime", VY_MF_LATE, MS_STRICTATIME, MS_NOATIME | MS_RELATIME},
	{"nostrictatime", VY_MF_LATE, 0, MS_STRICTATIME},
	{"nodiratime", VY_MF_LATE, MS_NODIRATIME, 0},
	{"diratime", VY_MF_LATE, 0, MS_NODIRATIME},
	{"nosymfollow", VY_MF_LATE, MS_NOSYMFOLLOW, 0},
	{"symfollow", VY_MF_LATE, 0, MS_NOSYMFOLLOW},
	/* The superblock's: FUSE takes lazytime at a remount (a fresh FUSE
	 * mount never has it), and refuses mand. No i_version is kept
	 * (iversion), mandatory locks are gone from Linux (mand: tmpfs
	 * shows it and does nothing), silent only quiets a kernel's mount
	 * messages: accepted, nothing to do. */
	{"lazytime", VY_MF_LATE, MS_LAZYTIME, 0},
	{"nolazytime", VY_MF_LATE, 0, MS_LAZYTIME},
	{"iversion", VY_MF_NOOP, 0, 0},
	{"noiversion", VY_MF_NOOP, 0, 0},
	{"mand", VY_MF_NOOP, 0, 0},
	{"nomand", VY_MF_NOOP, 0, 0},
	{"silent", VY_MF_NOOP, 0, 0},
	{"loud", VY_MF_NOOP, 0, 0},
	/* mount(8)'s and fstab's own. */
	{"defaults", VY_MF_NOOP, 0, 0},
	{"auto", VY_MF_NOOP, 0, 0},
	{"noauto", VY_MF_NOOP, 0, 0},
	{"user", VY_MF_NOOP, 0, 0},
	{"nouser", VY_MF_NOOP, 0, 0},
	{"users", VY_MF_NOOP, 0, 0},
	{"owner", VY_MF_NOOP, 0, 0},
	{"group", VY_MF_NOOP, 0, 0},
	{"_netdev", VY_MF_NOOP, 0, 0},
	{"nofail", VY_MF_NOOP, 0, 0},
	{"default_permissions", VY_MF_NOOP, 0, 0}, /* vyrefs always has it */
};

const vy_mountflag *vy_mountflag_find(const char *name)
{
	static const vy_mountflag prefixed = {"x-*", VY_MF_NOOP, 0, 0};
	if (!strncmp(name, "x-", 2) || !strncmp(name, "comment=", 8))
		return &prefixed;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (!strcmp(flags[i].name, name))
			return &flags[i];
	return NULL;
}

unsigned long vy_mountflags_apply(unsigned long mf, const char *list)
{
	char *copy = strdup(list ? list : ""), *save = NULL;
	for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item; item = strtok_r(NULL, ",", &save)) {
		const vy_mountflag *f = vy_mountflag_find(item);
		if (f)
			mf = (mf & ~f->clear) | f->set;
	}
	free(copy);
	return mf;
}

void vy_mountflags_libfuse(const char *list, char *out, size_t cap)
{
	size_t len = 0;
	out[0] = '\0';
	char *copy = strdup(list ? list : ""), *save = NULL;
	for (char *item = copy ? strtok_r(copy, ",", &save) : NULL; item; item = strtok_r(NULL, ",", &save)) {
		const vy_mountflag *f = vy_mountflag_find(item);
		if (f && f->kind == VY_MF_LIBFUSE && len + strlen(item) + 2 <= cap)
			len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "", item);
	}
	free(copy);
}

bool vy_mountflags_now(const char *mountpoint, unsigned long *mf)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[8192], point[4096], opts[1024];
	bool found = false;
	while (fgets(line, sizeof(line), f)) {
		/* ID PARENT MAJ:MIN ROOT POINT OPTS ...; a mount point with a
		 * blank (\040) never equals an absolute path we compare. */
		if (sscanf(line, "%*u %*u %*s %*s %4095s %1023s", point, opts) != 2 || strcmp(point, mountpoint) != 0)
			continue;
		static const struct {
			const char *name;
			unsigned long bit;
		} bits[] = {{"ro", MS_RDONLY},         {"nosuid", MS_NOSUID},         {"nodev", MS_NODEV},
			    {"noexec", MS_NOEXEC},     {"noatime", MS_NOATIME},       {"nodiratime", MS_NODIRATIME},
			    {"relatime", MS_RELATIME}, {"nosymfollow", MS_NOSYMFOLLOW}};
		*mf = 0;
		char *save = NULL;
		for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save))
			for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
				if (!strcmp(o, bits[i].name))
					*mf |= bits[i].bit;
		if (!(*mf & ATIMES))
			*mf |= MS_STRICTATIME; /* none of them listed: strictatime */
		found = true;
	}
	fclose(f);
	return found;
}

int vy_mountflags_late(const char *mountpoint, const char *list, char *why, size_t cap)
{
	unsigned long now;
	if (!list || !list[0])
		return 0;
	if (!vy_mountflags_now(mountpoint, &now)) {
		snprintf(why, cap, "cannot find the new mount on %s in /proc/self/mountinfo (Fix: check that /proc is mounted)",
			 mountpoint);
		return ENOENT;
	}
	unsigned long want = vy_mountflags_apply(now, list);
	if (!(want & ATIMES))
		want |= MS_RELATIME; /* norelatime, nostrictatime: the kernel's default */
	if (want == now)
		return 0;
	/* The mount's flags by a bind remount; lazytime, the superblock's,
	 * by a plain one, which sets the mount's flags too. */
	unsigned long how = want & MS_LAZYTIME ? MS_REMOUNT : MS_REMOUNT | MS_BIND;
	if (mount(NULL, mountpoint, NULL, how | want, NULL) != 0) {
		int err = errno;
		snprintf(why, cap, "cannot set the mount flags %s on %s: %s (Fix: %s)", list, mountpoint, strerror(err),
			 err == EPERM ? "mount as root, or leave those flags out" : "leave those flags out");
		return err;
	}
	return 0;
}
