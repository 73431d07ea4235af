/* `vyrefs cp`: cp's common options over vy_copy_file (client/copy.c), so files
 * go into and out of a mount at the speed of the other side. */
#include "client/cp.h"
#include "client/mapping.h"
#include "client/vyrefs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct opts {
	bool recursive, preserve, force, no_clobber, verbose, progress;
	int threads;
} opts;

typedef struct bar {
	const char *name;
	double start;
	bool draw;
	uint64_t done; /* what the copy moved: data only, holes are not read */
} bar;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void show(uint64_t done, uint64_t total, void *ctx)
{
	bar *b = ctx;
	b->done = done;
	if (!b->draw)
		return;
	double s = now_s() - b->start;
	int pct = total ? (int)(done * 100 / total) : 100;
	char line[40];
	int fill = pct * 30 / 100;
	memset(line, '#', (size_t)fill);
	memset(line + fill, '.', (size_t)(30 - fill));
	line[30] = '\0';
	fprintf(stderr, "\r%-24.24s [%s] %3d%% %8.1f MiB %6.2f GB/s", b->name, line, pct, (double)done / (1 << 20),
		s > 0 ? (double)done / s / 1e9 : 0.0);
	if (done >= total)
		fputc('\n', stderr);
}

static const char *way_name(int how)
{
	return how == VY_COPY_DAEMON	 ? "by the daemon, around FUSE"
	       : how == VY_COPY_IN_MOUNT ? "in the mount, device to device"
					 : "plain read and write";
}

/* -p, as cp -p: owner, group, mode and times. setuid and setgid (and
 * sticky) stay only when the owner and group were kept too: a setuid file
 * of someone else's made ours would run with our authority. */
static int preserve(const char *src, const char *dst, const struct stat *st)
{
	struct timespec t[2] = {st->st_atim, st->st_mtim};
	int rc = 0;
	bool owned = lchown(dst, st->st_uid, st->st_gid) == 0;
	if (!owned && errno != EPERM)
		rc = -1;
	mode_t mode = st->st_mode & (owned ? 07777 : 0777);
	if (!S_ISLNK(st->st_mode) && chmod(dst, mode) != 0)
		rc = -1;
	if (utimensat(AT_FDCWD, dst, t, AT_SYMLINK_NOFOLLOW) != 0)
		rc = -1;
	if (rc)
		fprintf(stderr, "vyrefs cp: preserving attributes of '%s' from '%s': %s\n", dst, src, strerror(errno));
	return rc;
}

static int copy_one(const opts *o, const char *src, const char *dst);

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int copy_dir(const opts *o, const char *src, const char *dst, const struct stat *st)
{
	/* One made here is ours alone until its files are in, then gets src's
	 * permission bits less the umask, as cp -r's; an existing one keeps
	 * its mode. */
	bool made = mkdir(dst, 0700) == 0;
	if (!made && errno != EEXIST) {
		fprintf(stderr, "vyrefs cp: cannot create directory '%s': %s\n", dst, strerror(errno));
		return 1;
	}
	/* In name order: a model's numbered shards then fill the GPUs in
	 * layer order (docs/devices.md), whatever order the source lists. */
	struct dirent **list = NULL;
	int n = scandir(src, &list, NULL, by_name);
	if (n < 0) {
		fprintf(stderr, "vyrefs cp: cannot open directory '%s': %s\n", src, strerror(errno));
		return 1;
	}
	int rc = 0;
	for (int i = 0; i < n; i++) {
		const char *name = list[i]->d_name;
		char *s = NULL, *t = NULL;
		if (strcmp(name, ".") && strcmp(name, "..") && rc != 2) {
			if (asprintf(&s, "%s/%s", src, name) < 0 || asprintf(&t, "%s/%s", dst, name) < 0) {
				free(s);
				s = t = NULL;
				fprintf(stderr, "vyrefs cp: out of memory copying '%s'\n", src);
				rc = 2;
			} else {
				rc |= copy_one(o, s, t);
			}
		}
		free(s);
		free(t);
		free(list[i]);
	}
	free(list);
	rc = rc ? 1 : 0;
	if (made && chmod(dst, st->st_mode & 0777 & ~vy_client_umask()) != 0)
		rc = 1;
	if (o->preserve)
		rc |= preserve(src, dst, st) ? 1 : 0;
	return rc;
}

static int copy_one(const opts *o, const char *src, const char *dst)
{
	struct stat st, dt;
	if (lstat(src, &st) != 0) {
		fprintf(stderr, "vyrefs cp: cannot stat '%s': %s\n", src, strerror(errno));
		return 1;
	}
	if (S_ISDIR(st.st_mode)) {
		if (!o->recursive) {
			fprintf(stderr, "vyrefs cp: -r not specified; omitting directory '%s'\n", src);
			return 1;
		}
		return copy_dir(o, src, dst, &st);
	}
	bool exists = lstat(dst, &dt) == 0;
	if (exists && o->no_clobber)
		return 0;
	if (exists && dt.st_dev == st.st_dev && dt.st_ino == st.st_ino) {
		fprintf(stderr, "vyrefs cp: '%s' and '%s' are the same file\n", src, dst);
		return 1;
	}
	if (S_ISLNK(st.st_mode)) { /* as cp -r does: the link itself */
		char target[4096];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0 || (target[n] = '\0', (exists && unlink(dst) != 0)) || symlink(target, dst) != 0) {
			fprintf(stderr, "vyrefs cp: cannot copy link '%s': %s\n", src, strerror(errno));
			return 1;
		}
		return o->preserve ? (preserve(src, dst, &st) ? 1 : 0) : 0;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "vyrefs cp: '%s' is not a regular file, directory or link: skipped\n", src);
		return 1;
	}
	bar b = {.start = now_s(), .draw = o->progress};
	char *base = strdup(src);
	b.name = base ? basename(base) : src;
	int how = 0;
	int rc = vy_copy_file(src, dst, o->threads, show, &b, &how);
	if (rc == -EACCES && o->force && exists && unlink(dst) == 0)
		rc = vy_copy_file(src, dst, o->threads, show, &b, &how);
	free(base);
	if (rc) {
		fprintf(stderr, "vyrefs cp: '%s' -> '%s': %s\n", src, dst, vy_last_error());
		return 1;
	}
	if (o->verbose) {
		double s = now_s() - b.start;
		printf("'%s' -> '%s' (%s, %llu of %llu bytes moved, %.2f GB/s)\n", src, dst, way_name(how),
		       (unsigned long long)b.done, (unsigned long long)st.st_size, s > 0 ? (double)st.st_size / s / 1e9 : 0.0);
		if (how == VY_COPY_PLAIN && st.st_size > 0 && vy_last_error()[0])
			printf("  plain copy: %s\n", vy_last_error());
	}
	return o->preserve ? (preserve(src, dst, &st) ? 1 : 0) : 0;
}

/* Killed by a signal, a process's files are closed in the order of their
 * numbers: the destination on the mount, whose close waits for the copy
 * into it, before the socket to the daemon, whose close stops that copy.
 * So an interrupted copy ran to its end. On SIGINT, SIGTERM or SIGHUP the
 * files are closed from the highest number down (the socket first), then
 * the signal kills the process as before. */
static int fd_top = 1024;

static void stop_copying(int sig)
{
	for (int fd = fd_top; fd > 2; fd--)
		close(fd);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void stop_copying_on_signals(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
		fd_top = r.rlim_cur > 65536 ? 65536 : (int)r.rlim_cur;
	static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old, sa = {.sa_handler = stop_copying};
		sigemptyset(&sa.sa_mask);
		/* A signal ignored when we started (a background job's SIGINT) stays so. */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: vyrefs cp [-rpfnv] [--progress|--no-progress] [--threads=N] SRC... DST\n"
		   "Copy files into, out of and within vyrefs mounts at the speed of the other side:\n"
		   "the mount's daemon moves the bytes with N threads (one per core, at most 16)\n"
		   "through pinned memory, around FUSE. With no mount on either side it reads and\n"
		   "writes.\n"
		   "  -r, -R, --recursive   copy directories\n"
		   "  -p                    keep mode, owner and times\n"
		   "  -f, --force           remove a destination that cannot be opened, and try again\n"
		   "  -n, --no-clobber      do not overwrite an existing file\n"
		   "  -v, --verbose         say what is done, and how (mapped or plain)\n"
		   "  --progress, --no-progress   a progress bar on stderr (default: when a terminal)\n"
		   "  --threads=N           the daemon reads and writes with N threads at once, 1 to 16\n"
		   "                        (default: one per core, at most 16); fewer leave cores to\n"
		   "                        other work, more help a source or destination on fast storage\n");
}

int vy_cp_main(int argc, char **argv)
{
	opts o = {.progress = isatty(2) != 0};
	static const struct option longs[] = {
		{"recursive", no_argument, NULL, 'r'}, {"force", no_argument, NULL, 'f'},
		{"no-clobber", no_argument, NULL, 'n'}, {"verbose", no_argument, NULL, 'v'},
		{"progress", no_argument, NULL, 'P'},  {"no-progress", no_argument, NULL, 'Q'},
		{"threads", required_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "rRpfnvj:h", longs, NULL)) != -1) {
		switch (c) {
		case 'r':
		case 'R': o.recursive = true; break;
		case 'p': o.preserve = true; break;
		case 'f': o.force = true; o.no_clobber = false; break;
		case 'n': o.no_clobber = true; o.force = false; break;
		case 'v': o.verbose = true; break;
		case 'P': o.progress = true; break;
		case 'Q': o.progress = false; break;
		case 'j': {
			char *end;
			long n = strtol(optarg, &end, 10);
			if (*end || n < 1 || n > 16) {
				fprintf(stderr, "vyrefs cp: --threads=%s: give 1 to 16 (Fix: e.g. --threads=8)\n", optarg);
				return 1;
			}
			o.threads = (int)n;
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 1;
		}
	}
	int n = argc - optind;
	if (n < 2) {
		fprintf(stderr, "vyrefs cp: missing %s operand (Fix: vyrefs cp SRC... DST)\n", n ? "destination" : "file");
		return 1;
	}
	stop_copying_on_signals();
	const char *dst = argv[argc - 1];
	struct stat dt;
	bool into_dir = stat(dst, &dt) == 0 && S_ISDIR(dt.st_mode);
	if (n > 2 && !into_dir) {
		fprintf(stderr, "vyrefs cp: target '%s' is not a directory\n", dst);
		return 1;
	}
	int rc = 0;
	for (int i = optind; i < argc - 1; i++) {
		const char *src = argv[i];
		char *target = NULL;
		if (into_dir) {
			char *copy = strdup(src);
			size_t len = copy ? strlen(copy) : 0;
			while (len > 1 && copy[len - 1] == '/')
				copy[--len] = '\0';
			if (!copy || asprintf(&target, "%s/%s", dst, basename(copy)) < 0)
				target = NULL;
			free(copy);
			if (!target) {
				fprintf(stderr, "vyrefs cp: out of memory\n");
				return 1;
			}
		}
		rc |= copy_one(&o, src, target ? target : dst);
		free(target);
	}
	return rc;
}
