/* What a client's file descriptor may be (fs/clientfd.h). */
#include "fs/clientfd.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

/* Filesystems whose files are the kernel's state, not data: reading or
 * writing them with the daemon's credentials would lend its authority. */
static const struct {
	unsigned long magic;
	const char *name;
} pseudo[] = {
	{PROC_SUPER_MAGIC, "proc"},       {SYSFS_MAGIC, "sysfs"},         {DEBUGFS_MAGIC, "debugfs"},
	{TRACEFS_MAGIC, "tracefs"},       {SECURITYFS_MAGIC, "securityfs"}, {CGROUP_SUPER_MAGIC, "cgroup"},
	{CGROUP2_SUPER_MAGIC, "cgroup2"}, {BPF_FS_MAGIC, "bpf"},          {0x62656570UL, "configfs"},
	{EFIVARFS_MAGIC, "efivarfs"},     {PSTOREFS_MAGIC, "pstore"},     {SELINUX_MAGIC, "selinuxfs"},
	{SMACK_MAGIC, "smackfs"},         {0x65735543UL, "fusectl"}, {BINFMTFS_MAGIC, "binfmt_misc"},
	{NSFS_MAGIC, "nsfs"},             {DEVPTS_SUPER_MAGIC, "devpts"},
};

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
	else if (need & VY_FD_WRITE)
		rc = refuse_flags(in->attr_flags, "the mount's file", e);
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
	struct stat st;
	if (fstat(fd, &st) != 0)
		return vy_fail(e, VY_EINVAL, "pass an open file descriptor", "fstat of the other file: %s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return vy_fail(e, VY_EINVAL, "copy regular files", "the other file is not a regular file");
	if (st.st_dev == mount_dev)
		return vy_fail(e, VY_EINVAL, "copy within the mount with cp (copy_file_range: device to device)",
			       "both files are on this mount");
	vy_err rc = check_mode(fd, need, "the other file", e);
	if (rc != VY_OK)
		return rc;
	struct statfs sf;
	if (fstatfs(fd, &sf) != 0)
		return vy_fail(e, VY_EINVAL, "pass a file of a filesystem that answers statfs", "fstatfs of the other file: %s",
			       strerror(errno));
	for (size_t i = 0; i < sizeof(pseudo) / sizeof(pseudo[0]); i++)
		if ((unsigned long)sf.f_type == pseudo[i].magic)
			return vy_fail(e, VY_EPERM, "copy with plain cp: the daemon does not read or write kernel state files",
				       "the other file is on %s, a filesystem of the kernel's state", pseudo[i].name);
	/* Not every filesystem has flags (ENOTTY): those have none to keep. */
	unsigned flags = 0;
	if ((need & VY_FD_WRITE) && ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0)
		return refuse_flags(flags, "the other file", e);
	return VY_OK;
}
