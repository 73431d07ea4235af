/* The daemon's first thread (leader.h). */
#include "keeper/leader.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The field of /proc/PID/stat that holds the exit status (proc(5)). */
#define EXIT_CODE_FIELD 52

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
	if (!p || p[1] != ' ' || (p[2] != 'Z' && p[2] != 'X'))
		return false;
	*status = 9; /* SIGKILL's, when the field cannot be read */
	int field = 3; /* the state */
	for (char *s = p + 2; *s; s++)
		if (*s == ' ' && ++field == EXIT_CODE_FIELD) {
			*status = atoi(s + 1);
			break;
		}
	return true;
}
