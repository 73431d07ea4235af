/* The state region's bytes, as a successor daemon finds them: the region
 * header, a log record's header and a checkpoint image's header and
 * sections. Little-endian, offsets and logical positions, never pointers;
 * each struct's size and field offsets are fixed by _Static_assert, and a
 * format bump (VY_STATE_FORMAT) is the only way to change any of them.
 * Everything read from here is untrusted input to the reader (state/README.md). */
#ifndef VY_STATE_LAYOUT_H
#define VY_STATE_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* The bytes are the CPU's own: vyrefs runs on little-endian hosts only. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the state region is little-endian");

#define VY_STATE_MAGIC "VYRSTATE"       /* 8 bytes, no NUL */
#define VY_STATE_FORMAT 9u              /* what this binary writes (2: names carry their cookie, handles and lookups kept; 3: requests grouped with their answers; 4: open control files; 5: client connections that map files; 6: loaded modules; 7: write-behind slots; 8: a layout's lead, files placed for their format; 9: a backing mount's files, what DIR holds of them) */
#define VY_STATE_FORMAT_MIN 3u          /* the oldest it reads (1 and 2 were never released) */
#define VY_STATE_HEADER_BYTES 4096u     /* the header of format 1 */
#define VY_STATE_VERSION_MAX 64u        /* the binary's version string, NUL included */
#define VY_STATE_INIT_MAX 512u          /* a recorded INIT request or reply */
#define VY_STATE_STATS 256u             /* the daemon's counters, by index */

/* The published root, one 8-byte store: bit 0 an image is published, bit 1
 * which (0 A, 1 B), bits 2..63 the seq of the last log record it holds. */
#define VY_STATE_ROOT_SET 1ull
#define VY_STATE_ROOT_B 2ull
#define VY_STATE_ROOT_SEQ_MAX (UINT64_MAX >> 2)

typedef struct vy_state_hdr {
	char magic[8];                    /*    0 */
	uint32_t format;                  /*    8 */
	uint32_t header_bytes;            /*   12 */
	uint64_t region_bytes;            /*   16 the memfd's size */
	uint64_t log_offset;              /*   24 the ring, from the region's start */
	uint64_t log_bytes;               /*   32 its capacity: a power of two */
	char version[VY_STATE_VERSION_MAX]; /* 40 the writer's VY_VERSION */
	/* The INIT request and reply lengths (request | reply << 32), stored
	 * after their bytes: 0 until both are there. */
	uint64_t init_lens;               /*  104 */
	uint8_t init_req[VY_STATE_INIT_MAX];   /*  112 */
	uint8_t init_reply[VY_STATE_INIT_MAX]; /*  624 */
	uint64_t root;                    /* 1136 VY_STATE_ROOT_* */
	uint64_t log_head;                /* 1144 logical byte positions: offset = pos & (log_bytes - 1) */
	uint64_t log_tail;                /* 1152 the commit: records below it are there */
	uint64_t takeovers;               /* 1160 */
	uint64_t takeover_ms;             /* 1168 the last one's */
	/* The .vyre/stats counters' memfd (daemon/kept_counters.h): its
	 * keeper memory slot (0: none) and the key its header must hold. A
	 * binary that predates them reads them as reserved and leaves them. */
	uint64_t counters_slot;           /* 1176 */
	uint64_t counters_key;            /* 1184 */
	uint64_t broken;                  /* 1192 format 8: not 0 once a change could not be kept (a successor refuses) */
	uint64_t reserved[2];             /* 1200 zero: room for format 1's own growth */
	uint64_t stats[VY_STATE_STATS];   /* 1216 */
} vy_state_hdr;
_Static_assert(offsetof(vy_state_hdr, version) == 40, "state header layout");
_Static_assert(offsetof(vy_state_hdr, init_req) == 112, "state header layout");
_Static_assert(offsetof(vy_state_hdr, root) == 1136, "state header layout");
_Static_assert(offsetof(vy_state_hdr, log_tail) == 1152, "state header layout");
_Static_assert(offsetof(vy_state_hdr, counters_slot) == 1176, "state header layout");
_Static_assert(offsetof(vy_state_hdr, stats) == 1216, "state header layout");
_Static_assert(sizeof(vy_state_hdr) == 3264, "state header layout");
_Static_assert(sizeof(vy_state_hdr) <= VY_STATE_HEADER_BYTES, "the header fits its page");

/* A log record: this header, the payload, the reply; the next record starts
 * at the next multiple of 8. The checksum (XXH3-64, state/README.md says
 * why) covers bytes [8, len): written last before the tail store, so a
 * record whose bytes are not all there fails it. A record fits before the
 * ring's end or is not there: a PAD record fills the rest of the lap (its
 * checksum covers its header only), and a rest shorter than a header is
 * skipped without one. */
typedef struct vy_state_rec_hdr {
	uint64_t sum;       /*  0 */
	uint32_t len;       /*  8 header + payload + reply */
	uint16_t type;      /* 12 the caller's, or VY_STATE_REC_PAD */
	uint16_t flags;     /* 14 the caller's */
	uint64_t seq;       /* 16 1, 2, 3, ...: the expected next one, or not there */
	uint64_t unique;    /* 24 the FUSE request's unique (0: none) */
	uint32_t reply_len; /* 32 */
	uint32_t zero;      /* 36 */
} vy_state_rec_hdr;
_Static_assert(sizeof(vy_state_rec_hdr) == 40, "log record layout");
_Static_assert(offsetof(vy_state_rec_hdr, len) == 8, "log record layout");

#define VY_STATE_REC_PAD 0xffffu /* the caller's types are below it */
#define VY_STATE_LOG_MIN 4096u   /* the smallest ring */

/* A checkpoint image (a memfd of its own): this header, then sections
 * {type u32, 0 u32, len u64, bytes, zeros to a multiple of 8}. The checksum
 * is XXH3-64 of the header's bytes [0, 40) seeded with XXH3-64 of every
 * byte after the header (one pass while writing). */
#define VY_STATE_IMAGE_MAGIC "VYRIMAGE"
typedef struct vy_state_image_hdr {
	char magic[8];      /*  0 */
	uint32_t format;    /*  8 */
	uint32_t header_bytes; /* 12 */
	uint64_t seq;       /* 16 the last log record it holds (0: none) */
	uint64_t bytes;     /* 24 the whole image, header included */
	uint32_t sections;  /* 32 */
	uint32_t zero;      /* 36 */
	uint64_t sum;       /* 40 */
} vy_state_image_hdr;
_Static_assert(sizeof(vy_state_image_hdr) == 48, "image layout");

typedef struct vy_state_section_hdr {
	uint32_t type;
	uint32_t zero;
	uint64_t len;
} vy_state_section_hdr;
_Static_assert(sizeof(vy_state_section_hdr) == 16, "image section layout");

#endif
