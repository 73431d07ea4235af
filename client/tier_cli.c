/* `vyrefs prefetch [-r] PATH...` and `vyrefs evict [-r] PATH...` on a
 * backing mount (docs/tier.md): each file opened read-only (the kernel
 * checks it may be read) and one ioctl asks the daemon to load it whole,
 * or give its device memory back. */
#include "client/tier_cli.h"
#include "proto/tier_ioctl.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct tally {
	const char *cmd;
	unsigned long req;
	bool progress;
	uint64_t files, bytes, failed;
} tally;

static tally now; /* the run's: nftw gives its callback no context */

static void one(tally *t, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		fprintf(stderr, "vyrefs %s: %s: %s (Fix: give a file you may read)\n", t->cmd, path, strerror(errno));
		t->failed++;
		if (fd >= 0)
			close(fd);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return; /* directories without -r, devices: nothing to load */
	}
	if (ioctl(fd, t->req) != 0) {
		int err = errno;
		const char *fix = err == ENOTTY || err == EINVAL
					  ? "it works on files of a vyrefs mount over a directory (-o backing=DIR)"
				  : err == EBUSY ? "it is open for writing, dirty, mapped or pinned: sync, unmap or unpin it first"
				  : err == ENOSPC ? "the GPU has no room for it: evict others or mount with a larger budget"
						  : "see the mount's log";
		fprintf(stderr, "vyrefs %s: %s: %s (Fix: %s)\n", t->cmd, path, strerror(err), fix);
		t->failed++;
	} else {
		t->files++;
		t->bytes += (uint64_t)st.st_size;
	}
	close(fd);
	if (t->progress)
		fprintf(stderr, "\rvyrefs %s: %llu files, %.2f GB", t->cmd, (unsigned long long)t->files, t->bytes / 1e9);
}

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type == FTW_F)
		one(&now, path);
	return 0;
}

static int run(int argc, char **argv, const char *cmd, unsigned long req)
{
	now = (tally){.cmd = cmd, .req = req, .progress = isatty(2) != 0};
	tally *t = &now;
	bool recursive = false;
	static const struct option longs[] = {
		{"recursive", no_argument, NULL, 'r'}, {"quiet", no_argument, NULL, 'q'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "rRqh", longs, NULL)) != -1;) {
		if (c == 'r' || c == 'R')
			recursive = true;
		else if (c == 'q')
			t->progress = false;
		else {
			FILE *out = c == 'h' ? stdout : stderr;
			fprintf(out, "usage: vyrefs %s [-r] [-q] PATH...\n  %s\n", cmd,
				req == VY_IOC_PREFETCH ? "load each file from the backing directory onto the GPU, whole"
						       : "give each clean file's GPU memory back (it loads again when used)");
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "vyrefs %s: no files (Fix: vyrefs %s [-r] PATH...)\n", cmd, cmd);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		struct stat st;
		if (recursive && lstat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
			nftw(argv[i], walk_one, 16, FTW_PHYS | FTW_MOUNT);
		else
			one(t, argv[i]);
	}
	if (t->progress)
		fprintf(stderr, "\n");
	return t->failed ? 1 : 0;
}

int vy_prefetch_main(int argc, char **argv)
{
	return run(argc, argv, "prefetch", VY_IOC_PREFETCH);
}

int vy_evict_main(int argc, char **argv)
{
	return run(argc, argv, "evict", VY_IOC_EVICT);
}
