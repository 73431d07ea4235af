/* Acting as a client (see clientcred.h). */
#include "sock/clientcred.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int vy_clientcred_of(int sock, vy_clientcred *out)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0)
		return errno;
	out->pid = uc.pid;
	out->uid = uc.uid;
	out->gid = uc.gid;
	len = sizeof(out->groups);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERGROUPS, out->groups, &len) != 0)
		return errno == ERANGE ? E2BIG : errno;
	out->ngroups = (int)(len / sizeof(gid_t));
	return 0;
}

bool vy_clientcred_in_group(const vy_clientcred *c, gid_t gid)
{
	if (c->gid == gid)
		return true;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

/* CAP_SYS_RESOURCE out of this thread's effective set: reserved blocks
 * and quotas then hold for its writes. */
static int drop_sys_resource(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	if (syscall(SYS_capget, &h, d) != 0)
		return errno;
	d[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective &= ~CAP_TO_MASK(CAP_SYS_RESOURCE);
	d[CAP_TO_INDEX(CAP_FSETID)].effective &= ~CAP_TO_MASK(CAP_FSETID);
	return syscall(SYS_capset, &h, d) == 0 ? 0 : errno;
}

int vy_clientcred_become(const vy_clientcred *c)
{
	if (c->uid == 0)
		return 0; /* root's own write has root's rights */
	if (geteuid() != 0)
		return 0; /* a user's daemon has no capability to shed: the kernel's rules hold for its writes as for hers */
	if (syscall(SYS_setgroups, (size_t)c->ngroups, c->groups) != 0)
		return errno;
	/* setfsgid/setfsuid say the previous value, not whether it took:
	 * asked again (-1 changes nothing), they say the current one. */
	syscall(SYS_setfsgid, c->gid);
	syscall(SYS_setfsuid, c->uid);
	if ((gid_t)syscall(SYS_setfsgid, (gid_t)-1) != c->gid || (uid_t)syscall(SYS_setfsuid, (uid_t)-1) != c->uid)
		return EPERM;
	return drop_sys_resource();
}

/* The soft "Max file size" of /proc/PID/limits, in bytes: 0, or an errno. */
static int read_fsize(pid_t pid, uint64_t *limit)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? ESRCH : errno;
	int err = EPROTO;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "Max file size", 13))
			continue;
		const char *v = line + 13 + strspn(line + 13, " ");
		unsigned long long soft;
		if (!strncmp(v, "unlimited", 9)) {
			*limit = UINT64_MAX;
			err = 0;
		} else if (sscanf(v, "%llu", &soft) == 1) {
			*limit = soft;
			err = 0;
		}
		break;
	}
	fclose(f);
	return err;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

int vy_clientcred_fsize_of_peer(int sock, uint64_t *limit)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0)
		return errno;
	/* The process that connected, as a pidfd: from the socket itself
	 * (Linux 6.5), else by its pid (a pid reused since is then possible
	 * in principle). */
	int pidfd = -1;
	len = sizeof(pidfd);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0) {
		if (errno != ENOPROTOOPT && errno != EINVAL)
			return errno;
		pidfd = (int)syscall(SYS_pidfd_open, uc.pid, 0);
		if (pidfd < 0)
			return errno;
	}
	int err = read_fsize(uc.pid, limit);
	/* Still alive (a zombie counts: its pid is not free), so the limits
	 * read were its own, not a process's that took its pid since. */
	if (!err && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) != 0)
		err = errno;
	close(pidfd);
	return err;
}
