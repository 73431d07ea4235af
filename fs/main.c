/* vyrefs: the command line. This release carries the core (resident store,
 * pool, staging, transfers) and its self-check; mounting arrives with the
 * filesystem layer. */
#include <stdio.h>
#include <string.h>

#include "config/options.h"
#include "core/selfcheck.h"
#include "fs/version.h"

static void usage(FILE *to)
{
	fprintf(to,
		"usage: vyrefs --self-check [-o opt[,opt...]]\n"
		"       vyrefs --help | --version\n"
		"\n"
		"  --self-check   open the backend, move bytes through every core path\n"
		"                 (upload, fused ranged readback, fill, device copy, pool\n"
		"                 reuse), verify them, and check that device memory returns\n"
		"                 to its baseline; exit 0 when all passed\n"
		"  -o opt,...     backend=auto|cuda|host   (default auto: cuda when a GPU is\n"
		"                                          present, else host)\n"
		"                 ordinal=N                which GPU (default 0)\n"
		"                 host_memory=SIZE         host backend capacity (default 1/4 of RAM)\n"
		"                 resident_budget=SIZE|P%%  device bytes for buffers (default 90%%)\n"
		"                 pool_budget=SIZE         idle bytes kept for reuse (default\n"
		"                                          device memory / 32; 0 disables)\n"
		"                 staging_cache=SIZE       pinned host bytes cached (default 128M)\n"
		"\n"
		"Mounting (vyrefs MOUNTPOINT) arrives with the filesystem layer.\n");
}

int main(int argc, char **argv)
{
	vy_core_options opt;
	vy_core_options_default(&opt);
	int self_check = 0;
	vy_error e;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		}
		if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
			printf("vyrefs %s\n", VY_VERSION);
			return 0;
		}
		if (!strcmp(a, "--self-check")) {
			self_check = 1;
			continue;
		}
		if (!strcmp(a, "-o") || !strncmp(a, "-o", 2)) {
			const char *list = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			if (!list) {
				fprintf(stderr, "vyrefs: -o needs a value (Fix: write -o key=value, e.g. -o backend=host)\n");
				return 2;
			}
			if (vy_options_parse(&opt, list, &e) != VY_OK) {
				fprintf(stderr, "vyrefs: %s\n", e.msg);
				return 2;
			}
			continue;
		}
		if (a[0] == '-') {
			fprintf(stderr, "vyrefs: unknown option '%s' (Fix: see vyrefs --help)\n", a);
			return 2;
		}
		fprintf(stderr,
			"vyrefs: cannot mount %s: this build has no filesystem layer yet "
			"(Fix: run `vyrefs --self-check` to check the core; mounting arrives in the next release)\n",
			a);
		return 2;
	}
	if (!self_check) {
		usage(stderr);
		return 2;
	}
	if (vy_selfcheck(&opt, stdout, &e) != VY_OK) {
		fprintf(stderr, "vyrefs: %s\n", e.msg);
		return 1;
	}
	return 0;
}
