/* Resident store: handles, budget, in-flight pins, deferred frees. */
#include "core/store_impl.h"
#include "core/checked.h"
#include "core/pool.h"
#include "core/u64map.h"
#include "core/view.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* The seed's budget: 9/10 of device memory, and 9/10 of what is free now. */
#define BUDGET_NUM 9
#define BUDGET_DEN 10



void vy_store_publish(vy_store *s)
{
	vy_telemetry_set(s->tel, resident_bytes, s->resident);
	vy_telemetry_set(s->tel, resident_buffers, s->live);
}

/* The zero granule, made when the first hole needs it: shareable memory
 * set to zeros once (a memset on the default stream, then a wait). It is
 * the mount's, outside the budget, and goes when no hole maps it. */
vy_err vy_store_zeros_ready(vy_store *s, vy_error *e)
{
	if (s->zeros.p)
		return VY_OK;
	vy_dptr p;
	vy_err rc = s->dev->ops->alloc(s->dev, s->zeros.g, &p, e);
	if (rc != VY_OK)
		return rc;
	rc = s->dev->ops->memset8(s->dev, NULL, p, 0, s->zeros.g, e);
	if (rc == VY_OK)
		rc = s->dev->ops->synchronize(s->dev, e);
	if (rc != VY_OK) {
		s->dev->ops->free(s->dev, p, NULL);
		return rc;
	}
	if (s->kept) /* zeros are no file's bytes: a successor maps its own */
		s->dev->keep->forget(s->dev, p);
	s->zeros.p = p;
	return VY_OK;
}

void vy_store_zeros_idle(vy_store *s)
{
	if (s->zeros.p && s->zeros.maps == 0 && s->dev->ops->free(s->dev, s->zeros.p, NULL) == VY_OK)
		s->zeros.p = 0;
}

vy_err vy_store_open(vy_device *dev, vy_telemetry *tel, const vy_store_options *opt, vy_store **out, vy_error *e)
{
	uint64_t free_now, total;
	vy_err rc = dev->ops->mem_info(dev, &free_now, &total, e);
	if (rc != VY_OK)
		return rc;
	uint64_t budget = opt->budget_bytes;
	if (!budget)
		budget = opt->budget_percent ? vy_scale_u64(total, opt->budget_percent, 100)
					     : vy_scale_u64(total, BUDGET_NUM, BUDGET_DEN);
	if (budget > total || opt->budget_percent > 100)
		return vy_fail(e, VY_EINVAL, "set resident_budget at most the device memory (or as a percentage)",
			       "resident budget %llu bytes exceeds the device's %llu bytes",
			       (unsigned long long)budget, (unsigned long long)total);
	vy_store *s = calloc(1, sizeof(*s));
	if (!s)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the resident store");
	if (pthread_mutex_init(&s->lock, NULL) != 0) {
		free(s);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot create the resident store's mutex");
	}
	s->dev = dev;
	s->tel = tel;
	s->next_id = 1;
	s->total = total;
	s->budget = budget;
	s->zeros.g = dev->info.share_granularity;
	vy_u64map_init(&s->buffers);
	vy_pool_init(&s->pool, dev, tel, opt->pool_cap == VY_POOL_CAP_DEFAULT ? total / 32 : opt->pool_cap);
	vy_store_publish(s);
	*out = s;
	return VY_OK;
}

vy_err vy_store_close(vy_store *s, vy_error *e)
{
	if (!s)
		return VY_OK;
	vy_err first = VY_OK;
	uint64_t pinned = 0, key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&s->buffers, &cursor, &key, &value)) {
		store_buffer *b = value;
		if (b->inflight)
			pinned++;
		vy_error err;
		vy_err rc = vy_view_drop(s->dev, &b->view, &s->zeros, &err);
		for (uint32_t i = 0; i < chunks_of(b); i++) {
			vy_error ferr;
			vy_err frc = s->dev->ops->free(s->dev, chunk_at(b, i).p, &ferr);
			if (frc == VY_OK)
				vy_telemetry_add(s->tel, driver_frees, 1);
			else if (rc == VY_OK) {
				rc = frc;
				err = ferr;
			}
		}
		if (rc != VY_OK && first == VY_OK) {
			first = rc;
			if (e)
				*e = err;
		}
		free(b->view.piece);
		free(b);
	}
	vy_u64map_destroy(&s->buffers);
	vy_store_zeros_idle(s);
	s->resident = 0;
	s->live = 0;
	vy_store_publish(s);
	vy_error err;
	vy_err rc = vy_pool_destroy(&s->pool, &err);
	if (rc != VY_OK && first == VY_OK) {
		first = rc;
		if (e)
			*e = err;
	}
	if (pinned && first == VY_OK)
		first = vy_fail(e, VY_EBUSY, "stop all work before closing the store",
				"%llu buffer(s) were still in flight at close; freed anyway",
				(unsigned long long)pinned);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return first;
}

/* Whether `len` more bytes fit: the configured budget, and 9/10 of what the
 * driver reports free now. `used` counts pooled bytes too. */
static vy_err fits_budget(vy_store *s, uint64_t len, vy_error *e)
{
	uint64_t used, want;
	if (!vy_add_u64(s->resident, s->pool.bytes, &used) || !vy_add_u64(used, len, &want))
		return vy_fail(e, VY_EOVERFLOW, "allocate less", "device byte accounting would overflow");
	if (want > s->budget)
		return vy_fail(e, VY_ENOSPC, FIX_FREE,
			       "no room for %llu bytes: %llu of the %llu-byte resident budget in use, %llu left",
			       (unsigned long long)len, (unsigned long long)used, (unsigned long long)s->budget,
			       (unsigned long long)(s->budget > used ? s->budget - used : 0));
	char why[320];
	if (s->sink && s->sink->room && !s->sink->room(s->sink->ctx, why, sizeof(why)))
		return vy_fail(e, VY_ENOSPC, "raise the open-file limit the mount starts with (ulimit -n, LimitNOFILE=), "
					     "then umount and mount again; keep fewer, larger files; or mount with survive=off",
			       "no room for %llu bytes a successor would get back: %s", (unsigned long long)len, why);
	uint64_t free_now, total;
	vy_err rc = s->dev->ops->mem_info(s->dev, &free_now, &total, e);
	if (rc != VY_OK)
		return rc;
	uint64_t live_room = vy_scale_u64(free_now, BUDGET_NUM, BUDGET_DEN);
	if (len > live_room)
		return vy_fail(e, VY_ENOSPC, "free device memory (other processes may hold it: see nvidia-smi), or delete files",
			       "no room for %llu bytes: the device has %llu bytes free, of which 90%% (%llu) may be used",
			       (unsigned long long)len, (unsigned long long)free_now, (unsigned long long)live_room);
	return VY_OK;
}

/* A new driver allocation within the budget, evicting pooled buffers (largest
 * first) while that makes room. */
static vy_err alloc_from_driver(vy_store *s, uint64_t len, vy_dptr *out, vy_error *e)
{
	for (;;) {
		vy_err rc = fits_budget(s, len, e);
		if (rc == VY_OK) {
			rc = s->dev->ops->alloc(s->dev, len, out, e);
			if (rc == VY_OK) {
				vy_telemetry_add(s->tel, driver_allocs, 1);
				return VY_OK;
			}
		}
		if (rc != VY_ENOSPC || s->pool.buffers == 0)
			return rc;
		if (vy_pool_evict_largest(&s->pool, e) != VY_OK)
			return rc;
	}
}

/* Memory of `alloc` bytes from the pool, else the driver. Lock held. */
vy_err vy_store_take_memory(vy_store *s, uint64_t alloc, vy_dptr *ptr, vy_error *e)
{
	if (vy_pool_take(&s->pool, alloc, ptr))
		return VY_OK;
	return alloc_from_driver(s, alloc, ptr, e);
}

vy_err vy_store_alloc(vy_store *s, uint64_t len, vy_handle *out, vy_error *e)
{
	return vy_store_alloc_placed(s, len, 0, out, e);
}

vy_err vy_store_alloc_placed(vy_store *s, uint64_t len, uint64_t lead, vy_handle *out, vy_error *e)
{
	if (len == 0)
		return vy_fail(e, VY_EINVAL, "allocate at least 1 byte (an empty file holds no buffer)",
			       "zero-length resident buffer");
	if (lead > VY_STORE_LEAD_MAX || !vy_add_u64(len, lead, &len))
		return vy_fail(e, VY_EINVAL, "place byte 0 at most 64 KiB into a buffer",
			       "a buffer's byte 0 %llu bytes into its memory", (unsigned long long)lead);
	store_buffer *b = malloc(sizeof(*b));
	if (!b)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate a buffer record");
	pthread_mutex_lock(&s->lock);
	vy_err rc = VY_OK;
	uint64_t resident;
	if (s->next_id == UINT64_MAX) {
		rc = vy_fail(e, VY_EOVERFLOW, "remount to start a new id space",
			     "resident handle ids are exhausted (the last id was %llu)",
			     (unsigned long long)(s->next_id - 1));
		goto out;
	}
	uint64_t alloc = vy_device_alloc_size(s->dev, len);
	if (!alloc || !vy_add_u64(s->resident, alloc, &resident)) {
		rc = vy_fail(e, VY_EOVERFLOW, "allocate less", "resident byte accounting would overflow");
		goto out;
	}
	vy_dptr ptr;
	rc = vy_store_take_memory(s, alloc, &ptr, e);
	if (rc != VY_OK)
		goto out;
	*b = (store_buffer){.id = s->next_id, .ptr = ptr, .len = len, .alloc = alloc, .gen = ++s->next_gen,
			    .lead = (uint32_t)lead};
	if (!vy_u64map_put(&s->buffers, b->id, b)) {
		/* The memory is ours and idle: the pool keeps or frees it. */
		vy_pool_put(&s->pool, alloc, ptr, NULL);
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot record a new buffer");
		goto out;
	}
	s->next_id++;
	s->resident = resident;
	s->live++;
	vy_store_publish(s);
	*out = b->id;
	b = NULL;
out:
	pthread_mutex_unlock(&s->lock);
	free(b);
	return rc;
}

/* Idle memory back: to the pool, or to the driver when a client may still
 * hold an fd of it (it could map it again: it must never hold another
 * file's bytes). Lock held. */
vy_err vy_store_give_back(vy_store *s, bool untrusted, vy_dptr p, uint64_t bytes, vy_error *e)
{
	if (!untrusted)
		return vy_pool_put(&s->pool, bytes, p, e);
	vy_err rc = s->dev->ops->free(s->dev, p, e);
	if (rc == VY_OK)
		vy_telemetry_add(s->tel, driver_frees, 1);
	return rc;
}

/* Remove a buffer and hand its memory to the pool. Lock held. */
vy_err vy_store_release(vy_store *s, store_buffer *b, vy_error *e)
{
	vy_u64map_remove(&s->buffers, b->id);
	vy_err rc = VY_OK;
	if (!vy_sub_u64(s->resident, b->alloc, &s->resident) || s->live == 0) {
		/* Accounting drifted: say so, and recount from the live set. */
		rc = vy_fail(e, VY_EINTERNAL, "report this bug; the store recounted its bytes",
			     "resident accounting drift: %llu bytes freed but fewer were recorded",
			     (unsigned long long)b->alloc);
		uint64_t key, sum = 0, n = 0;
		void *value;
		size_t cursor = 0;
		while (vy_u64map_next(&s->buffers, &cursor, &key, &value)) {
			sum += ((store_buffer *)value)->alloc;
			n++;
		}
		s->resident = sum;
		s->live = n;
	} else {
		s->live--;
	}
	vy_store_publish(s);
	vy_error perr;
	vy_err prc = vy_view_drop(s->dev, &b->view, &s->zeros, &perr);
	vy_store_zeros_idle(s);
	for (uint32_t i = 0; i < chunks_of(b); i++) {
		vy_piece c = chunk_at(b, i);
		vy_error gerr;
		vy_err grc = vy_store_give_back(s, b->untrusted, c.p, c.bytes, &gerr);
		if (grc != VY_OK && prc == VY_OK) {
			prc = grc;
			perr = gerr;
		}
	}
	if (prc != VY_OK && rc == VY_OK) {
		rc = prc;
		if (e)
			*e = perr;
	}
	free(b->view.piece);
	free(b);
	return rc;
}

vy_err vy_store_unknown(vy_error *e, vy_handle h)
{
	return vy_fail(e, VY_ENOENT, "use a handle that vy_store_alloc returned and that is not freed",
		       "unknown resident handle %llu", (unsigned long long)h);
}

/* A live (not freed) buffer, or NULL. Lock held. */
store_buffer *vy_store_live(vy_store *s, vy_handle h)
{
	store_buffer *b = vy_u64map_get(&s->buffers, h);
	return b && !b->doomed ? b : NULL;
}

vy_err vy_store_free(vy_store *s, vy_handle h, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	vy_err rc = VY_OK;
	store_buffer *b = vy_store_live(s, h);
	if (!b)
		rc = vy_store_unknown(e, h);
	else if (b->inflight || b->exports) {
		b->doomed = true;
		if (b->exports)
			s->export_frees++;
		vy_telemetry_add(s->tel, deferred_frees, 1);
	} else
		rc = vy_store_release(s, b, e);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_buffer_view vy_store_view_of(const store_buffer *b)
{
	return (vy_buffer_view){.handle = b->id, .ptr = b->ptr + b->lead, .len = b->len - b->lead, .alloc = b->alloc,
				.gen = b->gen, .holes = b->view.holes, .lead = b->lead};
}

vy_err vy_store_view(vy_store *s, vy_handle h, vy_buffer_view *out, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	if (b)
		*out = vy_store_view_of(b);
	pthread_mutex_unlock(&s->lock);
	return b ? VY_OK : vy_store_unknown(e, h);
}

vy_err vy_store_pin_many(vy_store *s, const vy_handle *handles, size_t n, vy_buffer_view *views, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	size_t i;
	vy_err rc = VY_OK;
	for (i = 0; i < n; i++) {
		store_buffer *b = vy_store_live(s, handles[i]);
		if (!b) {
			rc = vy_store_unknown(e, handles[i]);
			break;
		}
		if (b->inflight == UINT32_MAX) {
			rc = vy_fail(e, VY_EBUSY, "wait for running work to finish",
				     "resident handle %llu has too many pins", (unsigned long long)b->id);
			break;
		}
		b->inflight++;
		views[i] = vy_store_view_of(b);
	}
	if (rc != VY_OK) /* all or none: undo what this call pinned */
		while (i-- > 0)
			((store_buffer *)vy_u64map_get(&s->buffers, handles[i]))->inflight--;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_err vy_store_unpin_many(vy_store *s, const vy_handle *handles, size_t n, vy_error *e)
{
	vy_err first = VY_OK;
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		store_buffer *b = vy_u64map_get(&s->buffers, handles[i]);
		vy_err rc = VY_OK;
		if (!b || b->inflight == 0)
			rc = vy_fail(e, VY_EINTERNAL, "report this bug",
				     "unpin of resident handle %llu that is not pinned", (unsigned long long)handles[i]);
		else if (--b->inflight == 0 && b->doomed && !b->exports)
			rc = vy_store_release(s, b, e);
		if (rc != VY_OK && first == VY_OK)
			first = rc;
	}
	pthread_mutex_unlock(&s->lock);
	return first;
}

/* Whether a buffer grows in place and may have holes: it is pieces. */
bool vy_store_is_growable(vy_store *s, const store_buffer *b)
{
	uint64_t g = s->dev->info.share_granularity;
	return s->dev->share && g && (b->view.ptr || b->alloc >= g);
}

/* Whether another process may map it as it is: pieces, and no hole. */
static bool is_shareable(vy_store *s, const store_buffer *b)
{
	return vy_store_is_growable(s, b) && b->alloc > 0 && b->view.holes == 0;
}

bool vy_store_shareable(vy_store *s, vy_handle h)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	bool yes = b && is_shareable(s, b);
	pthread_mutex_unlock(&s->lock);
	return yes;
}

bool vy_store_growable(vy_store *s, vy_handle h)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	bool yes = b && vy_store_is_growable(s, b);
	pthread_mutex_unlock(&s->lock);
	return yes;
}

vy_err vy_store_share(vy_store *s, vy_handle h, vy_store_copy_fn copy, void *ctx, vy_error *e)
{
	uint64_t g = s->dev->info.share_granularity;
	if (!s->dev->share || !g)
		return vy_fail(e, VY_ENOTSUP, "use the cuda backend on a GPU with virtual memory management",
			       "this device cannot share memory with another process");
	pthread_mutex_lock(&s->lock);
	vy_err rc = VY_OK;
	store_buffer *b = vy_store_live(s, h);
	if (!b) {
		rc = vy_store_unknown(e, h);
		goto out;
	}
	if (is_shareable(s, b))
		goto out;
	if (b->inflight || b->exports) {
		rc = vy_fail(e, VY_EBUSY, "wait for running work to finish", "resident handle %llu is in use",
			     (unsigned long long)h);
		goto out;
	}
	/* Memory of its own: the granularity, which is all a mapping can
	 * cover, so no other file's bytes come with it. */
	uint64_t resident;
	if (!vy_add_u64(s->resident - b->alloc, g, &resident)) {
		rc = vy_fail(e, VY_EOVERFLOW, "allocate less", "resident byte accounting would overflow");
		goto out;
	}
	vy_dptr ptr;
	rc = vy_store_take_memory(s, g, &ptr, e);
	if (rc != VY_OK)
		goto out;
	rc = copy(ctx, ptr, b->ptr, b->len, e);
	if (rc != VY_OK) {
		vy_pool_put(&s->pool, g, ptr, NULL);
		goto out;
	}
	vy_dptr old = b->ptr;
	uint64_t old_alloc = b->alloc;
	b->ptr = ptr;
	b->alloc = g;
	b->gen = ++s->next_gen;
	s->resident = resident;
	vy_store_publish(s);
	vy_telemetry_add(s->tel, share_moves, 1);
	rc = vy_pool_put(&s->pool, old_alloc, old, e);
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

vy_err vy_store_export(vy_store *s, vy_handle h, unsigned how, vy_buffer_view *view, vy_export *out, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	vy_err rc = VY_OK;
	out->n = 0;
	store_buffer *b = vy_store_live(s, h);
	bool readonly = how & VY_EXPORT_READONLY;
	vy_err (*export_fd)(vy_device *, vy_dptr, int *, vy_error *) =
		readonly ? s->dev->share->export_fd_readonly : s->dev->share->export_fd;
	if (!export_fd)
		rc = vy_fail(e, VY_ENOTSUP, "map it for reading and writing",
			     "the %s backend cannot hand out memory that its receiver can only read",
			     s->dev->info.backend);
	else if (!b)
		rc = vy_store_unknown(e, h);
	else if (!is_shareable(s, b))
		rc = vy_fail(e, VY_EINVAL, "share the buffer first (vy_store_share)",
			     "resident handle %llu is not shareable", (unsigned long long)h);
	else if (b->exports == UINT32_MAX)
		rc = vy_fail(e, VY_EBUSY, "unmap the buffer somewhere first", "resident handle %llu has too many mappings",
			     (unsigned long long)h);
	for (uint32_t i = 0; rc == VY_OK && i < chunks_of(b); i++) {
		vy_piece c = chunk_at(b, i);
		rc = export_fd(s->dev, c.p, &out->fd[i], e);
		if (rc == VY_OK)
			out->chunk[out->n++] = c.bytes;
	}
	if (rc == VY_OK) {
		b->exports++;
		b->untrusted |= (how & VY_EXPORT_UNTRUSTED) != 0;
		*view = vy_store_view_of(b);
		vy_telemetry_add(s->tel, exports, 1);
	} else {
		vy_export_close(out);
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void vy_export_close(vy_export *x)
{
	for (uint32_t i = 0; i < x->n; i++)
		if (x->fd[i] >= 0)
			close(x->fd[i]);
	x->n = 0;
}

vy_err vy_store_unexport(vy_store *s, vy_handle h, vy_error *e)
{
	pthread_mutex_lock(&s->lock);
	vy_err rc = VY_OK;
	store_buffer *b = vy_u64map_get(&s->buffers, h); /* doomed ones too */
	if (!b || b->exports == 0)
		rc = vy_fail(e, VY_EINTERNAL, "report this bug", "unexport of resident handle %llu that is not exported",
			     (unsigned long long)h);
	else if (--b->exports == 0 && b->doomed && !b->inflight)
		rc = vy_store_release(s, b, e);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

bool vy_store_current(vy_store *s, vy_handle h, uint64_t gen)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	bool yes = b && b->gen == gen;
	pthread_mutex_unlock(&s->lock);
	return yes;
}

uint64_t vy_store_export_frees(vy_store *s)
{
	return s->export_frees;
}

uint32_t vy_store_inflight(vy_store *s, vy_handle h)
{
	pthread_mutex_lock(&s->lock);
	store_buffer *b = vy_store_live(s, h);
	uint32_t n = b ? b->inflight : 0;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void vy_store_usage_get(vy_store *s, vy_store_usage *out)
{
	pthread_mutex_lock(&s->lock);
	*out = (vy_store_usage){
		.total = s->total,
		.budget = s->budget,
		.resident = s->resident,
		.pooled = s->pool.bytes,
		.pool_cap = s->pool.cap,
		.buffers = s->live,
	};
	pthread_mutex_unlock(&s->lock);
}

uint64_t vy_store_room(vy_store *s)
{
	pthread_mutex_lock(&s->lock);
	uint64_t room = s->budget > s->resident ? s->budget - s->resident : 0, free_now, total, live;
	if (s->dev->ops->mem_info(s->dev, &free_now, &total, NULL) != VY_OK)
		room = 0; /* a device that cannot say: no promise */
	else if (vy_add_u64(free_now, s->pool.bytes, &live) && (live = vy_scale_u64(live, BUDGET_NUM, BUDGET_DEN)) < room)
		room = live;
	room = vy_device_largest_fit(s->dev, room); /* vy_device_alloc_size rounds up */
	pthread_mutex_unlock(&s->lock);
	return room;
}

void vy_store_test_set_next_id(vy_store *s, vy_handle next)
{
	pthread_mutex_lock(&s->lock);
	if (next > s->next_id)
		s->next_id = next;
	pthread_mutex_unlock(&s->lock);
}
