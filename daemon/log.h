/* Messages for the user: stderr until the daemon detaches, syslog after. */
#ifndef VY_LOG_H
#define VY_LOG_H

#include <stdbool.h>
#include <syslog.h>

void vy_log_use_syslog(bool on);
void vy_log(int priority, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
