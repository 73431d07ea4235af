/* The keeper's log lines (stderr, or syslog once detached), its clock,
 * and a daemon's end in words. */
#ifndef VY_KEEPER_SAY_H
#define VY_KEEPER_SAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <syslog.h>

/* From now on to syslog (detached: --report-fd), as "vyrefs-keeper". */
void vy_keeper_say_to_syslog(void);

void vy_keeper_say(int prio, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* VYREFS_TRACE_UNMOUNT=1: a step of a clean unmount's end, timed on the
 * daemon's clock (daemon/log.h vy_log_step). */
void vy_keeper_step(const char *what);

/* CLOCK_MONOTONIC in ns, the clock the daemon and a successor share. */
uint64_t vy_keeper_now_ns(void);

/* How a daemon ended, for the log: its waitpid status `st`, or, not
 * reaped, that its link closed unannounced. */
void vy_keeper_describe(int st, bool reaped, char *out, size_t cap);

#endif
