/* LD_PRELOAD shim for keeper_test: holds a successor's devices shut, so
 * the test (not the scheduler) decides when they open.
 *
 * In a successor (`vyrefs --adopt ...`: a standby, or one started after a
 * death), the first dlopen of the CUDA driver (libcuda; with backend=auto
 * the host backend is chosen after it fails, so this works without a GPU
 * too) creates DEVICEGATE_FILE.waiting and waits while DEVICEGATE_FILE
 * exists, then goes on as dlopen. A gate never opened lets it through
 * after 120 s and creates DEVICEGATE_FILE.timedout (the test fails rather
 * than hangs). Every other process and call passes through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim_adopt.h"

static bool successor;
static atomic_bool gated_once;

__attribute__((constructor)) static void at_load(void)
{
	successor = shim_is_successor();
}

static void touch(const char *gate, const char *suffix)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s%s", gate, suffix) >= (int)sizeof(path))
		return;
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
}

static void wait_at_gate(void)
{
	const char *gate = getenv("DEVICEGATE_FILE");
	if (!gate || !gate[0] || access(gate, F_OK) != 0 || atomic_exchange(&gated_once, true))
		return; /* no gate, or open already: later successors pass */
	touch(gate, ".waiting");
	struct timespec tick = {0, 10 * 1000 * 1000};
	for (int i = 0; i < 12000; i++) { /* 120 s */
		if (access(gate, F_OK) != 0)
			return;
		nanosleep(&tick, NULL);
	}
	touch(gate, ".timedout");
}

void *dlopen(const char *name, int flags)
{
	static void *(*real)(const char *, int);
	if (!real)
		real = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
	if (successor && name && strstr(name, "libcuda"))
		wait_at_gate();
	return real ? real(name, flags) : NULL;
}
