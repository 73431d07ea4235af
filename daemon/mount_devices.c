/* A mount's devices (mount_devices.h). */
#include "daemon/mount_devices.h"
#include "config/size.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The JIT cache for modules: the driver reads these at cuInit. Once: a
 * standby sets them before its devices open in another thread. */
void vy_mount_devices_set_env(const vy_config *cfg)
{
	static bool set;
	if (set)
		return;
	set = true;
	if (cfg->kernel_cache == 0) {
		setenv("CUDA_CACHE_DISABLE", "1", 1);
		return;
	}
	char size[32];
	snprintf(size, sizeof(size), "%" PRIu64, cfg->kernel_cache);
	setenv("CUDA_CACHE_MAXSIZE", size, 0);
	if (getenv("CUDA_CACHE_PATH"))
		return;
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char path[4096];
	if (xdg && xdg[0])
		snprintf(path, sizeof(path), "%s/vyrefs", xdg);
	else if (home && home[0])
		snprintf(path, sizeof(path), "%s/.cache/vyrefs", home);
	else
		return;
	setenv("CUDA_CACHE_PATH", path, 0); /* the driver makes it */
}

/* The devices the configuration names: devices= (all, or a list), else
 * ordinal's one; the host backend presents host_devices of them, and
 * takes them all unless devices= says which. The first decides the
 * backend (auto: cuda where a GPU is), the rest open on it. */
vy_err vy_mount_devices_open(const vy_config *cfg, vy_mount_devices *out, vy_error *e)
{
	vy_device **devs = out->dev;
	unsigned *n = &out->n;
	vy_mount_devices_set_env(cfg);
	vy_device_options o = cfg->core.device;
	int list[VY_DEVICES_MAX];
	unsigned want = cfg->ndevices;
	memcpy(list, cfg->devices, want * sizeof(*list));
	if (!want && !cfg->devices_all)
		list[want++] = o.ordinal;
	o.ordinal = want ? list[0] : 0;
	*n = 0;
	vy_err rc = vy_device_open(&o, &devs[0], out->note, sizeof(out->note), e);
	if (rc != VY_OK)
		return rc;
	*n = 1;
	bool host = strcmp(devs[0]->info.backend, "cuda") != 0;
	int count = 0;
	if (host)
		count = (int)cfg->host_devices;
	else if (cfg->devices_all)
		rc = vy_device_cuda_count(&count, e);
	if (rc == VY_OK && (cfg->devices_all || (host && !cfg->ndevices))) {
		want = 0;
		for (int i = 0; i < count && i < VY_DEVICES_MAX; i++)
			list[want++] = i;
	}
	for (unsigned i = 0; rc == VY_OK && host && i < want; i++)
		if (list[i] >= count)
			rc = vy_fail(e, VY_EINVAL, "name devices below host_devices, or raise it (-o host_devices=N)",
				     "device %d: the host backend presents %d device(s) (host_devices)", list[i], count);
	if (host && rc == VY_OK)
		devs[0]->info.ordinal = list[0];
	for (unsigned i = 1; rc == VY_OK && i < want; i++) {
		rc = host ? vy_device_host_open(o.host_memory, &devs[i], e) : vy_device_cuda_open(list[i], &devs[i], e);
		if (rc == VY_OK) {
			if (host)
				devs[i]->info.ordinal = list[i];
			*n = i + 1;
		}
	}
	if (rc != VY_OK)
		vy_mount_devices_close(out); /* what opened before the failure */
	return rc;
}

void vy_mount_devices_close(vy_mount_devices *d)
{
	for (unsigned i = 0; i < d->n; i++)
		vy_device_close(d->dev[i]);
	d->n = 0;
}


void vy_mount_devices_say(const vy_mount_devices *d, const uint64_t *budgets, const char *mountpoint, bool adopt,
			  char *out, size_t cap)
{
	size_t at = 0;
#define ADD(...) (at += (size_t)snprintf(out + at, at < cap ? cap - at : 0, __VA_ARGS__), at = at < cap ? at : cap)
	ADD("%s %s: backend %s", adopt ? "took over" : "mounted", mountpoint, d->n ? d->dev[0]->info.backend : "none");
	for (unsigned i = 0; i < d->n; i++) {
		char size[32];
		vy_size_format(budgets[i], size, sizeof(size));
		ADD("%s device %d (%s), %s for files", i ? ";" : ",", d->dev[i]->info.ordinal, d->dev[i]->info.name, size);
	}
	if (d->note[0]) {
		/* The note's reason, without its Fix: this is no error. */
		const char *fix = strstr(d->note, " (Fix: ");
		int len = fix ? (int)(fix - d->note) : (int)strlen(d->note);
		ADD(" (%.*s): files live in host memory, and kernels launch on a GPU only", len, d->note);
	}
#undef ADD
}
