/* `mount -o remount,...` (mount.fuse3 runs `vyrefs SOURCE MNT -o
 * remount,...`): the mount flags change on the live mount; settings can
 * only be what the mount already runs with. */
#include "daemon/remount.h"
#include "daemon/mountflags.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

/* Linux 5.10's; glibc 2.36's headers may lack them. */
#define VY_ST_NOSYMFOLLOW 0x2000
#define VY_MS_NOSYMFOLLOW 256

/* The kernel's FUSE options mount(8) may hand back from the mount table. */
static bool fuse_kernel_option(const char *item)
{
	static const char *const prefixes[] = {"user_id=", "group_id=", "rootmode=", "max_read=", "blksize=", "fd="};
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(item, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

int vy_remount(const char *mountpoint, const char *mount_flags, const char *settings)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/.vyre/config", mountpoint) >= (int)sizeof(path)) {
		fprintf(stderr, "vyrefs: the path %s is too long (Fix: give a shorter mount point path)\n", mountpoint);
		return 2;
	}
	vy_config live;
	vy_error e;
	vy_config_defaults(&live);
	if (vy_config_load_file(&live, path, &e) != VY_OK) {
		fprintf(stderr,
			"vyrefs: cannot remount %s: it is not a vyrefs mount (no readable .vyre/config) (Fix: give the "
			"mount point of a vyrefs mount)\n",
			mountpoint);
		return 1;
	}
	/* Settings: each must leave the live configuration as it is. */
	char *list = settings ? strdup(settings) : NULL;
	if (settings && !list) {
		fprintf(stderr, "vyrefs: out of memory (Fix: free host memory)\n");
		return 1;
	}
	char before[4096], after[4096];
	vy_config_format_ini(&live, before, sizeof(before));
	int rc = 0;
	char *save = NULL;
	for (char *item = list ? strtok_r(list, ",", &save) : NULL; item && rc == 0; item = strtok_r(NULL, ",", &save)) {
		if (fuse_kernel_option(item))
			continue;
		vy_config next = live;
		if (vy_config_parse_list(&next, item, &e) != VY_OK) {
			fprintf(stderr, "vyrefs: %s\n", e.msg);
			rc = 2;
			break;
		}
		vy_config_format_ini(&next, after, sizeof(after));
		if (strcmp(before, after) != 0) {
			fprintf(stderr,
				"vyrefs: '%s' cannot change on a live mount (Fix: leave it out of the remount, or unmount "
				"and mount again with it)\n",
				item);
			rc = 2;
		}
	}
	free(list);
	if (rc != 0)
		return rc;
	/* Flags: the mount's own, changed by those given. */
	struct statvfs sv;
	if (statvfs(mountpoint, &sv) != 0) {
		fprintf(stderr, "vyrefs: cannot read the flags of %s: %s (Fix: check the mount point)\n", mountpoint,
			strerror(errno));
		return 1;
	}
	unsigned long mf = MS_REMOUNT;
	mf |= sv.f_flag & ST_RDONLY ? MS_RDONLY : 0;
	mf |= sv.f_flag & ST_NOSUID ? MS_NOSUID : 0;
	mf |= sv.f_flag & ST_NODEV ? MS_NODEV : 0;
	mf |= sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0;
	mf |= sv.f_flag & ST_SYNCHRONOUS ? MS_SYNCHRONOUS : 0;
	mf |= sv.f_flag & ST_NOATIME ? MS_NOATIME : 0;
	mf |= sv.f_flag & ST_NODIRATIME ? MS_NODIRATIME : 0;
	mf |= sv.f_flag & ST_RELATIME ? MS_RELATIME : 0;
	mf |= sv.f_flag & VY_ST_NOSYMFOLLOW ? VY_MS_NOSYMFOLLOW : 0;
	char *fl = strdup(mount_flags ? mount_flags : "");
	if (!fl) {
		fprintf(stderr, "vyrefs: out of memory (Fix: free host memory)\n");
		return 1;
	}
	mf = vy_mountflags_apply(mf, fl);
	free(fl);
	if (mount(NULL, mountpoint, NULL, mf, NULL) != 0) {
		int err = errno;
		fprintf(stderr, "vyrefs: cannot remount %s: %s (Fix: %s)\n", mountpoint, strerror(err),
			err == EBUSY  ? "close the files open for writing on it first"
			: err == EPERM ? "remount as root"
				       : "check the mount point and the flags");
		return 1;
	}
	/* The daemon reads the mount's flags again at a statfs (fs/atime.h):
	 * reads move atime as the new ones say once the remount returns. */
	if (statvfs(mountpoint, &sv) != 0)
		fprintf(stderr, "vyrefs: remounted %s, but cannot statfs it: %s (Fix: run df %s once)\n", mountpoint,
			strerror(errno), mountpoint);
	return 0;
}
