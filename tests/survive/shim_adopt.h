/* For the survive suites' LD_PRELOAD shims (killshim.c, devicegate.c):
 * is this process a successor, `vyrefs --adopt ...` (argv[1], read from
 * /proc/self/cmdline, NUL-separated)? */
#ifndef VY_SHIM_ADOPT_H
#define VY_SHIM_ADOPT_H
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

static inline bool shim_is_successor(void)
{
	char cmd[256];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return false;
	cmd[n] = '\0';
	size_t first = strlen(cmd) + 1; /* argv[1] follows argv[0]'s NUL */
	return first < (size_t)n && !strcmp(cmd + first, "--adopt");
}
#endif
