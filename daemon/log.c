/* stderr or syslog. */
#include "daemon/log.h"

#include <stdarg.h>
#include <stdio.h>

static bool to_syslog;

void vy_log_use_syslog(bool on)
{
	if (on && !to_syslog)
		openlog("vyrefs", LOG_PID, LOG_DAEMON);
	to_syslog = on;
}

void vy_log(int priority, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (to_syslog) {
		vsyslog(priority, fmt, ap);
	} else {
		fputs("vyrefs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}
