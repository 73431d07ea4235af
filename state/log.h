/* The redo log: a ring of checksummed records in the state region.
 *
 * Appending is the caller's to order: call vy_state_append under the lock
 * that orders the change it records (the namespace lock, fs->ns), and
 * commit it before the change is visible (the reply sent, the lock let go).
 * The tail store at the end of an append is the commit: a record below the
 * tail is there; one half-written past it, by a daemon killed at any
 * instruction, is not, and the next append overwrites it.
 *
 * The hot path never blocks and never allocates: a full ring is
 * VY_ENOSPC at once, and vy_state_log_wants_checkpoint says so ahead of
 * time (half full), so the caller checkpoints (state/image.h) first. */
#ifndef VY_STATE_LOG_H
#define VY_STATE_LOG_H

#include "state/region.h"

typedef struct vy_state_rec {
	uint16_t type;      /* the caller's: below VY_STATE_REC_PAD */
	uint16_t flags;
	uint64_t seq;       /* set by append and by the scan */
	uint64_t unique;    /* the FUSE request's unique, 0 if none */
	const void *payload; /* the change */
	uint32_t payload_len;
	const void *reply;  /* the reply it sends, to send again for a resent request */
	uint32_t reply_len;
} vy_state_rec;

/* Append one record (r->seq is ignored) and commit it; its seq in *seq.
 * VY_EINVAL: a record over half the ring, or of type VY_STATE_REC_PAD.
 * VY_ENOSPC: no room until a checkpoint; nothing written. */
vy_err vy_state_append(vy_state *s, const vy_state_rec *r, uint64_t *seq, vy_error *e);

/* The most bytes of payload and reply one record may hold (half the
 * ring, less its header). */
uint64_t vy_state_record_max(const vy_state *s);

/* The ring is half full or more: checkpoint before it fills. */
bool vy_state_log_wants_checkpoint(const vy_state *s);
/* Bytes committed and not yet dropped, and the last committed seq (0: none). */
uint64_t vy_state_log_used(const vy_state *s);
uint64_t vy_state_log_last_seq(const vy_state *s);

/* Called with each record in seq order; an error stops the scan and is
 * returned. Pointers point into the region. */
typedef vy_err (*vy_state_rec_fn)(void *ctx, const vy_state_rec *r, vy_error *e);

typedef struct vy_state_scan {
	uint64_t records;   /* valid records from the head (delivered or not) */
	uint64_t delivered; /* those with seq > after: handed to fn */
	uint64_t last_seq;  /* of the last valid record (or the seq before the first expected) */
	uint64_t end;       /* the logical position after it: where the next append goes */
	bool stopped;       /* a torn or bad record below the tail stopped the scan */
	char why[200];      /* then: what and where */
} vy_state_scan;

/* Walk the committed records from the header's head to its tail, as a
 * successor does: each must be whole, in the ring, with its checksum and
 * the expected seq (the first: at most `root_seq` + 1, where root_seq is
 * the published image's, 0 without one). Records with seq <= `after` are
 * checked, not delivered. The first that is not valid stops the walk:
 * it and everything after it are not there (out->stopped). fn may be NULL. */
vy_err vy_state_log_scan(const vy_state *s, uint64_t root_seq, uint64_t after, vy_state_rec_fn fn, void *ctx,
			 vy_state_scan *out, vy_error *e);

/* After a checkpoint holding every committed record: drop them all (the
 * head moves to the tail, one store). */
void vy_state_log_trim(vy_state *s);

#endif
