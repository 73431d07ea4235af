/* systemd's readiness protocol (sd_notify(3)), for a mount run as a
 * service (systemd/vyrefs@.service.in, docs/manual.md "Under systemd"):
 * READY=1 once the mount answers, and MAINPID= naming the process
 * systemd should watch, the keeper under survive=on. Written here in a few
 * lines (one datagram to $NOTIFY_SOCKET) rather than linking libsystemd:
 * vyrefs builds and runs the same without it. */
#ifndef VY_NOTIFY_H
#define VY_NOTIFY_H

#include <sys/types.h>

/* Take $NOTIFY_SOCKET out of the environment (no launcher inherits it)
 * and keep it for the calls below; without it they do nothing. */
void vy_notify_init(void);

/* READY=1, MAINPID=main_pid and a STATUS line naming the mount point. */
void vy_notify_ready(pid_t main_pid, const char *mountpoint);

/* MAINPID=main_pid with a STATUS line saying why the main process changed. */
void vy_notify_main(pid_t main_pid, const char *why);

#endif
