/* The daemon's first thread, watched on its own. A daemon killed while one
 * of its threads waits on its own mount (it closes a client's fd of a file
 * of the mount: the kernel sends FLUSH and waits, killable or not) cannot
 * finish dying until someone answers that request, and only a successor
 * can: its first thread exits (or waits in its exit), the rest of it waits.
 * So the keeper takes the first thread's exit as the daemon's death (vyrefs never ends that
 * thread alone: any exit or fatal signal ends every thread, and none runs
 * code of its own again). */
#ifndef VY_KEEPER_LEADER_H
#define VY_KEEPER_LEADER_H

#include <stdbool.h>
#include <sys/types.h>

/* How often the keeper looks. Nothing else tells it: SIGCHLD and a pidfd
 * wait for every thread, and a pidfd of the first thread alone
 * (PIDFD_THREAD) did not wake on Linux 6.18 while the others lived (tried:
 * the keeper slept on it with the daemon a zombie for minutes). */
#define VY_LEADER_LOOK_MS 250
/* Whether `pid`'s first thread has exited or is exiting (/proc/PID/stat:
 * a zombie, dead, or PF_EXITING in its flags: the thread that closes the
 * process's fds at its end may be this one); *status its exit status as
 * waitpid gives it (SIGKILL's until it is known). */
bool vy_leader_gone(pid_t pid, int *status);

#endif
