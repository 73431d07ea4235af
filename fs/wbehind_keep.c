/* Write-behind slots a successor finds (wbehind_keep.h). */
#include "fs/wbehind_keep.h"
#include "core/checked.h"
#include "core/transfer.h"
#include "core/store_shape.h"
#include "daemon/log.h"
#include "fs/wbehind.h"
#include "persist/format.h"
#include "persist/writer.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define WBK_MAGIC "vyrefswb"
#define WBK_VERSION 1u
#define WBK_DESCS 64u /* where the descriptors start */

typedef struct wbk_head {
	char magic[8];
	uint32_t version, slots;
	uint64_t slot_bytes;
} wbk_head;

typedef struct wbk_desc {
	uint64_t ino, start;
	uint64_t len; /* written last, read first */
	uint64_t order;
} wbk_desc;

_Static_assert(sizeof(wbk_head) <= WBK_DESCS && VY_WB_SLOTS <= 64, "fs/wbehind_keep.c: the masks hold every slot");

struct vy_wbk {
	uint8_t *base; /* the memfd's mapping: it and the keeper's copy hold it */
	uint64_t bytes, head_bytes, slot_bytes;
	uint32_t slots;
	vy_keep_slot slot; /* the keeper's */
	vy_device *dev;    /* the one that page-locks (portable: every context's) */
	pthread_mutex_t lock;
	uint64_t busy, locked, bad; /* masks of slots taken, page-locked, and that would not lock */
	uint64_t held;              /* taken too: a failed copy's, kept for a successor */
	bool said;             /* a slot that would not lock: logged once */
	bool said_held;        /* half the slots held: logged once */
	_Atomic uint64_t order;
};

static uint64_t head_bytes_of(uint32_t slots)
{
	return (WBK_DESCS + (uint64_t)slots * sizeof(wbk_desc) + 4095) & ~4095ull;
}

static wbk_desc *desc(vy_wbk *w, int index)
{
	return (wbk_desc *)(w->base + WBK_DESCS) + (index - 1);
}

static uint8_t *slot_mem(vy_wbk *w, int index)
{
	return w->base + w->head_bytes + (uint64_t)(index - 1) * w->slot_bytes;
}

/* Map a region of this geometry over fd (made when `fresh`); NULL with
 * errno. */
static vy_wbk *map_region(int fd, uint32_t slots, uint64_t slot_bytes, bool fresh)
{
	uint64_t data, bytes;
	if (!vy_mul_u64(slots, slot_bytes, &data) || !vy_add_u64(data, head_bytes_of(slots), &bytes) ||
	    bytes > SIZE_MAX) {
		errno = EOVERFLOW;
		return NULL;
	}
	struct stat st;
	if ((fresh && ftruncate(fd, (off_t)bytes) != 0) || fstat(fd, &st) != 0)
		return NULL;
	if ((uint64_t)st.st_size != bytes) { /* a region is exactly its shape's size */
		errno = EINVAL;
		return NULL;
	}
	vy_wbk *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->base = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (w->base == MAP_FAILED) {
		free(w);
		return NULL;
	}
	w->bytes = bytes;
	w->slots = slots;
	w->slot_bytes = slot_bytes;
	w->head_bytes = head_bytes_of(slots);
	pthread_mutex_init(&w->lock, NULL);
	return w;
}

static void unmap_region(vy_wbk *w)
{
	for (int i = 1; i <= (int)w->slots && i <= 64; i++) /* the masks' */
		if (w->locked & (1ull << (i - 1))) {
			vy_error e;
			if (w->dev->ops->host_unregister(w->dev, slot_mem(w, i), &e) != VY_OK)
				vy_log(LOG_WARNING, "write-behind slot %d: %s", i, e.msg);
		}
	munmap(w->base, (size_t)w->bytes);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static vy_p_wbehind record_of(const vy_wbk *w)
{
	return (vy_p_wbehind){.slot = w->slot, .slots = w->slots, .slot_bytes = w->slot_bytes, .bytes = w->bytes};
}

bool vy_wbk_start(vy_fs *fs)
{
	int fd = memfd_create("vyrefs-wbehind", MFD_CLOEXEC);
	vy_wbk *w = fd >= 0 ? map_region(fd, VY_WB_SLOTS, VY_WB_SLOT, true) : NULL;
	if (w) {
		wbk_head h = {.magic = WBK_MAGIC, .version = WBK_VERSION, .slots = w->slots, .slot_bytes = w->slot_bytes};
		memcpy(w->base, &h, sizeof(h));
		w->slot = fs->keep_sink->add(fs->keep_sink->ctx, fd);
	}
	if (!w || !w->slot) {
		int err = errno;
		if (w)
			unmap_region(w);
		if (fd >= 0)
			close(fd);
		vy_log(LOG_WARNING, "write-behind is off: no region the keeper holds (%s); small writes go to the "
				    "device one by one (Fix: free host memory, then umount and mount again)",
		       w ? "the keeper took no fd" : strerror(err));
		return false;
	}
	close(fd); /* the mapping and the keeper's copy hold it */
	w->dev = fs->dev[0].core->dev;
	vy_p_wbehind r = record_of(w);
	vy_persist_wbehind(fs, &r);
	fs->wbk = w;
	return true;
}

enum { COPIED, GONE, FAILED };

/* Whether a held slot is file `ino`'s (w->lock held, or no other thread). */
static bool holds_file(vy_wbk *w, uint64_t ino)
{
	for (int i = 1; i <= (int)w->slots; i++)
		if ((w->held & (1ull << (i - 1))) && desc(w, i)->ino == ino)
			return true;
	return false;
}

/* Copy one waiting slot into its file, only where the file has memory
 * (a hole there belongs to a write not answered, which comes again). */
static int apply_one(vy_fs *fs, vy_wbk *w, int index, vy_wbk_failed failed)
{
	const wbk_desc *d = desc(w, index);
	vy_inode *in = vy_fs_inode(fs, d->ino);
	uint64_t end;
	if (!in || in->kind != VY_FILE || !in->buf || !vy_add_u64(d->start, d->len, &end))
		return GONE;
	uint64_t stop = in->size < in->cap ? in->size : in->cap;
	end = end < stop ? end : stop;
	vy_core *core = vy_fs_core(fs, in);
	for (uint64_t from = d->start; from < end;) {
		uint64_t at = in->holes ? vy_store_seek(core->store, in->buf, from, true) : from;
		if (at >= end)
			break;
		uint64_t to = in->holes ? vy_store_seek(core->store, in->buf, at, false) : end;
		to = to < end ? to : end;
		vy_upload up = {.handle = in->buf, .offset = at, .src = slot_mem(w, index) + (at - d->start), .len = to - at};
		vy_error e;
		vy_err rc = vy_upload_many(core, &up, 1, &e);
		if (rc != VY_OK) {
			failed(fs, in, rc, &e); /* its writer was answered: the next fsync says so */
			return FAILED;
		}
		from = to;
	}
	return COPIED;
}

/* Every waiting slot into its file, the oldest first; then none waits but
 * those of a file whose copy failed, held (vy_wbk_hold) for the next
 * successor in their order. */
static void apply(vy_fs *fs, vy_wbk *w, vy_wbk_failed on_fail, uint64_t *applied, uint64_t *skipped)
{
	int order[VY_P_WBEHIND_SLOTS_MAX];
	size_t n = 0;
	uint64_t top = 0;
	for (int i = 1; i <= (int)w->slots; i++) {
		const wbk_desc *d = desc(w, i);
		top = d->order > top ? d->order : top;
		if (d->len == 0 || d->len > w->slot_bytes)
			continue;
		size_t k = n++;
		for (; k > 0 && desc(w, order[k - 1])->order > d->order; k--)
			order[k] = order[k - 1];
		order[k] = i;
	}
	/* Each cleared once copied, the oldest first: a death in between
	 * leaves only slots newer than any cleared, copied again. */
	for (size_t k = 0; k < n; k++) {
		int i = order[k];
		/* After a failed slot of its file: held behind it, in order. */
		int got = holds_file(w, desc(w, i)->ino) ? FAILED : apply_one(fs, w, i, on_fail);
		if (got == FAILED) {
			vy_wbk_hold(w, i);
			*skipped += 1;
			continue;
		}
		*(got == COPIED ? applied : skipped) += 1;
		vy_wbk_publish(w, i, 0);
	}
	for (int i = 1; i <= (int)w->slots; i++)
		if (!(w->held & (1ull << (i - 1))))
			memset(desc(w, i), 0, sizeof(wbk_desc));
	atomic_store(&w->order, top);
}

void vy_wbk_adopt(vy_fs *fs, const vy_p_wbehind *kept, vy_keep_fds *mem, vy_wbk_failed failed, uint64_t *applied,
		  uint64_t *skipped)
{
	if (!kept->slot)
		return;
	int fd = kept->slot < mem->n ? mem->fd[kept->slot] : -1;
	vy_wbk *w = fd >= 0 ? map_region(fd, kept->slots, kept->slot_bytes, false) : NULL;
	wbk_head h;
	if (w)
		memcpy(&h, w->base, sizeof(h));
	if (!w || memcmp(h.magic, WBK_MAGIC, 8) || h.version != WBK_VERSION || h.slots != kept->slots ||
	    h.slot_bytes != kept->slot_bytes) {
		if (w)
			unmap_region(w);
		vy_log(LOG_ERR, "takeover: the write-behind region %s; writes gathered before the death may be lost",
		       fd < 0 ? "is not with the keeper" : "cannot be read");
		return;
	}
	w->dev = fs->dev[0].core->dev;
	apply(fs, w, failed, applied, skipped);
	if (w->slots != VY_WB_SLOTS || w->slot_bytes != VY_WB_SLOT || !fs->cfg.write_behind) {
		if (w->held) /* their files' errors stand in this daemon, not after its death */
			vy_log(LOG_WARNING, "takeover: %d write-behind slots whose copy failed again are not kept for a "
					    "later successor (this region is not taken: %s)", __builtin_popcountll(w->held),
			       fs->cfg.write_behind ? "another build's slot size" : "write_behind=off");
		unmap_region(w); /* another build's shape, or none wanted: its fd stays in mem, dropped */
		return;
	}
	mem->fd[kept->slot] = -1; /* ours: the keeper's copy stays, under its slot */
	close(fd);
	w->slot = kept->slot;
	fs->wbk = w;
}

void vy_wbk_stop(vy_fs *fs)
{
	if (fs->wbk)
		unmap_region(fs->wbk);
	fs->wbk = NULL;
}

void *vy_wbk_take(vy_wbk *w, int *index)
{
	pthread_mutex_lock(&w->lock);
	int i = 1;
	while (i <= (int)w->slots && ((w->busy | w->bad) & (1ull << (i - 1))))
		i++;
	void *p = i <= (int)w->slots ? slot_mem(w, i) : NULL;
	uint64_t bit = 1ull << (i - 1);
	if (p && !(w->locked & bit) && w->dev->ops->host_register) {
		vy_error e;
		if (w->dev->ops->host_register(w->dev, p, (size_t)w->slot_bytes, &e) != VY_OK) {
			if (!w->said)
				vy_log(LOG_WARNING, "write-behind: a slot cannot be page-locked (%s); writes go to the "
						    "device directly (Fix: raise the locked-memory limit, ulimit -l)", e.msg);
			w->said = true;
			w->bad |= bit; /* never tried again: a write would retry it under the lock */
			p = NULL;
		}
	}
	if (p) {
		w->locked |= w->dev->ops->host_register ? bit : 0;
		w->busy |= bit;
		*index = i;
	}
	pthread_mutex_unlock(&w->lock);
	return p;
}

void vy_wbk_give(vy_wbk *w, int index)
{
	pthread_mutex_lock(&w->lock);
	w->busy &= ~(1ull << (index - 1));
	pthread_mutex_unlock(&w->lock);
}

void vy_wbk_hold(vy_wbk *w, int index)
{
	pthread_mutex_lock(&w->lock);
	w->held |= 1ull << (index - 1);
	w->busy |= 1ull << (index - 1);
	if (!w->said_held && 2 * (unsigned)__builtin_popcountll(w->held) >= w->slots) {
		w->said_held = true;
		vy_log(LOG_WARNING, "write-behind: %d of %u slots hold bytes whose copy to the device failed; small "
				    "writes go to the device one by one once none is left (Fix: delete the files whose "
				    "writes failed, or umount and mount again)", __builtin_popcountll(w->held), w->slots);
	}
	pthread_mutex_unlock(&w->lock);
}

void vy_wbk_drop_held(vy_wbk *w, uint64_t ino)
{
	pthread_mutex_lock(&w->lock);
	for (int i = 1; i <= (int)w->slots; i++) {
		uint64_t bit = 1ull << (i - 1);
		if ((w->held & bit) && desc(w, i)->ino == ino) {
			vy_wbk_publish(w, i, 0);
			w->held &= ~bit;
			w->busy &= ~bit;
		}
	}
	pthread_mutex_unlock(&w->lock);
}

void vy_wbk_begin(vy_wbk *w, int index, uint64_t ino, uint64_t start)
{
	wbk_desc *d = desc(w, index);
	__atomic_store_n(&d->len, 0, __ATOMIC_RELEASE);
	atomic_thread_fence(memory_order_release); /* no length over the new ino and start */
	d->ino = ino;
	d->start = start;
	__atomic_store_n(&d->order, atomic_fetch_add(&w->order, 1) + 1, __ATOMIC_RELEASE);
}

void vy_wbk_publish(vy_wbk *w, int index, uint64_t len)
{
	/* Release: the bytes (and ino, start) reach memory before the length. */
	__atomic_store_n(&desc(w, index)->len, len, __ATOMIC_RELEASE);
}
