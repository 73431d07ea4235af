/* tkkeeper: the keeper of the takeover probe. A plain process: no FUSE
 * session, no libfuse. It creates the state memfd, starts the first daemon
 * (which mounts and hands back the /dev/fuse fd), holds both fds, and each
 * time a daemon dies by a signal starts the next one with the same binary and
 * hands it the fds. A daemon that exits (the mount is gone) ends it.
 *
 *   tkkeeper DAEMON MOUNTPOINT EVFD */
#include "tk.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>

static int evfd = -1;

/* Start generation `gen` of the daemon; 0 mounts, later ones adopt. */
static pid_t spawn(const char *daemon, const char *mnt, unsigned gen, int *sock)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		char g[16], s[16], e[16];
		int fd = dup(sv[1]); /* without CLOEXEC: it crosses exec */
		snprintf(g, sizeof(g), "%u", gen);
		snprintf(s, sizeof(s), "%d", fd);
		snprintf(e, sizeof(e), "%d", evfd);
		execl(daemon, daemon, gen ? "adopt" : "mount", mnt, g, s, e, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	*sock = sv[0];
	return pid;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: tkkeeper DAEMON MOUNTPOINT EVFD\n");
		return 2;
	}
	evfd = atoi(argv[3]);
	int state = memfd_create("tk-state", MFD_CLOEXEC);
	if (state < 0 || ftruncate(state, TK_STATE_SIZE) != 0) {
		perror("tkkeeper: state memfd");
		return 1;
	}
	int fuse = -1;
	for (unsigned gen = 0;; gen++) {
		int sock;
		pid_t pid = spawn(argv[1], argv[2], gen, &sock);
		if (pid < 0) {
			perror("tkkeeper: start daemon");
			return 1;
		}
		/* gen 0 gets the region and sends back /dev/fuse; later ones get both */
		int out[2] = {state, fuse};
		if (tk_send_fds(sock, out, gen ? 2 : 1) != 0)
			perror("tkkeeper: hand fds");
		if (gen == 0 && tk_recv_fds(sock, &fuse, 1) != 0) {
			fprintf(stderr, "tkkeeper: the first daemon sent no /dev/fuse fd\n");
			fuse = -1;
		} else if (gen == 0) {
			tk_event(evfd, "holding gen=0 pid=%d keeper=%d", (int)pid, (int)getpid());
		}
		close(sock);
		int st;
		while (waitpid(pid, &st, 0) < 0)
			if (errno != EINTR)
				return 1;
		uint64_t t = tk_now_ns();
		if (!WIFSIGNALED(st) || fuse < 0) {
			tk_event(evfd, "keeper-exit gen=%u status=%d", gen, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
			return 0;
		}
		tk_event(evfd, "died gen=%u sig=%d t=%llu", gen, WTERMSIG(st), (unsigned long long)t);
	}
}
