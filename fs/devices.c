/* Placement, and the message of a full device (devices_xattr.c has
 * user.vyre.device and the moves it asks for). */
#include "fs/devices.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

static uint64_t free_room(vy_fs *fs, unsigned d)
{
	vy_store_usage u;
	vy_store_usage_get(fs->dev[d].core->store, &u);
	return u.resident < u.budget ? u.budget - u.resident : 0;
}

void vy_devices_what_of(const vy_error *e, char *out, size_t cap)
{
	snprintf(out, cap, "%s", e->msg);
	char *fix = strstr(out, " (Fix: ");
	if (fix)
		*fix = '\0';
}

int vy_devices_ordinal(vy_fs *fs, unsigned d)
{
	return fs->dev[d].core->dev->info.ordinal;
}

/* The device with the most free budget (ties: the lowest), other than
 * `not` (pass fs->ndev for none), with at least `need` bytes free; -1:
 * none has. */
static int roomiest(vy_fs *fs, unsigned not, uint64_t need)
{
	int best = -1;
	uint64_t most = 0;
	for (unsigned d = 0; d < fs->ndev; d++) {
		uint64_t room = free_room(fs, d);
		if (d != not && room >= need && (best < 0 || room > most)) {
			best = (int)d;
			most = room;
		}
	}
	return best;
}

/* How far back a directory's entries are searched for its newest file:
 * a bound, so a directory of many subdirectories costs no more. */
#define FOLLOW_SEARCH 64

/* The newest regular file named in `dir` (ns held), or NULL. Its entries
 * keep creation order (ns/dir.h), across takeovers too. */
static const vy_inode *newest_file(vy_fs *fs, const vy_inode *dir, const vy_inode *not)
{
	const vy_dir *d = &dir->dir;
	size_t seen = 0;
	for (size_t i = d->norder; i-- > 0 && seen < FOLLOW_SEARCH;) {
		const vy_dirent *e = d->order[i].e;
		if (!e)
			continue;
		seen++;
		const vy_inode *in = vy_u64map_get(&vy_fs_ns(fs)->inodes, e->ino);
		if (in && in != not && in->kind == VY_FILE)
			return in;
	}
	return NULL;
}

void vy_devices_place(vy_fs *fs, vy_inode *dir, vy_inode *in)
{
	if (in->kind == VY_DIR) {
		in->place = dir->place;
		return;
	}
	if (in->kind != VY_FILE)
		return;
	if (dir->place) {
		in->dev = (uint8_t)(dir->place - 1);
		in->place = dir->place; /* asked for: it never spills */
		return;
	}
	/* A directory's files stay together (a model's shards run on one
	 * GPU): the newest one's device, while it has room for another of
	 * its size. */
	const vy_inode *last = fs->ndev > 1 ? newest_file(fs, dir, in) : NULL;
	if (last) {
		unsigned d = __atomic_load_n(&last->dev, __ATOMIC_RELAXED);
		uint64_t size = __atomic_load_n(&last->size, __ATOMIC_RELAXED);
		if (free_room(fs, d) >= size && free_room(fs, d) > 0) {
			in->dev = (uint8_t)d;
			return;
		}
	}
	int best = roomiest(fs, fs->ndev, 0);
	in->dev = (uint8_t)(best < 0 ? 0 : best);
}

int vy_devices_spill_to(vy_fs *fs, const vy_inode *in, uint64_t need)
{
	if (fs->ndev < 2 || in->place || in->maps)
		return -1;
	return roomiest(fs, in->dev, need);
}

void vy_devices_name_nospace(vy_fs *fs, const vy_inode *in, vy_err rc, vy_error *e)
{
	if (rc != VY_ENOSPC || fs->ndev < 2 || !e)
		return;
	char others[256] = "";
	size_t at = 0;
	int most = roomiest(fs, in->dev, 0); /* another device: there are two or more */
	for (unsigned d = 0; d < fs->ndev; d++) {
		if (d == in->dev)
			continue;
		int w = snprintf(others + at, sizeof(others) - at, "%sdevice %d has %" PRIu64 " bytes free", at ? ", " : "",
				 vy_devices_ordinal(fs, d), free_room(fs, d));
		if (w < 0 || (size_t)w >= sizeof(others) - at)
			break;
		at += (size_t)w;
	}
	char msg[VY_ERROR_MSG_MAX];
	vy_devices_what_of(e, msg, sizeof(msg));
	vy_fail(e, VY_ENOSPC, "move it to a device with room: setfattr -n " VY_DEVICE_XATTR " -v N FILE",
		"device %d is full: %.300s; %s (the file is on device %d; device %d has the most room)",
		vy_devices_ordinal(fs, in->dev), msg, others, vy_devices_ordinal(fs, in->dev), vy_devices_ordinal(fs, (unsigned)most));
}
