/* The redo log and the checkpoint images: exact records back from a scan,
 * a torn tail not there and overwritten, a bad record in the middle
 * stopping the scan, wraparound (with and without a PAD record), a full
 * ring (ENOSPC, nothing written), checkpoints published and reloaded with
 * the log after them, and corrupted images refused whole. */
#include <xxhash.h>
#include "tests/unit/state_support.h"

/* Adopt copies of s's fds (s stays open, as a dead daemon's mapping would)
 * and load them into a fresh model. */
static vy_err reload(const vy_state *s, state_model *m, vy_state_loaded *l, vy_state **out, vy_error *e)
{
	vy_state_fds f = state_dup_fds(s);
	vy_state *t;
	vy_err rc = vy_state_adopt(&f, &t, NULL, e);
	if (rc) {
		state_close_fds(&f);
		return rc;
	}
	*m = (state_model){0};
	rc = vy_state_load(t, model_section, model_record, m, l, e);
	if (rc || !out)
		vy_state_close(t);
	else
		*out = t;
	return rc;
}

typedef struct seen {
	vy_state_rec r[16];
	char bytes[16][64];
	size_t n;
} seen;

static vy_err keep(void *ctx, const vy_state_rec *r, vy_error *e)
{
	(void)e;
	seen *s = ctx;
	if (s->n < 16) {
		s->r[s->n] = *r;
		memcpy(s->bytes[s->n], r->payload, r->payload_len < 64 ? r->payload_len : 64);
		s->n++;
	}
	return VY_OK;
}

static void append_then_scan_exact(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	static const char *const payloads[] = {"create /a 0644", "", "rename /a /b", "x"};
	static const char *const replies[] = {"entry 2", "ok", "", "0123456789abcdef"};
	uint64_t used = 0;
	for (unsigned i = 0; i < 4; i++) {
		vy_state_rec r = {.type = (uint16_t)(10 + i), .flags = (uint16_t)(0x100 | i), .unique = 1000 + i,
				  .payload = payloads[i], .payload_len = (uint32_t)strlen(payloads[i]),
				  .reply = replies[i], .reply_len = (uint32_t)strlen(replies[i])};
		uint64_t seq;
		MUST(vy_state_append(s, &r, &seq, E));
		CHECK_EQ(seq, i + 1);
		used += (40 + strlen(payloads[i]) + strlen(replies[i]) + 7) / 8 * 8;
	}
	CHECK_EQ(vy_state_log_used(s), used);
	CHECK_EQ(used, 64 + 48 + 56 + 64);
	CHECK_EQ(s->hdr->log_tail, used);
	CHECK_EQ(vy_state_log_last_seq(s), 4);
	seen got = {0};
	vy_state_scan sc;
	MUST(vy_state_log_scan(s, 0, 0, keep, &got, &sc, E));
	CHECK_EQ(got.n, 4);
	CHECK_EQ(sc.records, 4);
	CHECK_EQ(sc.delivered, 4);
	CHECK_EQ(sc.last_seq, 4);
	CHECK_EQ(sc.end, used);
	CHECK(!sc.stopped);
	for (unsigned i = 0; i < got.n; i++) {
		const vy_state_rec *r = &got.r[i];
		CHECK_EQ(r->seq, i + 1);
		CHECK_EQ(r->type, 10 + i);
		CHECK_EQ(r->flags, 0x100 | i);
		CHECK_EQ(r->unique, 1000 + i);
		CHECK_EQ(r->payload_len, strlen(payloads[i]));
		CHECK(!memcmp(got.bytes[i], payloads[i], r->payload_len));
		CHECK_EQ(r->reply_len, strlen(replies[i]));
		CHECK(!memcmp(r->reply, replies[i], r->reply_len));
	}
	/* after = 2: records 1 and 2 checked, not handed over. */
	got = (seen){0};
	MUST(vy_state_log_scan(s, 0, 2, keep, &got, &sc, E));
	CHECK_EQ(got.n, 2);
	CHECK_EQ(got.r[0].seq, 3);
	CHECK_EQ(sc.records, 4);
	vy_state_close(s);
}

/* A record half written past the tail (its length there, its payload
 * partly, no valid checksum): not there; the next append takes its place. */
static void torn_tail_not_there(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	CHECK_EQ(state_append_str(s, 1, 1, "one"), 1);
	CHECK_EQ(state_append_str(s, 1, 2, "two"), 2);
	uint64_t tail = s->tail;
	vy_state_rec_hdr h = {.len = 40 + 40, .type = 1, .seq = 3, .unique = 3};
	memcpy(s->ring + tail + 8, (const uint8_t *)&h + 8, 8); /* len, type, flags */
	memset(s->ring + tail + 40, 'Z', 20); /* half the payload */
	for (int committed = 0; committed < 2; committed++) {
		if (committed) /* even under a tail moved over it: its checksum */
			s->hdr->log_tail = tail + 80;
		state_model m;
		vy_state_loaded l;
		MUST(reload(s, &m, &l, NULL, E));
		CHECK(!strcmp(m.text, "one,two,"));
		CHECK_EQ(l.log.records, 2);
		CHECK_EQ(l.log.stopped, committed);
		CHECK_EQ(l.log.end, tail);
	}
	/* The successor appends over it. */
	vy_state *t;
	state_model m;
	vy_state_loaded l;
	MUST(reload(s, &m, &l, &t, E));
	CHECK_EQ(t->tail, tail);
	CHECK_EQ(state_append_str(t, 1, 3, "three"), 3);
	MUST(reload(t, &m, &l, NULL, E));
	CHECK(!strcmp(m.text, "one,two,three,"));
	CHECK(!m.bad_order);
	CHECK(!l.log.stopped);
	vy_state_close(t);
	vy_state_close(s);
}

/* A bad checksum in the middle: the scan stops there; what follows is not
 * there, and the next append goes where the bad record was. */
static void bad_checksum_in_the_middle_stops(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	uint64_t at3 = 0;
	for (int i = 1; i <= 5; i++) {
		char p[16];
		snprintf(p, sizeof(p), "p%d", i);
		if (i == 3)
			at3 = s->tail;
		CHECK_EQ(state_append_str(s, 1, (uint64_t)i, p), (uint64_t)i);
	}
	s->ring[at3 + 41] ^= 0x40; /* a payload byte of record 3 */
	vy_state *t;
	state_model m;
	vy_state_loaded l;
	MUST(reload(s, &m, &l, &t, E));
	CHECK(!strcmp(m.text, "p1,p2,"));
	CHECK(l.log.stopped);
	CHECK(strstr(l.log.why, "seq 3") && strstr(l.log.why, "checksum"));
	CHECK_EQ(l.log.end, at3);
	CHECK_EQ(t->next_seq, 3);
	CHECK_EQ(state_append_str(t, 1, 9, "q3"), 3);
	MUST(reload(t, &m, &l, NULL, E));
	CHECK(!strcmp(m.text, "p1,p2,q3,"));
	CHECK(!l.log.stopped); /* the stale p4, p5 lie past the new tail */
	vy_state_close(t);
	vy_state_close(s);
}

/* Killed between a checkpoint's root store and its head store, then a bad
 * record among those the image holds: the image has them all, so the
 * successor restarts the log after it, and its next record is found. */
static void bad_record_below_image_restarts_log(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	state_model want = {0};
	uint64_t at3 = 0;
	for (int i = 1; i <= 5; i++) {
		char p[8];
		snprintf(p, sizeof(p), "p%d", i);
		if (i == 3)
			at3 = s->tail;
		CHECK_EQ(state_append_str(s, 1, 0, p), (uint64_t)i);
		model_add(&want, p, 2);
	}
	MUST(state_checkpoint(s, &want, E));
	s->hdr->log_head = 0; /* the head store never happened */
	s->ring[at3 + 41] ^= 1;
	vy_state *t;
	state_model m;
	vy_state_loaded l;
	MUST(reload(s, &m, &l, &t, E));
	CHECK(!strcmp(m.text, "p1,p2,p3,p4,p5,"));
	CHECK_EQ(m.records, 0);
	CHECK_EQ(t->hdr->log_head, at3);
	CHECK_EQ(t->hdr->log_tail, at3);
	CHECK_EQ(state_append_str(t, 1, 0, "p6"), 6);
	MUST(reload(t, &m, &l, NULL, E));
	CHECK(!strcmp(m.text, "p1,p2,p3,p4,p5,p6,"));
	CHECK_EQ(m.records, 1);
	CHECK(!l.log.stopped);
	vy_state_close(t);
	vy_state_close(s);
}

/* Hostile record headers under the tail, each stopping the scan with no
 * read outside the ring. */
static void hostile_records_stop(void)
{
	struct {
		size_t off;
		uint32_t v;
	} cases[] = {
		{8, 0},           /* len 0 */
		{8, 39},          /* len below a header */
		{8, 5000},        /* past the ring */
		{8, 4096},        /* past the tail */
		{32, 200},        /* reply longer than the record */
		{16, 7},          /* seq out of order */
		{12, 0xffff},     /* a PAD that does not end the lap */
		{40, 0x01010101}, /* a payload byte: the checksum */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		vy_state *s;
		MUST(vy_state_create(4096, &s, E));
		CHECK_EQ(state_append_str(s, 1, 1, "first"), 1);
		uint64_t at = s->tail;
		CHECK_EQ(state_append_str(s, 1, 2, "second"), 2);
		memcpy(s->ring + at + cases[i].off, &cases[i].v, 4);
		state_model m;
		vy_state_loaded l;
		MUST(reload(s, &m, &l, NULL, E));
		CHECK(!strcmp(m.text, "first,"));
		CHECK(l.log.stopped);
		CHECK_EQ(l.log.end, at);
		vy_state_close(s);
	}
}

/* Laps around a 4096-byte ring, checkpointing when the log asks, reloaded
 * from copies of the fds after every record. stride 56 leaves 8 bytes at
 * each lap's end (skipped, no PAD); varied strides (56..232) need PADs. */
static void wraparound(void)
{
	for (int kind = 0; kind < 2; kind++) {
		vy_state *s;
		MUST(vy_state_create(4096, &s, E));
		state_model want = {0};
		unsigned checkpoints = 0, pads = 0, skips = 0;
		for (int i = 0; i < 600; i++) {
			char p[200];
			int n = kind == 0 ? snprintf(p, sizeof(p), "%05d", i) /* 40 + 5 + 7 = 52 -> 56 */
					  : snprintf(p, sizeof(p), "%0*d", 5 + (i * i * 3 + i * 11) % 90, i);
			if (vy_state_log_wants_checkpoint(s)) {
				MUST(state_checkpoint(s, &want, E));
				checkpoints++;
				CHECK_EQ(vy_state_log_used(s), 0);
			}
			uint64_t before = s->tail;
			uint64_t stride = (40 + 2 * (uint64_t)n + 2 + 7) / 8 * 8;
			uint64_t room = 4096 - (before & 4095);
			if (room < stride)
				room < 40 ? skips++ : pads++;
			CHECK_EQ(state_append_str(s, 1, (uint64_t)i, p), (uint64_t)i + 1);
			model_add(&want, p, (size_t)n);
			state_model m;
			vy_state_loaded l;
			MUST(reload(s, &m, &l, NULL, E));
			if (strcmp(m.text, want.text) || m.bad_order || l.log.stopped) {
				fprintf(stderr, "  kind %d record %d: reload differs (%s)\n", kind, i, l.log.why);
				vy_test_failures++;
				break;
			}
		}
		CHECK(s->tail / 4096 >= 5); /* five laps or more */
		CHECK(checkpoints >= 10);
		if (kind == 0) {
			CHECK(skips >= 5);
			CHECK_EQ(pads, 0);
		} else {
			CHECK(pads >= 5);
		}
		vy_state_close(s);
	}
}

/* A full ring: ENOSPC at once, not a byte written; after a checkpoint the
 * append goes in. Too large and PAD-typed records: EINVAL. */
static void full_ring_refuses(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	char p[100];
	memset(p, 'f', sizeof(p));
	vy_state_rec r = {.type = 1, .payload = p, .payload_len = 88}; /* 128 bytes */
	uint64_t seq;
	int n = 0;
	bool warned_at_half = false;
	vy_error err;
	vy_err rc;
	while ((rc = vy_state_append(s, &r, &seq, &err)) == VY_OK) {
		n++;
		if (vy_state_log_wants_checkpoint(s) && !warned_at_half) {
			warned_at_half = true;
			CHECK_EQ(vy_state_log_used(s), 2048);
		}
	}
	CHECK_EQ(rc, VY_ENOSPC);
	CHECK(strstr(err.msg, "(Fix: write a checkpoint") != NULL);
	CHECK_EQ(n, 32);
	CHECK(warned_at_half);
	size_t n0, n1;
	uint8_t *before = state_snapshot(s->fds.region, &n0);
	MUST_FAIL(VY_ENOSPC, vy_state_append(s, &r, &seq, E));
	uint8_t *after = state_snapshot(s->fds.region, &n1);
	CHECK(n0 == n1 && !memcmp(before, after, n0));
	free(before), free(after);
	state_model m = {0};
	MUST(state_checkpoint(s, &m, E));
	MUST(vy_state_append(s, &r, &seq, E));
	CHECK_EQ(seq, 33);
	vy_state_rec big = {.type = 1, .payload = s->ring, .payload_len = 2048 - 40 + 1};
	MUST_FAIL(VY_EINVAL, vy_state_append(s, &big, &seq, E));
	vy_state_rec pad = {.type = VY_STATE_REC_PAD};
	MUST_FAIL(VY_EINVAL, vy_state_append(s, &pad, &seq, E));
	CHECK_EQ(vy_state_log_last_seq(s), 33);
	vy_state_close(s);
}

static void checkpoint_publish_and_reload(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	state_model want = {0};
	const char *names[] = {"a", "b", "c", "d", "e", "f", "g"};
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(state_append_str(s, 1, 0, names[i]), (uint64_t)i + 1);
		model_add(&want, names[i], 1);
	}
	MUST(state_checkpoint(s, &want, E));
	vy_state_root root = vy_state_root_get(s);
	CHECK(root.set);
	CHECK_EQ(root.which, 0);
	CHECK_EQ(root.seq, 3);
	CHECK_EQ(vy_state_log_used(s), 0);
	CHECK_EQ(s->hdr->log_head, s->hdr->log_tail);
	for (int i = 3; i < 5; i++) {
		CHECK_EQ(state_append_str(s, 1, 0, names[i]), (uint64_t)i + 1);
		model_add(&want, names[i], 1);
	}
	state_model m;
	vy_state_loaded l;
	MUST(reload(s, &m, &l, NULL, E));
	CHECK(!strcmp(m.text, "a,b,c,d,e,"));
	CHECK_EQ(m.sections, 1);
	CHECK_EQ(m.records, 2);
	CHECK(!m.bad_order);
	CHECK(l.root.set);
	CHECK_EQ(l.root.seq, 3);
	CHECK_EQ(l.log.records, 2);
	CHECK_EQ(l.log.delivered, 2);
	/* The next checkpoint goes to B, the one after to A again. */
	MUST(state_checkpoint(s, &want, E));
	CHECK_EQ(vy_state_root_get(s).which, 1);
	CHECK_EQ(vy_state_root_get(s).seq, 5);
	CHECK_EQ(state_append_str(s, 1, 0, "f"), 6);
	model_add(&want, "f", 1);
	MUST(reload(s, &m, &l, NULL, E));
	CHECK(!strcmp(m.text, "a,b,c,d,e,f,"));
	CHECK_EQ(m.records, 1);
	MUST(state_checkpoint(s, &want, E));
	CHECK_EQ(vy_state_root_get(s).which, 0);
	/* A checkpoint of nothing logged yet: seq 0, still published. */
	vy_state *z;
	MUST(vy_state_create(4096, &z, E));
	state_model empty = {0};
	MUST(state_checkpoint(z, &empty, E));
	CHECK(vy_state_root_get(z).set);
	CHECK_EQ(vy_state_root_get(z).seq, 0);
	CHECK_EQ(state_append_str(z, 1, 0, "a"), 1);
	MUST(reload(z, &m, &l, NULL, E));
	CHECK(!strcmp(m.text, "a,"));
	vy_state_close(z);
	vy_state_close(s);
}

/* Write image bytes back through its fd. */
static void rewrite(int fd, const uint8_t *b, size_t n)
{
	if (ftruncate(fd, 0) != 0 || pwrite(fd, b, n, 0) != (ssize_t)n) {
		perror("rewrite");
		exit(1);
	}
}

/* Any damage to the published image: refused whole, nothing handed over. */
static void corrupted_image_refused(void)
{
	for (int how = 0; how < 6; how++) {
		vy_state *s;
		MUST(vy_state_create(4096, &s, E));
		state_model want = {0};
		CHECK_EQ(state_append_str(s, 1, 0, "kept"), 1);
		model_add(&want, "kept", 4);
		MUST(state_checkpoint(s, &want, E));
		CHECK_EQ(state_append_str(s, 1, 0, "after"), 2);
		int fd = s->fds.image[0];
		size_t n;
		uint8_t *b = state_snapshot(fd, &n);
		vy_state_image_hdr h;
		memcpy(&h, b, sizeof(h));
		switch (how) {
		case 0: b[n - 3] ^= 1; break;                       /* a section's byte */
		case 1: b[17] ^= 1; break;                          /* the seq */
		case 2: n -= 8; break;                              /* cut short */
		case 3: memcpy(b, "VYRIMAGX", 8); break;            /* magic */
		case 4: {                                           /* a section's length, checksum forged */
			uint64_t len = 1ull << 40;
			memcpy(b + sizeof(h) + 8, &len, 8);
			h.sum = XXH3_64bits_withSeed(&h, 40, XXH3_64bits(b + sizeof(h), h.bytes - sizeof(h)));
			memcpy(b, &h, sizeof(h));
			break;
		}
		case 5: {                                           /* the root names another seq */
			s->hdr->root = 7ull << 2 | VY_STATE_ROOT_SET;
			break;
		}
		}
		rewrite(fd, b, n);
		free(b);
		vy_state_fds f = state_dup_fds(s);
		vy_state *t;
		MUST(vy_state_adopt(&f, &t, NULL, E));
		state_model m = {0};
		vy_state_loaded l;
		MUST_FAIL(VY_EINVAL, vy_state_load(t, model_section, model_record, &m, &l, E));
		CHECK(strstr(vy_test_last_error.msg, "state image A") != NULL);
		CHECK_EQ(m.sections, 0);
		CHECK_EQ(m.records, 0);
		vy_state_close(t);
		vy_state_close(s);
	}
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(append_then_scan_exact),  TEST_CASE(torn_tail_not_there),
		TEST_CASE(bad_checksum_in_the_middle_stops), TEST_CASE(bad_record_below_image_restarts_log),
		TEST_CASE(hostile_records_stop),
		TEST_CASE(wraparound), TEST_CASE(full_ring_refuses),
		TEST_CASE(checkpoint_publish_and_reload), TEST_CASE(corrupted_image_refused),
	};
	return vy_test_main("state_log", cases, sizeof(cases) / sizeof(*cases));
}
