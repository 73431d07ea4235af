/* The client library as a C program uses it, for tests/client/map_test.sh:
 *   vymap info PATH           map, print "size device", unmap
 *   vymap fill PATH BYTE      (host backend) set every byte through the
 *                             mapping, then vy_unmap
 *   vymap hold PATH SECONDS   map, say "mapped", sleep (to be killed)
 *   vymap wait PATH [BYTE]    map, say "mapped", read stdin to its end,
 *                             (host backend) set every byte to BYTE if
 *                             given, then vy_unmap (the test decides when)
 * A failure prints vy_last_error() and exits with the errno. */
#include "client/vyrefs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failed(int rc)
{
	fprintf(stderr, "%s\n", vy_last_error());
	return -rc;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: vymap info|fill|hold|wait PATH [ARG]\n");
		return 2;
	}
	vy_mapping *m;
	int rc = vy_map(argv[2], 0, &m);
	if (rc)
		return failed(rc);
	if (!strcmp(argv[1], "info")) {
		printf("%llu %d\n", (unsigned long long)vy_mapping_size(m), vy_mapping_device(m));
	} else if (!strcmp(argv[1], "fill") && argc == 4 && vy_mapping_device(m) < 0) {
		memset((void *)(uintptr_t)vy_mapping_ptr(m), atoi(argv[3]), vy_mapping_size(m));
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
