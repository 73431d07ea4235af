/* The keeper's words (say.h). */
#include "keeper/say.h"
#include "keeper/wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static bool to_syslog;

void vy_keeper_say_to_syslog(void)
{
	openlog("vyrefs-keeper", LOG_PID, LOG_DAEMON);
	to_syslog = true;
}

void vy_keeper_say(int prio, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (to_syslog)
		syslog(prio, "%s", line);
	else
		fprintf(stderr, "vyrefs-keeper: %s\n", line);
}

uint64_t vy_keeper_now_ns(void)
{
	struct timespec t;
	if (clock_gettime(CLOCK_MONOTONIC, &t) != 0)
		return 0;
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void vy_keeper_step(const char *what)
{
	static int on = -1; /* read once; the keeper has one thread */
	if (on < 0) {
		const char *v = getenv("VYREFS_TRACE_UNMOUNT");
		on = v && !strcmp(v, "1");
	}
	if (on)
		vy_keeper_say(LOG_INFO, "teardown t=%llu %s", (unsigned long long)(vy_keeper_now_ns() / 1000), what);
}

void vy_keeper_describe(int st, bool reaped, char *out, size_t cap)
{
	if (!reaped)
		snprintf(out, cap, "found dead (its link closed unannounced)");
	else if (WIFSIGNALED(st))
		snprintf(out, cap, "killed by SIG%s", sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
	else if (WEXITSTATUS(st) == VY_EXIT_TAKEOVER)
		snprintf(out, cap, "handing over (vyrefs --upgrade)");
	else if (WEXITSTATUS(st) == VY_EXIT_REFUSED)
		snprintf(out, cap, "refusing the kept state (another state format)");
	else
		snprintf(out, cap, "exited with status %d", WEXITSTATUS(st));
}
