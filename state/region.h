/* The state region in memory: a memfd mapped MAP_SHARED, its header, the
 * recorded INIT, the counters and the published root; and the two stores
 * every writer of the region goes through (so a test can stop a writer at
 * any byte: vy_state_cut). No FUSE, no device. Made and adopted through
 * state/state.h; the log (state/log.h) and images (state/image.h) build on it. */
#ifndef VY_STATE_REGION_H
#define VY_STATE_REGION_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/err.h"
#include "state/layout.h"

/* Tests only: stop a writer after `left` more store units (a byte of a
 * record or an image, or one 8-byte publishing store): at the next unit
 * `fire` is called, and it must not return (a forked child _exits). */
typedef struct vy_state_cut {
	uint64_t left;
	void (*fire)(void *ctx);
	void *ctx;
} vy_state_cut;

/* The region's three memfds: a keeper holds them (docs/survive.md). */
typedef struct vy_state_fds {
	int region, image[2]; /* image[0] is A, image[1] B */
} vy_state_fds;

typedef struct vy_state {
	vy_state_fds fds;    /* owned: vy_state_close closes them */
	uint8_t *base;       /* the region, mapped shared */
	uint64_t bytes;
	vy_state_hdr *hdr;
	uint8_t *ring;       /* the log */
	uint64_t cap, mask;  /* its bytes, a power of two, and cap - 1 */
	/* The appender's view, kept under the caller's lock: what is in the
	 * header, plus the next record's seq. */
	uint64_t head, tail, next_seq;
	vy_state_cut *cut;   /* NULL but in tests */
} vy_state;

/* The published root, decoded. */
typedef struct vy_state_root {
	bool set;
	unsigned which; /* 0 A, 1 B */
	uint64_t seq;
} vy_state_root;

/* Make a region memfd with a log of `log_bytes` (a power of two, at least
 * VY_STATE_LOG_MIN) and two empty image memfds; map it. Sealed against
 * shrinking and growing, so a mapping of it can never fault. */
vy_err vy_state_region_create(uint64_t log_bytes, vy_state *s, vy_error *e);

/* Map a region a predecessor made, checking everything in its header
 * first: magic, format in [VY_STATE_FORMAT_MIN, VY_STATE_FORMAT] (another
 * format: refused with the message state/README.md gives, the region not
 * written to), sizes, seals, log bounds. Takes nothing: on failure the fds
 * stay the caller's; on success `s` owns them. */
vy_err vy_state_region_open(const vy_state_fds *fds, vy_state *s, vy_error *e);

/* A successor writes the region it opened from now on: its header names
 * this binary's format (every format it reads is a part of it) and
 * version, so an older binary refuses it rather than meet records it does
 * not know. */
void vy_state_region_claim(vy_state *s);

/* Unmap and close the fds (any of them may be -1). */
void vy_state_region_close(vy_state *s);

/* The kernel's INIT request and the reply as it was sent, for a successor
 * to replay (bench/probes/takeover). Each at most VY_STATE_INIT_MAX bytes;
 * stored once, at mount, before the first request is served. */
vy_err vy_state_set_init(vy_state *s, const void *req, uint32_t req_len, const void *reply,
			 uint32_t reply_len, vy_error *e);
/* Points into the region; false (and nothing set) when none was stored. */
bool vy_state_get_init(const vy_state *s, const uint8_t **req, uint32_t *req_len, const uint8_t **reply,
		       uint32_t *reply_len);

/* The writer's version string, printable and NUL-terminated (a copy). */
void vy_state_writer_version(const vy_state *s, char out[VY_STATE_VERSION_MAX]);

/* Counters in the region: a successor's .vyre/stats go on from them. */
void vy_state_note_takeover(vy_state *s, uint64_t ms);
uint64_t vy_state_takeovers(const vy_state *s, uint64_t *last_ms);
/* Where the .vyre/stats counters are kept (a keeper memory slot, 0: none)
 * and the key that proves a memfd there is them: stored together, read
 * together (8-byte stores, the slot cleared first and set last; a reader checks both). */
void vy_state_set_counters(vy_state *s, uint64_t slot, uint64_t key);
/* The kept state is no longer exact (a change could not be kept): said
 * at once, so the next death ends the mount rather than serve a stale
 * namespace (issue "survive 2"). A successor reads it before anything. */
void vy_state_mark_broken(vy_state *s);
bool vy_state_broken(const vy_state *s);
uint64_t vy_state_counters(const vy_state *s, uint64_t *key);
/* The daemon's counters by index (< VY_STATE_STATS): relaxed atomics. An
 * index out of range is a caller's bug: ignored, reads as 0. */
void vy_state_stat_add(vy_state *s, unsigned idx, uint64_t v);
void vy_state_stat_set(vy_state *s, unsigned idx, uint64_t v);
uint64_t vy_state_stat_get(const vy_state *s, unsigned idx);

vy_state_root vy_state_root_get(const vy_state *s);
/* The commit of a checkpoint: one 8-byte release store. */
void vy_state_root_store(vy_state *s, vy_state_root r);

/* The writes of the region and images. */
void vy_state_put_cut(vy_state *s, void *dst, const void *src, size_t n);
void vy_state_cut_step(vy_state *s);

static inline void vy_state_put(vy_state *s, void *dst, const void *src, size_t n)
{
	if (__builtin_expect(s->cut != NULL, 0))
		vy_state_put_cut(s, dst, src, n);
	else
		memcpy(dst, src, n);
}

/* A publishing store: release, so every byte put before it is there first
 * for whoever sees the new value, after any instruction's crash. */
static inline void vy_state_store(vy_state *s, uint64_t *p, uint64_t v)
{
	if (__builtin_expect(s->cut != NULL, 0))
		vy_state_cut_step(s);
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline uint64_t vy_state_load_u64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* pwrite all of [src, src+n) to fd at off (the images), through the cut. */
vy_err vy_state_pwrite(vy_state *s, int fd, const void *src, size_t n, uint64_t off, vy_error *e);

#endif
