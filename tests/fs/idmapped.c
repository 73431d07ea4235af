/* idmapped SRC DST FS_ID VIEW_ID: an idmapped bind mount of SRC at DST, as
 * a container runtime makes one (open_tree, mount_setattr with
 * MOUNT_ATTR_IDMAP, move_mount): the file system's uid and gid FS_ID show
 * as VIEW_ID at DST, and what VIEW_ID makes there is FS_ID's. Root only.
 * Prints why and exits 1 when the kernel refuses. */
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif

static int die(const char *what)
{
	fprintf(stderr, "idmapped: %s: %s\n", what, strerror(errno));
	return 1;
}

/* Writes "FS VIEW 1" (the namespace's id, then the outside one) into
 * /proc/PID/FILE: the mount's ids map inside to outside. */
static int write_map(pid_t pid, const char *file, unsigned long fs, unsigned long view)
{
	char path[64], line[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	int n = snprintf(line, sizeof(line), "%lu %lu 1\n", fs, view);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int ok = write(fd, line, (size_t)n) == n;
	close(fd);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: idmapped SRC DST FS_ID VIEW_ID\n");
		return 2;
	}
	unsigned long fs = strtoul(argv[3], NULL, 10), view = strtoul(argv[4], NULL, 10);
	/* A child in a new user namespace whose map the mount takes; it
	 * waits on a pipe until the namespace is held by fd. */
	int p[2];
	if (pipe(p) != 0)
		return die("pipe");
	pid_t child = fork();
	if (child < 0)
		return die("fork");
	if (child == 0) {
		close(p[1]);
		if (unshare(CLONE_NEWUSER) != 0)
			_exit(1);
		char c;
		ssize_t r = read(p[0], &c, 1); /* until the parent closes it */
		(void)r;
		_exit(0);
	}
	close(p[0]);
	/* The child's namespace exists once its uid_map can be written. */
	int rc = 1, ns = -1;
	for (int i = 0; i < 1000; i++) {
		if (write_map(child, "uid_map", fs, view) == 0) {
			rc = 0;
			break;
		}
		usleep(1000);
	}
	if (rc == 0 && write_map(child, "gid_map", fs, view) != 0)
		rc = 1;
	if (rc == 0) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)child);
		ns = open(path, O_RDONLY | O_CLOEXEC);
	}
	close(p[1]);
	waitpid(child, NULL, 0);
	if (rc != 0 || ns < 0)
		return die("a user namespace with that map");
	int tree = (int)syscall(SYS_open_tree, AT_FDCWD, argv[1], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return die("open_tree");
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (unsigned long long)ns};
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) != 0)
		return die("mount_setattr MOUNT_ATTR_IDMAP");
	if (syscall(SYS_move_mount, tree, "", AT_FDCWD, argv[2], MOVE_MOUNT_F_EMPTY_PATH) != 0)
		return die("move_mount");
	return 0;
}
