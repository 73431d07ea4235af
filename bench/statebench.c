/* bench/statebench: what logging one namespace change costs the daemon
 * (state/log.h's append: checksum, copy into the ring, the tail store),
 * against the same bytes memcpy'd into a ring of the same size without a
 * checksum or a publishing store, in the same run; and the checksums on
 * their own over the same records (XXH3, which the log uses, and crc32c
 * by the SSE4.2 instruction where the CPU has it): the measurement
 * state/README.md chose XXH3 by.
 *   statebench [RECORDS]   prints state.* figures (ns per record) and
 *                          state.append_ratio (append / memcpy)
 * Payloads cycle through 64..200 bytes (a create, a rename with two
 * names), each with a 16-byte reply (a fuse_out_header). */
#include "bench/timing.h"
#include "state/state.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

enum { LOG = 64 << 20, ROUNDS = 7, REPLY = 16, SIZES = 16 };

static uint8_t payload[256], reply[REPLY];

static uint32_t size_of(uint64_t i)
{
	return 64 + (uint32_t)((i * 9) % SIZES) * 9; /* 64..199 */
}

static void die(const vy_error *e)
{
	fprintf(stderr, "statebench: %s\n", e->msg);
	exit(1);
}

/* ns per record of appending n records into an emptied log. */
static double append_round(vy_state *s, uint64_t n)
{
	vy_error e;
	vy_state_image_writer w;
	if (vy_state_image_begin(s, &w, &e) || vy_state_image_publish(&w, &e))
		die(&e); /* an empty checkpoint: the log starts empty */
	vy_state_rec r = {.type = 1, .reply = reply, .reply_len = REPLY, .payload = payload};
	double t0 = now_us();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t seq;
		r.payload_len = size_of(i);
		r.unique = i;
		if (vy_state_append(s, &r, &seq, &e))
			die(&e);
	}
	return (now_us() - t0) * 1e3 / (double)n;
}

/* The baseline: the same bytes at the same places, memcpy only. */
static double memcpy_round(uint8_t *ring, uint64_t n)
{
	vy_state_rec_hdr h = {.type = 1};
	uint64_t pos = 0;
	double t0 = now_us();
	for (uint64_t i = 0; i < n; i++) {
		uint32_t len = (uint32_t)sizeof(h) + size_of(i) + REPLY;
		uint64_t stride = (len + 7) & ~7u, off = pos & (LOG - 1);
		if (LOG - off < stride)
			pos += LOG - off, off = 0;
		h.len = len;
		h.seq = i + 1;
		memcpy(ring + off, &h, sizeof(h));
		memcpy(ring + off + sizeof(h), payload, size_of(i));
		memcpy(ring + off + sizeof(h) + size_of(i), reply, REPLY);
		pos += stride;
	}
	double ns = (now_us() - t0) * 1e3 / (double)n;
	__asm__ volatile("" : : "r"(ring) : "memory"); /* the stores are kept */
	return ns;
}

typedef uint64_t (*sum_fn)(const void *p, size_t n);
static uint64_t xxh3(const void *p, size_t n) { return XXH3_64bits(p, n); }

/* The comparison only: crc32c, 8 bytes an instruction. */
#if defined(__x86_64__)
static bool crc_hw_present(void)
{
	return __builtin_cpu_supports("sse4.2");
}

__attribute__((target("sse4.2"))) static uint64_t crc_hw(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t c = ~0u;
	for (; n >= 8; n -= 8, b += 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		c = _mm_crc32_u64(c, w);
	}
	uint32_t c32 = (uint32_t)c;
	while (n--)
		c32 = _mm_crc32_u8(c32, *b++);
	return ~c32;
}
#else
static bool crc_hw_present(void)
{
	return false;
}

static uint64_t crc_hw(const void *p, size_t n)
{
	(void)p;
	return n;
}
#endif

/* ns per record of a checksum over a record's bytes (header, payload, reply). */
static double sum_round(sum_fn f, uint64_t n)
{
	static uint8_t rec[40 + 256 + REPLY];
	uint64_t acc = 0;
	double t0 = now_us();
	for (uint64_t i = 0; i < n; i++) {
		rec[0] = (uint8_t)i;
		acc += f(rec, 40 + size_of(i) + REPLY);
	}
	double ns = (now_us() - t0) * 1e3 / (double)n;
	__asm__ volatile("" : : "r"(acc));
	return ns;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 120000;
	if (n < 1000 || n > 130000) { /* 130,000 records of <= 256 bytes fit half the log */
		fprintf(stderr, "statebench: RECORDS from 1000 to 130000 (Fix: a count in that range)\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 31 + 7);
	vy_state *s;
	vy_error e;
	if (vy_state_create(LOG, &s, &e))
		die(&e);
	uint8_t *ring = malloc(LOG);
	if (!ring) {
		fprintf(stderr, "statebench: out of memory\n");
		return 1;
	}
	memset(ring, 0, LOG);
	double a[ROUNDS], m[ROUNDS], hw[ROUNDS], xx[ROUNDS];
	/* Warm: a whole lap of the ring, so no round pays a page's first
	 * touch (the baseline's ring was memset). */
	while (s->tail < LOG)
		append_round(s, n);
	memcpy_round(ring, n);
	for (int r = 0; r < ROUNDS; r++) { /* interleaved: drift hits both */
		a[r] = append_round(s, n);
		m[r] = memcpy_round(ring, n);
		hw[r] = crc_hw_present() ? sum_round(crc_hw, n) : 0;
		xx[r] = sum_round(xxh3, n);
	}
	double am = median(a, ROUNDS), mm = median(m, ROUNDS);
	printf("state.append_ns %.1f\nstate.memcpy_ns %.1f\nstate.append_ratio %.2f\n", am, mm, am / mm);
	printf("state.xxh3_ns %.1f\n", median(xx, ROUNDS));
	if (crc_hw_present())
		printf("state.crc32c_hw_ns %.1f\n", median(hw, ROUNDS));
	free(ring);
	vy_state_close(s);
	return 0;
}
