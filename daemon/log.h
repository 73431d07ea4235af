/* Messages for the user: stderr until the daemon detaches, syslog after. */
#ifndef VY_LOG_H
#define VY_LOG_H

#include <stdbool.h>
#include <syslog.h>

void vy_log_use_syslog(bool on);
void vy_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* With VYREFS_TRACE_UNMOUNT=1 in the environment, a line `teardown
 * t=MONOTONIC_US STEP` (CLOCK_MONOTONIC, the clock the keeper's lines and
 * bench/probes/unmount share): where a clean unmount's time goes. */
void vy_log_step(const char *step);

#endif
