/* The resident store's insides, shared by store.c (handles, budget, pins,
 * exports) and store_shape.c (growth in place, holes, shrinking); nothing
 * else includes it. */
#ifndef VY_STORE_IMPL_H
#define VY_STORE_IMPL_H

#include "core/store.h"
#include "core/device_keep.h"
#include "core/pool.h"
#include "core/u64map.h"
#include "core/view.h"

#include <pthread.h>
#include <stdatomic.h>

#define FIX_FREE "delete or truncate files to free device memory, or raise resident_budget"

typedef struct store_buffer {
	vy_handle id;
	vy_dptr ptr;
	uint64_t len;
	uint64_t alloc; /* what the device holds: len, or len rounded up to share */
	uint64_t gen;
	uint32_t inflight;
	uint32_t exports; /* mappings another process may hold */
	bool untrusted;   /* exported to a client: its memory is never reused */
	bool doomed; /* freed while pinned or exported: released at the last */
	/* Bytes before the buffer's byte 0 in its first allocation (its
	 * placement, core/store.h): ptr, len and every piece are the
	 * memory's; the view a caller gets starts `lead` bytes in. */
	uint32_t lead;
	/* A buffer that grew in place or has holes is pieces in a view
	 * (core/view.h): ptr is then the view's, len its length, alloc the sum
	 * of its pieces. With no view (view.ptr 0) it is the one allocation at
	 * ptr. */
	vy_view view;
} store_buffer;

struct vy_store {
	pthread_mutex_t lock;
	vy_device *dev;
	vy_telemetry *tel;
	vy_pool pool;
	vy_u64map buffers; /* id -> store_buffer */
	vy_handle next_id;
	uint64_t next_gen;
	_Atomic uint64_t export_frees;
	uint64_t total;
	uint64_t budget;
	uint64_t resident;
	uint64_t live;
	vy_zeros zeros; /* the granule every hole maps */
	bool kept;      /* vy_store_keep was called (store_keep.c) */
	const vy_keep_sink *sink; /* its sink then: room for each new allocation */
};

/* A buffer's pieces: those of its view once it has one (the view's
 * addresses may be gone already, as in a release), else its allocation. */
static inline uint32_t chunks_of(const store_buffer *b)
{
	return b->view.piece ? b->view.n : 1;
}

static inline vy_piece chunk_at(const store_buffer *b, uint32_t i)
{
	return b->view.piece ? b->view.piece[i] : (vy_piece){.off = 0, .p = b->ptr, .bytes = b->alloc};
}

/* store.c's helpers that store_shape.c uses too (store.c says what each does). */
void vy_store_publish(vy_store *s);
vy_err vy_store_release(vy_store *s, store_buffer *b, vy_error *e);
vy_err vy_store_give_back(vy_store *s, bool untrusted, vy_dptr p, uint64_t bytes, vy_error *e);
bool vy_store_is_growable(vy_store *s, const store_buffer *b);
store_buffer *vy_store_live(vy_store *s, vy_handle h);
vy_err vy_store_take_memory(vy_store *s, uint64_t alloc, vy_dptr *ptr, vy_error *e);
vy_err vy_store_unknown(vy_error *e, vy_handle h);
vy_buffer_view vy_store_view_of(const store_buffer *b);
void vy_store_zeros_idle(vy_store *s);
vy_err vy_store_zeros_ready(vy_store *s, vy_error *e);
/* store_shape.c's: a view with room for `len` bytes (made from the one
 * allocation the buffer was, or moved to a range twice `len`). */
vy_err vy_store_view_room(vy_store *s, store_buffer *b, uint64_t len, vy_error *e);

#endif
