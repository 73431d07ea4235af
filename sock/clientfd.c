/* What a client's file descriptor may be (sock/clientfd.h). */
#include "sock/clientfd.h"
#include "fs/file.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>
#include <stdbool.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

/* Filesystems whose files are the kernel's state, not data: reading or
 * writing them with the daemon's credentials would lend its authority. */
static const char *const pseudo[] = {
	"proc",     "sysfs",   "debugfs",  "tracefs",   "securityfs", "cgroup",      "cgroup2", "bpf", "configfs",
	"efivarfs", "pstore",  "selinuxfs", "smackfs",  "fusectl",    "binfmt_misc", "nsfs",    "devpts", "autofs",
	"mqueue",   "rpc_pipefs",
};

/* The type of the filesystem an fd is on, read from what the kernel says
 * of the fd's mount (/proc/self/fdinfo's mnt_id, then mountinfo), never
 * from the filesystem itself: a FUSE filesystem whose daemon stopped
 * would hang a statfs. */
static bool fs_type_of(int fd, char *type, size_t cap)
{
	char path[64], line[4096];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "re");
	long mnt = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "mnt_id: %ld", &mnt) == 1)
			break;
	if (f)
		fclose(f);
	f = mnt >= 0 ? fopen("/proc/self/mountinfo", "re") : NULL;
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");
		long id;
		char t[128];
		if (sep && sscanf(line, "%ld", &id) == 1 && id == mnt && sscanf(sep + 3, "%127s", t) == 1) {
			snprintf(type, cap, "%s", t);
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* The access an fd was opened with, or why it will not do. */
static vy_err check_mode(int fd, int need, const char *which, vy_error *e)
{
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0)
		return vy_fail(e, VY_EINVAL, "pass an open file descriptor", "%s: F_GETFL: %s", which, strerror(errno));
	if (flags & O_PATH)
		return vy_fail(e, VY_EACCES, "open the file for reading or writing, not with O_PATH",
			       "%s was opened with O_PATH: it grants no access to the file's bytes", which);
	int mode = flags & O_ACCMODE;
	if ((need & VY_FD_READ) && mode == O_WRONLY)
		return vy_fail(e, VY_EACCES, need & VY_FD_WRITE ? "open the file with O_RDWR" : "open the file for reading",
			       "%s was opened write-only", which);
	if ((need & VY_FD_WRITE) && mode == O_RDONLY)
		return vy_fail(e, VY_EACCES, need & VY_FD_READ ? "open the file with O_RDWR" : "open the file for writing",
			       "%s was opened read-only", which);
	return VY_OK;
}

static vy_err refuse_flags(unsigned flags, const char *which, vy_error *e)
{
	if (flags & FS_IMMUTABLE_FL)
		return vy_fail(e, VY_EPERM, "chattr -i the file first (as root)", "%s is immutable (chattr +i)", which);
	if (flags & FS_APPEND_FL)
		return vy_fail(e, VY_EPERM, "append through the mount (>>), or chattr -a the file first (as root)",
			       "%s is append-only (chattr +a): it cannot be written in place", which);
	return VY_OK;
}

vy_err vy_clientfd_mount_file(vy_fs *fs, dev_t dev, int fd, int need, vy_inode **out, vy_error *e)
{
	struct stat st;
	*out = NULL;
	if (fstat(fd, &st) != 0)
		return vy_fail(e, VY_EINVAL, "pass an open file descriptor", "fstat of the passed fd: %s", strerror(errno));
	if (st.st_dev != dev)
		return vy_fail(e, VY_EINVAL, "name a file in this vyrefs mount",
			       "the passed file is not on this mount (device %u:%u, the mount is %u:%u)",
			       major(st.st_dev), minor(st.st_dev), major(dev), minor(dev));
	vy_err rc = check_mode(fd, need, "the mount's file", e);
	if (rc != VY_OK)
		return rc;
	pthread_mutex_lock(&fs->ns);
	vy_inode *in = vy_u64map_get(&fs->inodes, (uint64_t)st.st_ino);
	if (!in || in->kind != VY_FILE)
		rc = vy_fail(e, VY_EINVAL, "name a regular file", "inode %llu is not a regular file of this mount",
			     (unsigned long long)st.st_ino);
	else if (need & VY_FD_WRITE) {
		pthread_mutex_lock(&in->meta); /* chattr's flags are kept under meta */
		unsigned flags = in->attr_flags;
		pthread_mutex_unlock(&in->meta);
		rc = refuse_flags(flags, "the mount's file", e);
	}
	if (rc == VY_OK)
		in->opens++;
	pthread_mutex_unlock(&fs->ns);
	*out = rc == VY_OK ? in : NULL;
	return rc;
}

void vy_clientfd_let_go(vy_fs *fs, vy_inode *in)
{
	pthread_mutex_lock(&fs->ns);
	in->opens--;
	vy_inode_reap(fs, in);
	pthread_mutex_unlock(&fs->ns);
}

vy_err vy_clientfd_other(int fd, dev_t mount_dev, int need, vy_error *e)
{
	/* What the kernel has cached (type, device): the other file's
	 * filesystem is not asked, so one that stalls stalls no check. */
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &sx) != 0)
		return vy_fail(e, VY_EINVAL, "pass an open file descriptor", "statx of the other file: %s", strerror(errno));
	if (!S_ISREG(sx.stx_mode))
		return vy_fail(e, VY_EINVAL, "copy regular files", "the other file is not a regular file");
	if (makedev(sx.stx_dev_major, sx.stx_dev_minor) == mount_dev)
		return vy_fail(e, VY_EINVAL, "copy within the mount with cp (copy_file_range: device to device)",
			       "both files are on this mount");
	vy_err rc = check_mode(fd, need, "the other file", e);
	if (rc != VY_OK)
		return rc;
	char type[128];
	if (!fs_type_of(fd, type, sizeof(type))) /* EXDEV: libvyrefs copies the plain way */
		return vy_fail(e, VY_EXDEV,
			       "copy it with cp, or from a filesystem the mount's daemon sees (a chroot's root, or a mount of "
			       "another namespace, is not in its mountinfo)",
			       "the daemon cannot tell which filesystem the other file is on: its mount is not in the "
			       "daemon's /proc/self/mountinfo");
	for (size_t i = 0; i < sizeof(pseudo) / sizeof(pseudo[0]); i++)
		if (!strcmp(type, pseudo[i]))
			return vy_fail(e, VY_EPERM, "copy with plain cp: the daemon does not read or write kernel state files",
				       "the other file is on %s, a filesystem of the kernel's state", type);
	/* Flags need an ioctl the filesystem answers: a FUSE filesystem is
	 * not asked (it keeps its own, and could stall the asking). Not
	 * every filesystem has them (ENOTTY): those have none to keep. */
	unsigned flags = 0;
	if ((need & VY_FD_WRITE) && strncmp(type, "fuse", 4) != 0 && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0)
		return refuse_flags(flags, "the other file", e);
	return VY_OK;
}

static void *closer(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

void vy_clientfd_close(int fd)
{
	pthread_t t;
	pthread_attr_t attr;
	if (fd < 0)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, closer, (void *)(intptr_t)fd) != 0)
		close(fd);
	pthread_attr_destroy(&attr);
}
