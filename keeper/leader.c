/* The daemon's first thread (leader.h). */
#include "keeper/leader.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Fields of /proc/PID/stat (proc(5)): the kernel's flags of the thread
 * and its exit status. */
#define FLAGS_FIELD 9
#define EXIT_CODE_FIELD 52
#define PF_EXITING 0x4ul /* include/linux/sched.h: in do_exit */

bool vy_leader_gone(pid_t pid, int *status)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false; /* reaped already: SIGCHLD says so */
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* The name may hold anything; the fields after it are plain. */
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return false;
	bool dead = p[2] == 'Z' || p[2] == 'X';
	unsigned long flags = 0;
	*status = 9; /* SIGKILL's, when the field cannot be read */
	int field = 3; /* the state */
	for (char *s = p + 2; *s; s++) {
		if (*s != ' ')
			continue;
		field++;
		if (field == FLAGS_FIELD)
			flags = strtoul(s + 1, NULL, 10);
		else if (field == EXIT_CODE_FIELD)
			*status = atoi(s + 1);
	}
	/* Exiting, not yet a zombie: the thread that closes the last fds
	 * may be this one, waiting on the mount in its exit. */
	return dead || (flags & PF_EXITING);
}
