/* bench/statebench: what logging one namespace change costs the daemon
 * (state/log.h's append: checksum, copy into the ring, the tail store),
 * against the same bytes memcpy'd into a ring of the same size without a
 * checksum or a publishing store, in the same run; and the checksums on
 * their own over the same records (crc32c by instruction and by table,
 * XXH3), the measurement state/README.md chose crc32c by.
 *   statebench [RECORDS]   prints state.* figures (ns per record) and
 *                          state.append_ratio (append / memcpy)
 * Payloads cycle through 64..200 bytes (a create, a rename with two
 * names), each with a 16-byte reply (a fuse_out_header). */
#include "bench/timing.h"
#include "state/crc32c.h"
#include "state/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

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
static uint64_t crc_hw(const void *p, size_t n) { return vy_crc32c_hw(0, p, n); }
static uint64_t crc_table(const void *p, size_t n) { return vy_crc32c_table(0, p, n); }
static uint64_t xxh3(const void *p, size_t n) { return XXH3_64bits(p, n); }

/* ns per record of a checksum over a record's bytes (header, payload, reply). */
static double sum_round(sum_fn f, uint64_t n)
{
	static uint8_t rec[32 + 256 + REPLY];
	uint64_t acc = 0;
	double t0 = now_us();
	for (uint64_t i = 0; i < n; i++) {
		rec[0] = (uint8_t)i;
		acc += f(rec, 32 + size_of(i) + REPLY);
	}
	double ns = (now_us() - t0) * 1e3 / (double)n;
	__asm__ volatile("" : : "r"(acc));
	return ns;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 150000;
	if (n < 1000 || n > 170000) { /* 170,000 records of <= 248 bytes fit half the log */
		fprintf(stderr, "statebench: RECORDS from 1000 to 170000 (Fix: a count in that range)\n");
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
	double a[ROUNDS], m[ROUNDS], hw[ROUNDS], tb[ROUNDS], xx[ROUNDS];
	append_round(s, n); /* warm: every page of the ring touched once */
	memcpy_round(ring, n);
	for (int r = 0; r < ROUNDS; r++) { /* interleaved: drift hits both */
		a[r] = append_round(s, n);
		m[r] = memcpy_round(ring, n);
		hw[r] = vy_crc32c_hw_present() ? sum_round(crc_hw, n) : 0;
		tb[r] = sum_round(crc_table, n);
		xx[r] = sum_round(xxh3, n);
	}
	double am = median(a, ROUNDS), mm = median(m, ROUNDS);
	printf("state.append_ns %.1f\nstate.memcpy_ns %.1f\nstate.append_ratio %.2f\n", am, mm, am / mm);
	if (vy_crc32c_hw_present())
		printf("state.crc32c_hw_ns %.1f\n", median(hw, ROUNDS));
	printf("state.crc32c_table_ns %.1f\nstate.xxh3_ns %.1f\n", median(tb, ROUNDS), median(xx, ROUNDS));
	free(ring);
	vy_state_close(s);
	return 0;
}
