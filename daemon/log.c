/* stderr or syslog, one line a message: control characters in what a
 * message quotes (a name, an xattr's value) are escaped, so no value can
 * forge a line of its own. */
#include "daemon/log.h"
#include "core/clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool to_syslog;

void vy_log_use_syslog(bool on)
{
	if (on && !to_syslog)
		openlog("vyrefs", LOG_PID, LOG_DAEMON);
	to_syslog = on;
}

void vy_log(int priority, const char *fmt, ...)
{
	char raw[1024], line[4 * sizeof(raw)];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
		if (*p >= 0x20 && *p != 0x7f)
			line[n++] = (char)*p;
		else if (*p == '\n')
			n += (size_t)snprintf(line + n, sizeof(line) - n, "\\n");
		else
			n += (size_t)snprintf(line + n, sizeof(line) - n, "\\x%02x", *p);
	}
	line[n] = '\0';
	if (to_syslog)
		syslog(priority, "%s", line);
	else
		fprintf(stderr, "vyrefs: %s\n", line);
}

void vy_log_step(const char *step)
{
	static int on = -1; /* read once; a race reads the same value twice */
	if (on < 0) {
		const char *v = getenv("VYREFS_TRACE_UNMOUNT");
		on = v && !strcmp(v, "1");
	}
	if (on)
		vy_log(LOG_INFO, "teardown t=%llu %s", (unsigned long long)(vy_monotonic_ns() / 1000), step);
}
