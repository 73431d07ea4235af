/* user.vyre.device: where a file lives (setting it moves the file), and a
 * directory's device for its new files (devices.h says how devices are
 * named). */
#include "fs/devices_xattr.h"
#include "fs/devices.h"
#include "fs/file.h"
#include "daemon/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

int vy_devices_get(vy_fs *fs, vy_inode *in, char *out, size_t cap)
{
	int d = -1;
	if (in->kind == VY_FILE) {
		pthread_rwlock_rdlock(&in->lock);
		d = in->dev;
		pthread_rwlock_unlock(&in->lock);
	} else if (in->kind == VY_DIR) {
		pthread_mutex_lock(&fs->ns);
		d = (int)in->place - 1;
		pthread_mutex_unlock(&fs->ns);
	}
	if (d < 0)
		return ENODATA;
	snprintf(out, cap, "%d", vy_devices_ordinal(fs, (unsigned)d));
	return 0;
}

/* The mount's index of the device a value names (an ordinal, perhaps with
 * a newline after, as `echo` gives), or -1, said in the log. */
static int parse(vy_fs *fs, const char *value, size_t size)
{
	char num[16];
	while (size && (value[size - 1] == '\n' || value[size - 1] == ' '))
		size--;
	bool digits = size > 0 && size < sizeof(num);
	for (size_t i = 0; digits && i < size; i++)
		digits = value[i] >= '0' && value[i] <= '9';
	if (digits) {
		memcpy(num, value, size);
		num[size] = '\0';
		long n = strtol(num, NULL, 10);
		for (unsigned d = 0; d < fs->ndev; d++)
			if (vy_devices_ordinal(fs, d) == n)
				return (int)d;
	}
	char list[128] = "";
	size_t at = 0;
	for (unsigned d = 0; d < fs->ndev && at < sizeof(list); d++) {
		int w = snprintf(list + at, sizeof(list) - at, "%s%d", d ? ", " : "", vy_devices_ordinal(fs, d));
		if (w < 0)
			break;
		at += (size_t)w;
	}
	vy_log(LOG_NOTICE, "%s: '%.*s' is not a device of this mount (Fix: give one of %s, as .vyre/device lists them)",
	       VY_DEVICE_XATTR, (int)(size < 32 ? size : 32), value, list);
	return -1;
}

int vy_devices_set(vy_fs *fs, vy_inode *in, const char *value, size_t size, int flags)
{
	if (in->kind != VY_FILE && in->kind != VY_DIR)
		return EPERM;
	int d = parse(fs, value, size);
	if (d < 0)
		return EINVAL;
	if (in->kind == VY_DIR) {
		pthread_mutex_lock(&fs->ns);
		int err = (flags & XATTR_CREATE) && in->place ? EEXIST : (flags & XATTR_REPLACE) && !in->place ? ENODATA : 0;
		if (!err)
			in->place = (uint8_t)(d + 1);
		pthread_mutex_unlock(&fs->ns);
		return err;
	}
	if (flags & XATTR_CREATE)
		return EEXIST; /* a file always has a device */
	pthread_rwlock_wrlock(&in->lock);
	unsigned was = in->dev;
	vy_error e;
	vy_err rc = vy_file_move(fs, in, (unsigned)d, &e);
	if (rc == VY_OK)
		in->place = (uint8_t)(d + 1); /* asked for: it stays (no spill) */
	if (rc == VY_ENOSPC) {
		/* The device moved to is the full one, not the file's. */
		char msg[VY_ERROR_MSG_MAX];
		vy_devices_what_of(&e, msg, sizeof(msg));
		vy_fail(&e, VY_ENOSPC, "free room on it, or pick a device with room (.vyre/device: budget, resident)",
			"device %d has no room for the file: %.300s", vy_devices_ordinal(fs, (unsigned)d), msg);
	}
	pthread_rwlock_unlock(&in->lock);
	if (rc != VY_OK) {
		vy_log(LOG_NOTICE, "moving inode %" PRIu64 " from device %d to %d: %s", in->ino, vy_devices_ordinal(fs, was),
		       vy_devices_ordinal(fs, (unsigned)d), e.msg);
		return vy_err_errno(rc);
	}
	return 0;
}

int vy_devices_remove(vy_fs *fs, vy_inode *in)
{
	if (in->kind != VY_DIR)
		return in->kind == VY_FILE ? EPERM : ENODATA;
	pthread_mutex_lock(&fs->ns);
	int err = in->place ? 0 : ENODATA;
	in->place = 0;
	pthread_mutex_unlock(&fs->ns);
	return err;
}
