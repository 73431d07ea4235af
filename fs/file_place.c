/* When a file's head is read for its placement (fs/file_place.h). */
#include "fs/file_place.h"
#include "core/place.h"
#include "core/transfer.h"
#include "daemon/log.h"
#include "fs/wbehind.h"

#include <string.h>

/* The file's bytes [0, n) into head: those its buffer holds, zeros past
 * them (the tail reads zeros). */
static bool read_head(vy_fs *fs, vy_inode *in, uint8_t *head, uint64_t n)
{
	vy_error why;
	uint64_t dend = in->size < in->cap ? in->size : in->cap, got = dend < n ? dend : n;
	memset(head, 0, n);
	if (got && (vy_wbehind_settle(fs, in, &why) != VY_OK ||
		    vy_readback_many(vy_fs_core(fs, in), &(vy_readback){.handle = in->buf, .dst = head, .len = got}, 1,
				     &why) != VY_OK)) {
		vy_log(LOG_NOTICE, "inode %llu: not placed for its format: reading its first bytes: %s",
		       (unsigned long long)in->ino, why.msg);
		return false;
	}
	return true;
}

bool vy_file_place_write(vy_fs *fs, vy_inode *in, uint64_t off, const void *buf, size_t size, uint32_t *lead)
{
	if (off >= VY_PLACE_HEAD)
		return false;
	/* Written from its start, this write completing the head: nothing
	 * past the head is in the file yet. */
	if (size < VY_PLACE_HEAD - off || in->size != off || in->maps) {
		in->head_due = true;
		return false;
	}
	uint8_t head[VY_PLACE_HEAD];
	if (!read_head(fs, in, head, off)) {
		in->head_due = true;
		return false;
	}
	memcpy(head + off, buf, VY_PLACE_HEAD - off);
	*lead = vy_place_lead(head);
	in->head_due = false;
	return true;
}

void vy_file_place_touch(vy_inode *in, uint64_t off)
{
	if (off < VY_PLACE_HEAD)
		in->head_due = true;
}

bool vy_file_place_head(vy_fs *fs, vy_inode *in, uint32_t *lead)
{
	uint8_t head[VY_PLACE_HEAD];
	if (in->size < VY_PLACE_HEAD || !read_head(fs, in, head, VY_PLACE_HEAD))
		return false;
	*lead = vy_place_lead(head);
	return true;
}
