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
	if (err && say)
		vy_log(LOG_INFO, "the OOM killer may choose this daemon (oom_score_adj -1000: %s), and killing it frees "
				 "none of the files' memory (Fix: mount as root, or give vyrefs CAP_SYS_RESOURCE)",
		       strerror(err));
	return err;
}
