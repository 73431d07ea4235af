/* oom_score_adj (see oom.h). */
#include "daemon/oom.h"
#include "daemon/log.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

static int set_adj(const char *value)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	ssize_t n = write(fd, value, strlen(value));
	int err = n == (ssize_t)strlen(value) ? 0 : n < 0 ? errno : EIO;
	close(fd);
	return err;
}

int vy_oom_exempt(bool say)
{
	int err = set_adj("-1000");
	/* A warning, not a notice: a system log that keeps warnings only
	 * still says why a takeover followed an OOM kill. (Not "takes over":
	 * that names a takeover in the log, which tests look for.) */
	if (err && say)
		vy_log(LOG_WARNING, "the OOM killer may choose this daemon: it cannot set its oom_score_adj to -1000 (%s%s). "
				    "Killing it frees none of the files' memory; with survive=on a successor serves in its place "
				    "(the mount pauses a second or two, nothing is lost), with survive=off every file is lost "
				    "(Fix: mount as root with CAP_SYS_RESOURCE: a container's --cap-add SYS_RESOURCE, or "
				    "AmbientCapabilities=CAP_SYS_RESOURCE in its unit)",
		       strerror(err), err == EACCES || err == EPERM ? ": no CAP_SYS_RESOURCE" : "");
	return err;
}
