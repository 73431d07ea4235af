/* The client library as a C program uses it, for tests/client/map_test.sh:
 *   vymap info PATH           map, print "size device", unmap
 *   vymap fill PATH BYTE      (host backend) set every byte through the
 *                             mapping, then vy_unmap
 *   vymap ro-cat PATH         (host backend) map read-only (VY_MAP_READONLY),
 *                             write its bytes to stdout
 *   vymap ro-write PATH       (host backend) map read-only; a forked child
 *                             writes its first byte: print how the child
 *                             ended ("child: signal N" or "child: exit N"),
 *                             then "parent: reads BYTE" (this process's
 *                             mapping after it)
 *   vymap hold PATH SECONDS   map, say "mapped", sleep (to be killed)
 *   vymap wait PATH [BYTE]    map, say "mapped", read stdin to its end,
 *                             (host backend) set every byte to BYTE if
 *                             given, then vy_unmap (the test decides when)
 * A failure prints vy_last_error() and exits with the errno. */
#include "client/vyrefs.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failed(int rc)
{
	fprintf(stderr, "%s\n", vy_last_error());
	return -rc;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: vymap info|fill|hold|wait|ro-cat|ro-write PATH [ARG]\n");
		return 2;
	}
	vy_mapping *m;
	bool ro = !strncmp(argv[1], "ro-", 3);
	int rc = vy_map(argv[2], ro ? VY_MAP_READONLY : 0, &m);
	if (rc)
		return failed(rc);
	const unsigned char *bytes = (const unsigned char *)(uintptr_t)vy_mapping_ptr(m);
	if (!strcmp(argv[1], "info")) {
		printf("%llu %d\n", (unsigned long long)vy_mapping_size(m), vy_mapping_device(m));
	} else if (!strcmp(argv[1], "fill") && argc == 4 && vy_mapping_device(m) < 0) {
		memset((void *)(uintptr_t)vy_mapping_ptr(m), atoi(argv[3]), vy_mapping_size(m));
	} else if (!strcmp(argv[1], "ro-cat") && vy_mapping_device(m) < 0) {
		if (fwrite(bytes, 1, vy_mapping_size(m), stdout) != vy_mapping_size(m))
			return 5;
	} else if (!strcmp(argv[1], "ro-write") && vy_mapping_device(m) < 0 && vy_mapping_size(m) > 0) {
		fflush(stdout);
		pid_t child = fork();
		if (child == 0) {
			*(volatile unsigned char *)bytes = (unsigned char)(bytes[0] ^ 0xff);
			_exit(0);
		}
		int st = 0;
		if (child < 0 || waitpid(child, &st, 0) != child)
			return 5;
		if (WIFSIGNALED(st))
			printf("child: signal %d\n", WTERMSIG(st));
		else
			printf("child: exit %d\n", WEXITSTATUS(st));
		printf("parent: reads %u\n", bytes[0]);
	} else if (!strcmp(argv[1], "hold") && argc == 4) {
		printf("mapped\n");
		fflush(stdout);
		sleep((unsigned)atoi(argv[3]));
	} else if (!strcmp(argv[1], "wait") && (argc == 3 || (argc == 4 && vy_mapping_device(m) < 0))) {
		printf("mapped\n");
		fflush(stdout);
		while (getchar() != EOF)
			;
		if (argc == 4)
			memset((void *)(uintptr_t)vy_mapping_ptr(m), atoi(argv[3]), vy_mapping_size(m));
	} else {
		fprintf(stderr, "vymap: bad arguments\n");
		vy_unmap(m);
		return 2;
	}
	rc = vy_unmap(m);
	return rc ? failed(rc) : 0;
}
