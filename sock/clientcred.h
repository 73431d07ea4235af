/* Acting as a client (issue "survive 2", item 5): a daemon copy that
 * writes a client's fd does it with the client's own credentials, as her
 * own write(2) would: her fsuid, fsgid and groups (the kernel drops the
 * file capabilities, CAP_FSETID among them, with a non-root fsuid), no
 * CAP_SYS_RESOURCE, and her RLIMIT_FSIZE. Who she is comes from the
 * kernel: SO_PEERCRED and SO_PEERGROUPS of her socket. */
#ifndef VY_CLIENTCRED_H
#define VY_CLIENTCRED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define VY_CLIENTCRED_GROUPS_MAX 256

typedef struct vy_clientcred {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[VY_CLIENTCRED_GROUPS_MAX];
} vy_clientcred;

/* The credentials of the peer of unix socket `sock`: 0, or an errno
 * (more groups than VY_CLIENTCRED_GROUPS_MAX: E2BIG). */
int vy_clientcred_of(int sock, vy_clientcred *out);

/* Whether the client is in group `gid` (its fsgid or a supplementary one). */
bool vy_clientcred_in_group(const vy_clientcred *c, gid_t gid);

/* This thread, from now on, accesses files as the client (a root client:
 * as root; a daemon not run by root has no right to shed and stays as
 * it is). Per thread (raw syscalls: glibc's wrappers would change every
 * thread), and for good: only for a thread that ends after. 0, or an
 * errno (the thread must then touch nothing of the client's). */
int vy_clientcred_become(const vy_clientcred *c);

/* The RLIMIT_FSIZE (soft, in bytes; UINT64_MAX: unlimited) of the
 * process that connected socket `sock`, read from /proc/PID/limits while
 * that very process is alive (a pidfd of it, from the socket where the
 * kernel has SO_PEERPIDFD): taken when the connection is made, since a
 * child it hands the socket to may write after it has gone (issue
 * "edges", 4). 0, or an errno (ESRCH: it has exited). */
int vy_clientcred_fsize_of_peer(int sock, uint64_t *limit);

#endif
