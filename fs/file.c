/* File bytes on the device: capacity, zero-filled growth, copies. */
#include "fs/file.h"
#include "core/device_keep.h"
#include "core/checked.h"
#include "core/peer.h"
#include "core/transfer.h"
#include "fs/devices.h"
#include "daemon/log.h"
#include "fs/file_place.h"
#include "persist/writer.h"
#include "tier/tier.h"
#include "fs/readahead.h"
#include "fs/wbehind.h"

#include <errno.h>
#include <string.h>

#define PAGE 4096u

/* v rounded up to a page, or 0 when that does not fit. */
static uint64_t page_up(uint64_t v)
{
	uint64_t r;
	return vy_add_u64(v, PAGE - 1, &r) ? r & ~(uint64_t)(PAGE - 1) : 0;
}

/* The size plus 1/8 headroom, in pages: what a fit keeps. */
static uint64_t fitted(uint64_t size)
{
	return page_up(size + size / 8);
}

/* Where the file's buffer ends for its bytes: [0, size) past it is the
 * tail, a hole that is in no buffer (docs/fs.md, "Sparse files"). */
static uint64_t data_end(const vy_inode *in)
{
	return in->size < in->cap ? in->size : in->cap;
}

/* The memory a change of the file's layout frees leaves the keeper only
 * once the layout that no longer names it is kept (persist/writer.c
 * commits a layout at once): a death between would leave a successor a
 * layout naming memory it is not handed, and the file empty (issue 67). */
static void hold_drops(vy_fs *fs)
{
	if (vy_fs_keeps_fds(fs) && fs->keep_sink->hold)
		fs->keep_sink->hold(fs->keep_sink->ctx);
}

static void release_drops(vy_fs *fs)
{
	if (vy_fs_keeps_fds(fs) && fs->keep_sink->release)
		fs->keep_sink->release(fs->keep_sink->ctx);
}

/* Free buffer `h` of inode `ino` on device `dev`. */
static void free_handle(vy_fs *fs, unsigned dev, vy_handle h, uint64_t ino)
{
	vy_error e;
	if (vy_store_free(fs->dev[dev].core->store, h, &e) != VY_OK)
		vy_log(LOG_ERR, "inode %llu: freeing its buffer: %s", (unsigned long long)ino, e.msg);
	/* The launcher may map it: take that back, so the memory is free now
	 * rather than at the next sequence. */
	vy_runner *r = fs->dev[dev].runner;
	if (r)
		r->ops->sweep(r);
}

/* The file's memory is `h` on device `dev` now (0: none), in place of
 * its buffer: the layout naming it kept first, then the old one freed. */
static void replace_buffer(vy_fs *fs, vy_inode *in, unsigned dev, vy_handle h, uint64_t cap, uint64_t holes)
{
	vy_handle old = in->buf;
	unsigned old_dev = in->dev;
	hold_drops(fs);
	in->buf = h;
	in->dev = (uint8_t)dev;
	in->cap = cap;
	in->holes = holes;
	vy_persist_layout(fs, in);
	if (old)
		free_handle(fs, old_dev, old, in->ino);
	release_drops(fs);
}

static void free_buffer(vy_fs *fs, vy_inode *in)
{
	replace_buffer(fs, in, in->dev, 0, 0, 0);
}

/* The file's capacity and holes, as its buffer now has them; kept for a
 * successor (persist/writer.h), as every change of a buffer's shape is. */
static void took(vy_fs *fs, vy_inode *in, const vy_buffer_view *v)
{
	in->cap = v->len;
	in->holes = v->holes;
	vy_persist_layout(fs, in);
}

/* Nothing of ours in flight on the file's buffer: queued write-behind
 * copies landed, readahead copies waited for. The store changes a
 * buffer's shape only while nothing pins it, and its address may change. */
static vy_err quiet(vy_fs *fs, vy_inode *in, vy_error *e)
{
	vy_readahead_release(fs, in);
	return vy_wbehind_quiesce(fs, in, e);
}

void vy_file_drop(vy_fs *fs, vy_inode *in)
{
	vy_wbehind_free(fs, in); /* settles: no copy may land in a freed buffer */
	vy_readahead_free(fs, in);
	in->lead = 0; /* no bytes: the next first bytes place it again */
	in->head_due = false;
	free_buffer(fs, in);
}

/* A program maps the file's memory (sock/mapsrv.c): it cannot move or shrink. */
static vy_err mapped(vy_inode *in, vy_error *e)
{
	return vy_fail(e, VY_EBUSY, "unmap the file first (vy_unmap, or end the program that mapped it)",
		       "inode %llu is mapped by a program: it may grow, but not shrink below its %llu bytes",
		       (unsigned long long)in->ino, (unsigned long long)in->size);
}

/* Move the file into a buffer of `cap` bytes (>= size), keeping its bytes. */
static vy_err rebuffer(vy_fs *fs, vy_inode *in, uint64_t cap, vy_error *e)
{
	vy_handle h;
	if (in->maps)
		return mapped(in, e);
	/* Copies in flight name the old buffer; gathered bytes not yet queued
	 * go to the new one when they are. */
	vy_err rc = vy_wbehind_quiesce(fs, in, e);
	if (rc == VY_OK)
		rc = vy_store_alloc_placed(vy_fs_core(fs, in)->store, cap, in->lead, &h, e);
	if (rc != VY_OK)
		return rc;
	if (in->buf && data_end(in) > 0) {
		rc = vy_copy(vy_fs_core(fs, in), in->buf, 0, h, 0, data_end(in), e);
		if (rc != VY_OK) {
			vy_store_free(vy_fs_core(fs, in)->store, h, NULL);
			return rc;
		}
	}
	if (in->buf)
		vy_telemetry_add(vy_fs_core(fs, in)->tel, moves, 1);
	replace_buffer(fs, in, in->dev, h, cap, 0);
	return VY_OK;
}

/* A file of the share granularity or more grows in place (core/store.h):
 * memory is mapped at its end and nothing is copied. VY_ENOTSUP: it moves. */
static vy_err grow_in_place(vy_fs *fs, vy_inode *in, uint64_t need, vy_error *e)
{
	if (!in->buf || !vy_store_growable(vy_fs_core(fs, in)->store, in->buf))
		return VY_ENOTSUP;
	/* Its address may change: no copy may be in flight to the old one. */
	vy_err rc = quiet(fs, in, e);
	vy_buffer_view v;
	if (rc == VY_OK)
		rc = vy_store_grow(vy_fs_core(fs, in)->store, in->buf, need, &v, e);
	if (rc == VY_OK)
		took(fs, in, &v);
	return rc;
}

/* Give back whole pieces a file that grew in place no longer needs. */
static void shrink_in_place(vy_fs *fs, vy_inode *in, uint64_t keep)
{
	vy_buffer_view v;
	vy_error why;
	hold_drops(fs);
	if (quiet(fs, in, &why) != VY_OK || vy_store_shrink(vy_fs_core(fs, in)->store, in->buf, keep, &v, &why) != VY_OK)
		vy_log(LOG_NOTICE, "inode %llu: keeping %llu bytes of capacity: %s", (unsigned long long)in->ino,
		       (unsigned long long)in->cap, why.msg);
	else
		took(fs, in, &v);
	release_drops(fs);
}

/* Past the kernel's largest file: EFBIG. A size past the device's memory
 * is fine (holes, and a tail: below); memory past the budget is ENOSPC. */
static vy_err too_large(uint64_t need, vy_error *e)
{
	if (!page_up(need) || need > VY_FILE_MAX)
		return vy_fail(e, VY_EOVERFLOW, "keep files under 8 EiB", "a %llu-byte file is too large",
			       (unsigned long long)need);
	return VY_OK;
}

/* The device's memory in whole granules: a truncate maps holes up to here
 * at most; a larger size leaves the rest as the tail, so a size up to the
 * kernel's limit costs no address space, no mapping and no memory. */
static uint64_t span_limit(vy_fs *fs, vy_inode *in)
{
	vy_store_usage u;
	vy_store_usage_get(vy_fs_core(fs, in)->store, &u);
	uint64_t g = vy_fs_core(fs, in)->dev->info.share_granularity;
	return g ? u.total / g * g : u.total;
}

/* Data may lie this far into a file: holes before it are mapped (on a
 * GPU one mapping per 64 MiB run of zeros, core/cuda.h), so past it a
 * write is EFBIG with its Fix rather than a long wait or the driver's
 * mappings running out; 1 TiB, or 8 times the device's memory. */
static uint64_t data_reach(vy_fs *fs, vy_inode *in)
{
	uint64_t m = span_limit(fs, in), r = (uint64_t)1 << 40;
	return m <= r / 8 ? r : m > UINT64_MAX / 8 ? UINT64_MAX : m * 8;
}

/* At least `need` bytes of capacity, with memory: in place where the file
 * can grow so; otherwise move it to a buffer of twice the size, or of
 * exactly what is needed when doubling does not fit the budget. */
static vy_err zero(vy_fs *fs, vy_inode *in, uint64_t from, uint64_t to, vy_error *e);
static vy_err reserve_memory(vy_fs *fs, vy_inode *in, uint64_t need, vy_error *e);

/* reserve_memory, and zeros in what it gained of the tail: bytes of the
 * file that read as zeros and now have memory of the pool's. */
static vy_err reserve(vy_fs *fs, vy_inode *in, uint64_t need, vy_error *e)
{
	uint64_t was = in->cap;
	vy_err rc = reserve_memory(fs, in, need, e);
	if (rc == VY_OK && in->size > was && in->cap > was)
		rc = zero(fs, in, was, data_end(in), e);
	return rc;
}

static vy_err reserve_memory(vy_fs *fs, vy_inode *in, uint64_t need, vy_error *e)
{
	if (need <= in->cap)
		return VY_OK;
	vy_err rc = too_large(need, e);
	if (rc != VY_OK)
		return rc;
	uint64_t exact = page_up(need);
	/* Memory past this mount's whole budget: ENOSPC, as a full tmpfs
	 * answers, with what would make room. Holes cost none. */
	vy_store_usage u;
	vy_store_usage_get(vy_fs_core(fs, in)->store, &u);
	if (exact - in->holes > u.budget)
		return vy_fail(e, VY_ENOSPC, "keep the file under the budget, or mount with a larger one (-o resident_budget=SIZE)",
			       "no room for a %llu-byte file: this mount's whole resident budget is %llu bytes",
			       (unsigned long long)need, (unsigned long long)u.budget);
	rc = grow_in_place(fs, in, need, e);
	if (rc != VY_ENOTSUP)
		return rc;
	uint64_t doubled = in->cap <= UINT64_MAX / 2 ? page_up(in->cap * 2) : 0;
	uint64_t want = doubled > exact ? doubled : exact;
	rc = rebuffer(fs, in, want, e);
	if (rc == VY_ENOSPC && want > exact)
		rc = rebuffer(fs, in, exact, e);
	return rc;
}

/* Holes up to `to` (rounded up to the granule) when `from`, the first
 * byte that needs memory, lies a granule or more past the capacity: a
 * truncate up, or a far write, costs nothing for the bytes it skips
 * (docs/fs.md, "Sparse files"). A small file first moves to a granule of
 * its own. Nothing happens otherwise, or where the device cannot map
 * holes: the file then grows with memory. */
static vy_err extend_sparse(vy_fs *fs, vy_inode *in, uint64_t from, uint64_t to, vy_error *e)
{
	uint64_t g = vy_fs_core(fs, in)->dev->info.share_granularity;
	if (!g || !vy_fs_core(fs, in)->dev->share || to < g || to <= in->cap || from < in->cap || from - in->cap < g)
		return VY_OK;
	vy_err rc = too_large(to, e);
	if (rc != VY_OK)
		return rc;
	if (to > data_reach(fs, in))
		return vy_fail(e, VY_EOVERFLOW,
			       "keep data below that byte (a size past it is fine: truncate -s), or put far data in a file of its own",
			       "data at byte %llu of a file: this device maps holes up to byte %llu at most",
			       (unsigned long long)from, (unsigned long long)data_reach(fs, in));
	vy_buffer_view v;
	if (!in->buf) {
		vy_handle h;
		rc = vy_store_alloc_holes_placed(vy_fs_core(fs, in)->store, to, in->lead, &h, e);
		if (rc == VY_OK)
			rc = vy_store_view(vy_fs_core(fs, in)->store, h, &v, e);
		if (rc == VY_OK)
			in->buf = h;
	} else {
		if (!vy_store_growable(vy_fs_core(fs, in)->store, in->buf))
			rc = rebuffer(fs, in, g, e);
		if (rc == VY_OK)
			rc = quiet(fs, in, e);
		if (rc == VY_OK)
			rc = vy_store_extend(vy_fs_core(fs, in)->store, in->buf, to, &v, e);
	}
	if (rc == VY_OK)
		took(fs, in, &v);
	return rc;
}

/* Memory for every hole of [off, end): what is written must not land on
 * the zeros a hole maps. */
static vy_err make_room(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e);

static vy_err back(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e)
{
	if (end > in->cap)
		return make_room(fs, in, off, end, e); /* the tail: room, then back */
	if (!in->holes || end <= off || vy_store_backed(vy_fs_core(fs, in)->store, in->buf, off, end - off))
		return VY_OK;
	vy_err rc = quiet(fs, in, e);
	if (rc == VY_OK)
		rc = vy_core_back(vy_fs_core(fs, in), in->buf, off, end - off, NULL, e);
	/* Also after a failure part way: pieces may have come. */
	vy_buffer_view v;
	if (vy_store_view(vy_fs_core(fs, in)->store, in->buf, &v, NULL) == VY_OK)
		took(fs, in, &v);
	return rc;
}

/* Room for bytes [off, end) with memory behind them: a jump of a granule
 * or more past the capacity leaves holes; growth otherwise. */
static vy_err room_here(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e)
{
	vy_err rc = extend_sparse(fs, in, off, end, e);
	if (rc == VY_OK)
		rc = reserve(fs, in, end, e);
	if (rc == VY_OK)
		rc = back(fs, in, off, end, e);
	return rc;
}

/* A file placed by default whose device is full moves to one with room,
 * as a tmpfs file grows while the mount has room (docs/devices.md,
 * "Spills"); the directory's next files follow it there. */
static bool spilled(vy_fs *fs, vy_inode *in, uint64_t end)
{
	int to = vy_devices_spill_to(fs, in, page_up(end));
	if (to < 0)
		return false;
	unsigned was = in->dev;
	vy_core *left = vy_fs_core(fs, in);
	vy_error e;
	if (vy_file_move(fs, in, (unsigned)to, &e) != VY_OK) {
		vy_log(LOG_NOTICE, "inode %llu: device %d is full and the move to device %d failed: %s",
		       (unsigned long long)in->ino, vy_devices_ordinal(fs, was), vy_devices_ordinal(fs, (unsigned)to), e.msg);
		return false;
	}
	vy_telemetry_add(left->tel, spills, 1);
	vy_log(LOG_INFO, "inode %llu moved from device %d to %d: device %d has no room for %llu bytes of it",
	       (unsigned long long)in->ino, vy_devices_ordinal(fs, was), vy_devices_ordinal(fs, (unsigned)to),
	       vy_devices_ordinal(fs, was), (unsigned long long)end);
	return true;
}

static vy_err make_room(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e)
{
	vy_err rc = room_here(fs, in, off, end, e);
	if (rc == VY_ENOSPC && spilled(fs, in, end))
		rc = room_here(fs, in, off, end, e);
	vy_devices_name_nospace(fs, in, rc, e);
	return rc;
}

/* Zero [from, to) of the buffer: bytes that become part of the file.
 * Holes read zeros already, and are not written. */
static vy_err zero(vy_fs *fs, vy_inode *in, uint64_t from, uint64_t to, vy_error *e)
{
	vy_err rc = VY_OK;
	if (to > in->cap)
		to = in->cap; /* the tail reads zeros without memory */
	while (rc == VY_OK && from < to) {
		uint64_t d = in->holes ? vy_store_seek(vy_fs_core(fs, in)->store, in->buf, from, true) : from;
		if (d >= to)
			break;
		uint64_t h = in->holes ? vy_store_seek(vy_fs_core(fs, in)->store, in->buf, d, false) : to;
		if (h > to)
			h = to;
		rc = vy_fill(vy_fs_core(fs, in), in->buf, d, h - d, 0, e);
		from = h;
	}
	return rc;
}

vy_err vy_file_read(vy_fs *fs, vy_inode *in, uint64_t off, size_t size, vy_ra_hit *hit, vy_staging_buf *buf,
		    size_t *got, vy_error *e)
{
	*got = 0;
	vy_err rc = vy_wbehind_settle(fs, in, e);
	if (rc != VY_OK || off >= in->size || size == 0)
		return rc;
	size_t n = in->size - off < size ? (size_t)(in->size - off) : size;
	if (vy_readahead_get(fs, in, off, n, hit)) {
		*got = n;
		return VY_OK;
	}
	rc = vy_staging_acquire(vy_fs_core(fs, in)->staging, n, buf, e);
	/* Past the buffer is the tail: zeros, from no device. */
	uint64_t dend = data_end(in);
	size_t dev = off < dend ? (size_t)(dend - off < n ? dend - off : n) : 0;
	if (rc == VY_OK && dev)
		rc = vy_readback_pinned(vy_fs_core(fs, in), in->buf, off, buf->ptr, dev, e);
	if (rc == VY_OK && dev < n)
		memset((char *)buf->ptr + dev, 0, n - dev);
	if (rc == VY_OK)
		*got = n;
	return rc;
}

/* Placement (fs/file_place.h): the write that completes the head of a
 * file written from its start decides where its byte 0 sits. A buffer it
 * has already holds at most those first bytes (its first 8 came alone, as
 * safetensors' own writer sends them): it moves there by a copy of them.
 * Best effort: a file that cannot be placed is written as it is, and a
 * mapping of it says how it sits (vy_mapping_ptr). */
static void place(vy_fs *fs, vy_inode *in, uint64_t off, const void *buf, size_t size)
{
	uint32_t lead;
	if (!vy_file_place_write(fs, in, off, buf, size, &lead) || lead == in->lead)
		return;
	uint16_t was = in->lead;
	in->lead = (uint16_t)lead;
	vy_error why;
	if (in->buf && rebuffer(fs, in, in->cap, &why) != VY_OK) {
		in->lead = was;
		vy_log(LOG_NOTICE, "inode %llu: not placed for its format: %s", (unsigned long long)in->ino, why.msg);
	}
}

vy_err vy_file_write(vy_fs *fs, vy_inode *in, uint64_t off, const void *buf, size_t size, vy_error *e)
{
	uint64_t end;
	if (!vy_add_u64(off, size, &end) || end > VY_FILE_MAX)
		return vy_fail(e, VY_EOVERFLOW, "write below 8 EiB", "a write ending past byte %llu is too far",
			       (unsigned long long)VY_FILE_MAX);
	if (size == 0)
		return VY_OK;
	vy_readahead_forget(in);
	place(fs, in, off, buf, size);
	vy_err rc = make_room(fs, in, off, end, e);
	if (rc == VY_OK && off > in->size)
		rc = zero(fs, in, in->size, off, e);
	if (rc != VY_OK)
		return rc;
	bool gathered = false;
	if (fs->cfg.write_behind)
		rc = vy_wbehind_write(fs, in, off, buf, size, &gathered, e);
	if (rc == VY_OK && !gathered) {
		vy_upload up = {.handle = in->buf, .offset = off, .src = buf, .len = size};
		rc = vy_upload_many(vy_fs_core(fs, in), &up, 1, e);
	}
	if (rc != VY_OK)
		return rc;
	if (end > in->size)
		in->size = end;
	in->written = true;
	return VY_OK;
}

vy_err vy_file_truncate(vy_fs *fs, vy_inode *in, uint64_t size, vy_error *e)
{
	vy_err settled = vy_wbehind_settle(fs, in, e);
	if (settled != VY_OK)
		return settled;
	vy_readahead_forget(in);
	if (size > VY_FILE_MAX)
		return vy_fail(e, VY_EOVERFLOW, "keep files under 8 EiB", "a %llu-byte file is too large",
			       (unsigned long long)size);
	if (in->maps && size < in->size)
		return mapped(in, e);
	if (in->size) /* a size set on an empty file leaves its head zeros: lead 0 */
		vy_file_place_touch(in, size < in->size ? size : in->size);
	if (size > in->size) {
		/* Past the capacity by a granule or more: holes (sparse), up
		 * to the device's memory; past that, the tail (no buffer). */
		uint64_t span = size, limit = span_limit(fs, in);
		if (size > in->cap && size > limit)
			span = vy_fs_core(fs, in)->dev->share ? (limit > in->cap ? limit : in->cap) : in->cap;
		vy_err rc = extend_sparse(fs, in, span, span, e);
		if (rc == VY_OK)
			rc = reserve(fs, in, span, e);
		vy_devices_name_nospace(fs, in, rc, e);
		if (rc == VY_OK)
			rc = zero(fs, in, in->size, span, e);
		if (rc != VY_OK)
			return rc;
		in->size = size;
		return VY_OK;
	}
	in->size = size;
	if (size == 0) {
		vy_file_drop(fs, in);
	} else if (vy_store_growable(vy_fs_core(fs, in)->store, in->buf)) {
		if (in->cap > fitted(size))
			shrink_in_place(fs, in, fitted(size));
	} else if (in->cap / 2 > fitted(size)) {
		/* Far larger than needed: give capacity back. If the smaller
		 * buffer cannot be had now, the larger one serves. */
		vy_error why;
		if (rebuffer(fs, in, fitted(size), &why) != VY_OK)
			vy_log(LOG_NOTICE, "inode %llu: keeping %llu bytes of capacity: %s", (unsigned long long)in->ino,
			       (unsigned long long)in->cap, why.msg);
	}
	return VY_OK;
}

vy_err vy_file_allocate(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t len, bool keep_size, vy_error *e)
{
	uint64_t end;
	if (!vy_add_u64(off, len, &end) || end > VY_FILE_MAX)
		return vy_fail(e, VY_EOVERFLOW, "allocate below 8 EiB", "the range ends past byte %llu",
			       (unsigned long long)VY_FILE_MAX);
	vy_readahead_forget(in);
	vy_err rc = make_room(fs, in, off, end, e);
	if (rc != VY_OK || keep_size || end <= in->size)
		return rc;
	rc = zero(fs, in, in->size, end, e);
	if (rc == VY_OK)
		in->size = end;
	return rc;
}

vy_err vy_file_punch(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t len, vy_error *e)
{
	uint64_t end;
	if (!vy_add_u64(off, len, &end) || end > VY_FILE_MAX)
		end = VY_FILE_MAX;
	/* Gathered writes land first, or their copy would overwrite zeros. */
	vy_err rc = vy_wbehind_settle(fs, in, e);
	if (rc != VY_OK)
		return rc;
	vy_readahead_forget(in);
	uint64_t stop = end < in->size ? end : in->size;
	if (off >= stop)
		return VY_OK;
	vy_file_place_touch(in, off);
	/* Whole pieces inside the range go (holes again); the rest is zeroed. */
	if (in->buf && vy_store_growable(vy_fs_core(fs, in)->store, in->buf)) {
		vy_buffer_view v;
		rc = quiet(fs, in, e);
		hold_drops(fs);
		if (rc == VY_OK)
			rc = vy_store_punch(vy_fs_core(fs, in)->store, in->buf, off, stop - off, &v, e);
		if (rc == VY_OK)
			took(fs, in, &v);
		release_drops(fs);
		if (rc != VY_OK)
			return rc;
	}
	return zero(fs, in, off, stop, e);
}

vy_err vy_file_copy(vy_fs *fs, vy_inode *src, uint64_t off_in, vy_inode *dst, uint64_t off_out, uint64_t len,
		    uint64_t *copied, vy_error *e)
{
	*copied = 0;
	vy_err rc = vy_wbehind_settle(fs, src, e);
	if (rc == VY_OK && dst != src)
		rc = vy_wbehind_settle(fs, dst, e);
	if (rc != VY_OK || off_in >= src->size || len == 0)
		return rc;
	if (len > src->size - off_in)
		len = src->size - off_in;
	uint64_t end;
	if (!vy_add_u64(off_out, len, &end) || end > VY_FILE_MAX)
		return vy_fail(e, VY_EOVERFLOW, "copy below 8 EiB", "the copy ends past byte %llu",
			       (unsigned long long)VY_FILE_MAX);
	vy_readahead_forget(dst);
	/* A whole copy is placed as its source is (core/place.h); another
	 * that reaches the head decides again at the last close. */
	if (off_in == 0 && off_out == 0 && dst != src && !dst->buf && dst->size == 0)
		dst->lead = src->lead;
	else
		vy_file_place_touch(dst, off_out);
	/* Room first: when src is dst, this may move the source too. */
	rc = make_room(fs, dst, off_out, end, e);
	if (rc == VY_OK && off_out > dst->size)
		rc = zero(fs, dst, dst->size, off_out, e);
	/* The source's tail reads zeros: only what its buffer holds is copied. */
	uint64_t dend = data_end(src), dev = off_in < dend ? (dend - off_in < len ? dend - off_in : len) : 0;
	if (rc == VY_OK && dev)
		rc = src->dev == dst->dev ? vy_copy(vy_fs_core(fs, dst), src->buf, off_in, dst->buf, off_out, dev, e)
					  : vy_peer_copy(vy_fs_core(fs, dst), dst->buf, off_out, vy_fs_core(fs, src), src->buf,
							 off_in, dev, fs->direct[dst->dev * fs->ndev + src->dev], e);
	if (rc == VY_OK && dev < len)
		rc = vy_fill(vy_fs_core(fs, dst), dst->buf, off_out + dev, len - dev, 0, e);
	if (rc != VY_OK)
		return rc;
	if (end > dst->size)
		dst->size = end;
	dst->written = true;
	*copied = len;
	return VY_OK;
}

/* The file's bytes into `h` on core `to`: where the file has holes, `h`
 * has them too, and only its data runs get memory and are copied. */
static vy_err move_bytes(vy_fs *fs, vy_inode *in, vy_core *to, vy_handle h, unsigned dev, vy_error *e)
{
	vy_core *from = vy_fs_core(fs, in);
	bool direct = fs->direct[dev * fs->ndev + in->dev];
	vy_err rc = VY_OK;
	uint64_t dend = data_end(in); /* the tail moves as the size alone */
	for (uint64_t at = 0; rc == VY_OK && at < dend;) {
		uint64_t d = in->holes ? vy_store_seek(from->store, in->buf, at, true) : at;
		if (d >= dend)
			break;
		uint64_t end = in->holes ? vy_store_seek(from->store, in->buf, d, false) : dend;
		end = end < dend ? end : dend;
		if (in->holes)
			rc = vy_core_back(to, h, d, end - d, NULL, e);
		if (rc == VY_OK)
			rc = to == from ? vy_copy(to, in->buf, d, h, d, end - d, e)
					: vy_peer_copy(to, h, d, from, in->buf, d, end - d, direct, e);
		at = end;
	}
	return rc;
}

/* The file's bytes into a new buffer on device `dev` whose byte 0 sits
 * `lead` bytes into its memory, then the old one freed (replace_buffer). The
 * bytes move, not the headroom: a file that grows after grows in place
 * there. On failure nothing changed. */
static vy_err relocate(vy_fs *fs, vy_inode *in, unsigned dev, uint32_t lead, vy_error *e)
{
	vy_core *to = fs->dev[dev].core;
	vy_handle h = 0;
	uint64_t len = page_up(data_end(in)) ? page_up(data_end(in)) : in->cap;
	vy_err rc = in->holes ? vy_store_alloc_holes_placed(to->store, len, lead, &h, e)
			      : vy_store_alloc_placed(to->store, len, lead, &h, e);
	if (rc == VY_OK)
		rc = move_bytes(fs, in, to, h, dev, e);
	vy_buffer_view v;
	if (rc == VY_OK)
		rc = vy_store_view(to->store, h, &v, e);
	if (rc != VY_OK) {
		if (h)
			vy_store_free(to->store, h, NULL);
		return rc;
	}
	in->lead = (uint16_t)lead;
	replace_buffer(fs, in, dev, h, v.len, v.holes);
	return VY_OK;
}

/* Placed for its format again (fs/file_place.h): its head asks for
 * another lead than its buffer has, and a move on its device gives it.
 * Best effort: a file that stays as it is maps as it is (vy_mapping_ptr
 * says how it sits), and the log says why. */
static void place_again(vy_fs *fs, vy_inode *in)
{
	uint32_t lead;
	if (!vy_file_place_head(fs, in, &lead) || lead == in->lead) {
		in->head_due = false;
		return;
	}
	vy_error why;
	vy_err rc = in->maps ? vy_fail(&why, VY_EBUSY, "write the file before a program maps it",
				       "a program maps it, so its memory cannot move")
			     : quiet(fs, in, &why);
	if (rc == VY_OK && !in->buf) {
		in->lead = (uint16_t)lead; /* the tail alone: its first memory is placed */
		in->head_due = false;
		return;
	}
	if (rc == VY_OK)
		rc = relocate(fs, in, in->dev, lead, &why);
	in->head_due = rc != VY_OK; /* refused: the next close or first mapping tries again */
	if (rc == VY_OK)
		vy_telemetry_add(vy_fs_core(fs, in)->tel, placed_moves, 1);
	else
		vy_log(LOG_NOTICE, "inode %llu: not placed for its format (%u bytes before byte 0; its head asks for %u): %s",
		       (unsigned long long)in->ino, in->lead, lead, why.msg);
}

vy_err vy_file_move(vy_fs *fs, vy_inode *in, unsigned dev, vy_error *e)
{
	if (dev == in->dev)
		return VY_OK;
	if (in->maps)
		return vy_fail(e, VY_EBUSY, "unmap the file first (vy_unmap, or end the program that mapped it)",
			       "inode %llu is mapped by a program: it cannot move to another device",
			       (unsigned long long)in->ino);
	/* Nothing of the old device's may stay: copies in flight land,
	 * and the staging memory of write-behind and readahead goes back. */
	vy_err rc = vy_wbehind_settle(fs, in, e);
	if (rc != VY_OK)
		return rc;
	vy_wbehind_free(fs, in);
	vy_readahead_free(fs, in);
	if (!in->buf) {
		in->dev = (uint8_t)dev;
		return VY_OK;
	}
	return relocate(fs, in, dev, in->lead, e);
}

vy_err vy_file_back(vy_fs *fs, vy_inode *in, uint64_t off, uint64_t end, vy_error *e)
{
	return back(fs, in, off, end, e);
}

vy_err vy_file_share(vy_fs *fs, vy_inode *in, vy_error *e)
{
	vy_err rc = vy_wbehind_settle(fs, in, e);
	/* A first mapping places what a close did not (a mapping held while
	 * the header came; a takeover), before the memory is handed out. */
	if (rc == VY_OK && !in->maps && in->head_due)
		place_again(fs, in);
	/* The tail gets memory too: another process maps every byte (a 1
	 * TiB sparse file: ENOSPC, saying the budget, before anything). */
	if (rc == VY_OK && in->size > in->cap)
		rc = make_room(fs, in, in->cap, in->size, e);
	if (rc != VY_OK || !in->buf)
		return rc;
	vy_readahead_forget(in);
	hold_drops(fs);
	rc = vy_core_share(vy_fs_core(fs, in), in->buf, e);
	vy_buffer_view v;
	if (rc == VY_OK && vy_store_growable(vy_fs_core(fs, in)->store, in->buf) &&
	    vy_store_view(vy_fs_core(fs, in)->store, in->buf, &v, NULL) == VY_OK)
		took(fs, in, &v);
	else if (rc == VY_OK)
		vy_persist_layout(fs, in); /* moved to memory of its own */
	release_drops(fs);
	return rc;
}

int vy_file_seek(vy_fs *fs, vy_inode *in, uint64_t off, bool data, uint64_t *at)
{
	uint64_t dend = data_end(in);
	if (off >= in->size)
		return ENXIO; /* as lseek(2): at or past the end, neither data nor a hole */
	uint64_t x = off;
	if (off >= dend)
		x = data ? UINT64_MAX : off; /* the tail: a hole to the end */
	else if (in->holes)
		x = vy_store_seek(vy_fs_core(fs, in)->store, in->buf, off, data);
	else if (!data)
		x = dend; /* no hole before the buffer's end */
	if (data && x >= dend)
		return ENXIO;
	*at = x < in->size ? x : in->size;
	return 0;
}

vy_err vy_file_settle(vy_fs *fs, vy_inode *in, vy_error *e)
{
	return vy_wbehind_settle(fs, in, e);
}

void vy_file_closed(vy_fs *fs, vy_inode *in)
{
	vy_readahead_release(fs, in);
	if (!in->written)
		return;
	in->written = false;
	if (in->size == 0) {
		vy_file_drop(fs, in);
		return;
	}
	if (in->head_due)
		place_again(fs, in); /* its buffer then holds no headroom */
	uint64_t want = fitted(in->size);
	if (in->cap <= want || in->maps)
		return;
	if (vy_store_growable(vy_fs_core(fs, in)->store, in->buf)) {
		shrink_in_place(fs, in, want);
		return;
	}
	vy_error why;
	if (rebuffer(fs, in, want, &why) != VY_OK)
		vy_log(LOG_NOTICE, "inode %llu: keeping %llu bytes of capacity: %s", (unsigned long long)in->ino,
		       (unsigned long long)in->cap, why.msg);
}

void vy_inode_reap(vy_fs *fs, vy_inode *in)
{
	if (vy_inode_unreachable(in) && in->kind == VY_FILE && in->buf) {
		/* No name and no handle: nobody can reach the bytes again. */
		pthread_rwlock_wrlock(&in->lock);
		vy_file_drop(fs, in);
		pthread_rwlock_unlock(&in->lock);
	}
	if (in->tier && vy_inode_unreachable(in)) {
		/* backing=DIR: no name and nothing open, so nobody's bytes in DIR
		 * either; the item goes with the inode. */
		vy_tier_gone(fs->tier, in->tier);
		if (!in->nlookup && !in->holds) {
			vy_tier_forget(fs->tier, in->tier);
			in->tier = NULL;
		}
	}
	uint64_t ino = in->ino;
	vy_ns_reap(vy_fs_ns(fs), in);
	if (!vy_u64map_get(&fs->inodes, ino))
		vy_persist_gone(fs, ino); /* freed: in is gone */
}
