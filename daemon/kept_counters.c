/* The .vyre/stats counters a successor finds (kept_counters.h). */
#include "daemon/kept_counters.h"
#include "config/config.h"
#include "daemon/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define KC_MAGIC "VYRCOUNT"
#define KC_DATA 4096u /* the counters start on their own page */

typedef struct kc_head {
	char magic[8];
	uint64_t key;
	uint64_t layout;      /* vy_telemetry_layout() */
	uint32_t devices;     /* how many vy_telemetry follow */
	uint32_t bytes_each;  /* sizeof(vy_telemetry) */
	int32_t ordinal[VY_DEVICES_MAX];
} kc_head;
_Static_assert(sizeof(kc_head) <= KC_DATA, "daemon/kept_counters.c: the header fits its page");

struct vy_kept_counters {
	uint8_t *base;
	size_t bytes;
	int fd;        /* ours until handed (-1 after) */
	uint64_t key;
	uint32_t slot; /* adopted: the keeper's slot, its fd in mem until claimed */
	bool adopted;  /* the region names it already */
};

static size_t bytes_for(unsigned n)
{
	return KC_DATA + (size_t)n * sizeof(vy_telemetry); /* n <= VY_DEVICES_MAX: no overflow */
}

static kc_head head_for(vy_device *const *dev, unsigned n, uint64_t key)
{
	kc_head h = {.magic = KC_MAGIC, .key = key, .layout = vy_telemetry_layout(), .devices = n,
		     .bytes_each = (uint32_t)sizeof(vy_telemetry)};
	for (unsigned d = 0; d < n; d++)
		h.ordinal[d] = dev[d]->info.ordinal;
	return h;
}

static vy_kept_counters *map_fd(int fd, size_t bytes)
{
	vy_kept_counters *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (k->base == MAP_FAILED) {
		free(k);
		return NULL;
	}
	k->bytes = bytes;
	k->fd = fd;
	return k;
}

vy_kept_counters *vy_kept_counters_new(vy_device *const *dev, unsigned n)
{
	uint64_t key = 0;
	vy_kept_counters *k = NULL;
	int fd = -1;
	if (n > VY_DEVICES_MAX) {
		errno = EINVAL;
		goto fail;
	}
	/* The key: what no file's bytes in a reused slot can hold by chance
	 * or by a user's design (0 is never one). Never a wait: a mount at
	 * boot before the pool is ready keeps no counters instead. */
	const char *what = "no random key (the kernel's pool is not ready yet)";
	while (key == 0)
		if (getrandom(&key, sizeof(key), GRND_NONBLOCK) != (ssize_t)sizeof(key) && errno != EINTR)
			goto fail;
	what = "no memory to keep them in";
	fd = memfd_create("vyrefs-counters", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)bytes_for(n)) != 0 || !(k = map_fd(fd, bytes_for(n))))
		goto fail;
	kc_head h = head_for(dev, n, key);
	memcpy(k->base, &h, sizeof(h)); /* the counters after it are the memfd's zeros */
	k->key = key;
	return k;
fail:
	vy_log(LOG_WARNING, ".vyre/stats counters start again from zero after a takeover: %s (%s; Fix: free host "
			    "memory, or wait for the random pool, then umount and mount again)", what, strerror(errno));
	if (fd >= 0)
		close(fd);
	return NULL;
}

vy_kept_counters *vy_kept_counters_adopt(vy_state *st, vy_keep_fds *mem, vy_device *const *dev, unsigned n)
{
	uint64_t key;
	uint64_t slot = vy_state_counters(st, &key);
	if (slot == 0)
		return NULL; /* an older daemon's, or none could be kept */
	const char *why = "the keeper holds none";
	int fd = slot < mem->n ? mem->fd[slot] : -1;
	struct stat sb;
	vy_kept_counters *k = NULL;
	if (fd >= 0) {
		why = "they are not this mount's";
		bool fits = n <= VY_DEVICES_MAX && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
			    (uint64_t)sb.st_size == bytes_for(n);
		if (fits && !(k = map_fd(fd, bytes_for(n))))
			why = "no memory to map them";
		if (k) {
			k->fd = -1; /* mem's until taken */
			kc_head want = head_for(dev, n, key), got;
			memcpy(&got, k->base, sizeof(got));
			if (memcmp(&got, &want, sizeof(got)) != 0) {
				why = got.key == key ? "another build's or other devices'" : "they are not this mount's";
				vy_kept_counters_free(k);
				k = NULL;
			}
		}
	}
	if (!k) {
		/* Its slot goes with what no file took: never named again. */
		vy_state_set_counters(st, 0, 0);
		vy_log(LOG_NOTICE, "takeover: .vyre/stats counters start again from zero: %s", why);
		return NULL;
	}
	k->slot = (uint32_t)slot; /* its fd stays in mem until claimed */
	k->key = key;
	k->adopted = true;
	for (unsigned d = 0; d < n; d++)
		vy_telemetry_clear_gauges(vy_kept_counters_device(k, d));
	return k;
}

void vy_kept_counters_claim(vy_kept_counters *k, vy_keep_fds *mem)
{
	if (!k || !k->slot || k->slot >= mem->n || mem->fd[k->slot] < 0)
		return;
	close(mem->fd[k->slot]); /* the mapping and the keeper's copy hold it */
	mem->fd[k->slot] = -1;
}

vy_telemetry *vy_kept_counters_device(vy_kept_counters *k, unsigned d)
{
	return (vy_telemetry *)(k->base + KC_DATA) + d;
}

void vy_kept_counters_hand(vy_kept_counters *k, vy_state *st, const vy_keep_sink *sink)
{
	if (!k || k->adopted || k->fd < 0)
		return;
	vy_keep_slot slot = sink->add(sink->ctx, k->fd);
	if (slot == 0) {
		vy_log(LOG_WARNING, ".vyre/stats counters start again from zero after a takeover: the keeper took "
				    "no copy of them");
		return;
	}
	vy_state_set_counters(st, slot, k->key);
	k->adopted = true;
	close(k->fd); /* the mapping and the keeper's copy hold it */
	k->fd = -1;
}

void vy_kept_counters_free(vy_kept_counters *k)
{
	if (!k)
		return;
	munmap(k->base, k->bytes);
	if (k->fd >= 0)
		close(k->fd);
	free(k);
}
