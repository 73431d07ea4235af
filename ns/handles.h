/* The handle table: what the kernel's `fh` names. An id is
 * `(generation << 32) | index`, never a pointer, so a successor daemon can
 * take back the handles a dead one gave out (docs/survive.md, "Handles and
 * ids"), and any 64-bit value the kernel passes back is looked up safely:
 * an id that is not live (stale, garbage, 0, past the end) finds nothing.
 *
 * A slot holds an open file (an opaque pointer: the table does not know
 * vy_open) or an open directory ({inode, cookie limit}: the readdir state,
 * a pair of numbers, so a successor could continue at any offset).
 *
 * Locking: the caller's namespace lock (`ns`, ns/ns.h) guards every change
 * (add, free) and a directory's limit. vy_handles_file takes no lock: the
 * slots sit in segments that never move (each new segment doubles the
 * table), and a live id's slot does not change under a lookup, since the
 * kernel sends no request on a handle during or after its release; a
 * stale id finds another generation. */
#ifndef VY_HANDLES_H
#define VY_HANDLES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct vy_open;

/* Slots in the first segment; segment k > 0 holds VY_HANDLES_FIRST << (k-1). */
#define VY_HANDLES_FIRST 64u
/* Segments for every 32-bit index: 64 << 26 == 2^32. */
#define VY_HANDLES_SEGS 27

typedef enum vy_handle_kind {
	VY_HANDLE_FREE,    /* on the free list */
	VY_HANDLE_FILE,    /* an open file */
	VY_HANDLE_DIR,     /* an open directory */
	VY_HANDLE_RETIRED, /* its generation ran out: never given again */
} vy_handle_kind;

/* An open directory's state. */
typedef struct vy_handle_dir {
	uint64_t ino;
	uint64_t limit; /* readdir shows entries with a cookie below it */
} vy_handle_dir;

typedef struct vy_handle_slot {
	_Atomic uint32_t gen;  /* of the id given out now (or next); 0: none */
	_Atomic uint32_t kind; /* vy_handle_kind */
	_Atomic(struct vy_open *) file;
	vy_handle_dir dir;
	uint32_t next_free; /* the free list's next index, or UINT32_MAX */
} vy_handle_slot;

typedef struct vy_handles {
	_Atomic(vy_handle_slot *) seg[VY_HANDLES_SEGS];
	uint64_t made;      /* slots in the segments made so far */
	uint64_t used;      /* slots ever given out: [0, used) */
	uint64_t live;      /* ids live now */
	uint64_t max;       /* live ids at most (the cap) */
	uint32_t free_head; /* the last freed index, or UINT32_MAX */
} vy_handles;

/* An empty table that holds at most `max` live ids (1 .. 2^32 - 1); it
 * allocates nothing until the first add. */
void vy_handles_init(vy_handles *t, uint64_t max);
/* Free the segments (not what the files point to: see vy_handles_next). */
void vy_handles_destroy(vy_handles *t);

/* A new id for an open file / directory in *id. 0, ENFILE when `max` ids
 * are live (or every index was used), or ENOMEM; the table is unchanged
 * on error. */
int vy_handles_add_file(vy_handles *t, struct vy_open *o, uint64_t *id);
int vy_handles_add_dir(vy_handles *t, uint64_t ino, uint64_t limit, uint64_t *id);

/* A successor takes back an id a dead daemon gave out (docs/survive.md):
 * the same index and generation, for `o` (a file) or {ino, limit} (a
 * directory). Ids go back in ascending order of index; the indexes
 * skipped go on the free list. 0; EINVAL (not an id, not past the last
 * taken back, or kind neither), ENFILE at the cap, ENOMEM. */
int vy_handles_add_at(vy_handles *t, uint64_t id, vy_handle_kind kind, struct vy_open *o, uint64_t ino,
		      uint64_t limit);

/* The open file of a live file id, or NULL. No lock (above). */
struct vy_open *vy_handles_file(const vy_handles *t, uint64_t id);
/* The state of a live directory id, or NULL; it stays where it is until
 * the id is freed (ns held). */
vy_handle_dir *vy_handles_dir(vy_handles *t, uint64_t id);

/* End a live id of the given kind: its slot's generation moves on, so the
 * id is refused from now on. false: not a live id of that kind (nothing
 * changes). */
bool vy_handles_free(vy_handles *t, uint64_t id, vy_handle_kind kind);

/* Walk the live files: each call stores the next one's id and pointer and
 * returns true; *cursor starts at 0. Freeing the id just returned is
 * allowed during the walk. */
bool vy_handles_next_file(const vy_handles *t, uint64_t *cursor, uint64_t *id, struct vy_open **o);

#endif
