/* Lookups in /proc/self/mountinfo. */
#include "daemon/mountinfo.h"

#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

/* mountinfo escapes blanks and backslashes as \ooo. */
static void unescape(const char *in, char *out, size_t cap)
{
	size_t k = 0;
	for (const char *p = in; *p && k + 1 < cap; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
			out[k++] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			out[k++] = *p;
		}
	}
	out[k] = '\0';
}

bool vy_mountinfo_find(const char *mountpoint, const char *type, dev_t *dev)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[8192];
	bool found = false;
	while (fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		char point[4096], fstype[64], plain[4096];
		/* ID PARENT MAJ:MIN ROOT POINT OPTS ... - TYPE SOURCE SUPER */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, point) != 3)
			continue;
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(dash + 3, "%63s", fstype) != 1 || strncmp(fstype, type, strlen(type)) != 0)
			continue;
		unescape(point, plain, sizeof(plain));
		if (!strcmp(plain, mountpoint)) {
			if (dev)
				*dev = makedev(maj, min);
			found = true; /* the last one is the top of a stack */
		}
	}
	fclose(f);
	return found;
}
