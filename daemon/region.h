/* The state region of a mount with survive=on, as far as session 2 of
 * docs/survive.md goes: a small memfd (keeper slot 1) holding the kernel's
 * INIT request and the INIT reply as sent, so a successor can replay the
 * one and check the other. state/ (session 3) replaces it with the
 * versioned header, log and images. */
#ifndef VY_REGION_H
#define VY_REGION_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define VY_REGION_MAGIC "VYRINIT1"
#define VY_REGION_INIT_MAX 512 /* fuse_init_in and _out are 104 and 64 bytes in 7.45 */
#define VY_REGION_BYTES 4096

typedef struct vy_region {
	char magic[8];
	uint32_t bytes;
	uint32_t pad;
	/* Each length is stored after its bytes (release): 0 until then. */
	_Atomic uint32_t init_in_len, init_out_len;
	uint8_t init_in[VY_REGION_INIT_MAX];
	uint8_t init_out[VY_REGION_INIT_MAX];
} vy_region;

_Static_assert(sizeof(vy_region) <= VY_REGION_BYTES, "the region fits its memfd");

/* A new region in a memfd: *fd (CLOEXEC) and its mapping, or NULL with
 * `why` filled. */
vy_region *vy_region_create(int *fd, char *why, size_t cap);
/* Map a region a keeper handed back; NULL with `why` when it is not one
 * (another size or magic) or holds no INIT yet. */
vy_region *vy_region_map(int fd, char *why, size_t cap);

#endif
