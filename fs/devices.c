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
		return;
	}
	unsigned best = 0;
	uint64_t most = 0;
	for (unsigned d = 0; d < fs->ndev; d++) {
		uint64_t room = free_room(fs, d);
		if (d == 0 || room > most) {
			best = d;
			most = room;
		}
	}
	in->dev = (uint8_t)best;
}

void vy_devices_name_nospace(vy_fs *fs, const vy_inode *in, vy_err rc, vy_error *e)
{
	if (rc != VY_ENOSPC || fs->ndev < 2 || !e)
		return;
	char others[256] = "";
	size_t at = 0;
	unsigned roomiest = in->dev == 0 ? 1 : 0;
	for (unsigned d = 0; d < fs->ndev; d++) {
		if (d == in->dev)
			continue;
		if (free_room(fs, d) > free_room(fs, roomiest))
			roomiest = d;
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
		vy_devices_ordinal(fs, in->dev), msg, others, vy_devices_ordinal(fs, in->dev), vy_devices_ordinal(fs, roomiest));
}
