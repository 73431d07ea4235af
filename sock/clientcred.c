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

uint64_t vy_clientcred_fsize_limit(const vy_clientcred *c)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/limits", (int)c->pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return UINT64_MAX;
	uint64_t limit = UINT64_MAX;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long soft;
		if (!strncmp(line, "Max file size", 13) && sscanf(line + 13, " %llu", &soft) == 1) {
			limit = soft;
			break;
		}
	}
	fclose(f);
	return limit;
}
