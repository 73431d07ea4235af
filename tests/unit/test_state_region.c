/* The state region's header: create and adopt round trip, the format
 * refusal (bytes unchanged), every hostile header field refused with a
 * Fix, the recorded INIT and the counters, the log's memory taken at once. */
#include "tests/unit/state_support.h"

#include <fcntl.h>
#include <sys/mman.h>

static void create_adopt_round_trip(void)
{
	vy_state *s;
	MUST(vy_state_create(8192, &s, E));
	CHECK_EQ(s->cap, 8192);
	CHECK_EQ(s->bytes, VY_STATE_HEADER_BYTES + 8192);
	CHECK(!memcmp(s->hdr->magic, "VYRSTATE", 8));
	CHECK_EQ(s->hdr->format, VY_STATE_FORMAT);
	char ver[VY_STATE_VERSION_MAX];
	vy_state_writer_version(s, ver);
	CHECK(!strcmp(ver, VY_VERSION));
	uint8_t req[104], reply[80];
	vy_test_fill_pattern(req, sizeof(req), 1);
	vy_test_fill_pattern(reply, sizeof(reply), 2);
	const uint8_t *rq, *rp;
	uint32_t rql, rpl;
	CHECK(!vy_state_get_init(s, &rq, &rql, &rp, &rpl)); /* none yet */
	MUST(vy_state_set_init(s, req, sizeof(req), reply, sizeof(reply), E));
	vy_state_note_takeover(s, 3);
	uint64_t key;
	CHECK_EQ(vy_state_counters(s, &key), 0); /* none yet */
	vy_state_set_counters(s, 17, 0xfeedull);
	vy_state_stat_add(s, 5, 40);
	vy_state_stat_add(s, 5, 2);
	vy_state_stat_set(s, VY_STATE_STATS - 1, 9);
	vy_state_stat_add(s, VY_STATE_STATS, 1); /* out of range: ignored */
	CHECK_EQ(state_append_str(s, 3, 77, "mkdir a"), 1);

	vy_state_fds f = state_dup_fds(s);
	vy_state_close(s);
	vy_state *t;
	vy_state_scan found;
	MUST(vy_state_adopt(&f, &t, &found, E));
	CHECK(vy_state_get_init(t, &rq, &rql, &rp, &rpl));
	CHECK_EQ(rql, sizeof(req));
	CHECK_EQ(rpl, sizeof(reply));
	CHECK(!memcmp(rq, req, sizeof(req)));
	CHECK(!memcmp(rp, reply, sizeof(reply)));
	uint64_t ms;
	CHECK_EQ(vy_state_takeovers(t, &ms), 1);
	CHECK_EQ(ms, 3);
	CHECK_EQ(vy_state_counters(t, &key), 17);
	CHECK_EQ(key, 0xfeedull);
	CHECK_EQ(vy_state_stat_get(t, 5), 42);
	CHECK_EQ(vy_state_stat_get(t, VY_STATE_STATS - 1), 9);
	CHECK_EQ(vy_state_stat_get(t, VY_STATE_STATS), 0);
	CHECK_EQ(found.records, 1);
	CHECK(!found.stopped);
	CHECK_EQ(t->next_seq, 2);
	CHECK_EQ(t->tail, 56); /* a 40-byte header, 7 bytes of payload, 9 of reply */
	CHECK_EQ(state_append_str(t, 3, 78, "mkdir b"), 2);
	vy_state_close(t);
}

static void bad_sizes_refused(void)
{
	vy_state *s;
	MUST_FAIL(VY_EINVAL, vy_state_create(4095, &s, E));
	MUST_FAIL(VY_EINVAL, vy_state_create(6000, &s, E));
	MUST_FAIL(VY_EINVAL, vy_state_create(0, &s, E));
	MUST(vy_state_create(4096, &s, E));
	uint8_t big[VY_STATE_INIT_MAX + 1] = {0};
	MUST_FAIL(VY_EINVAL, vy_state_set_init(s, big, sizeof(big), big, 10, E));
	MUST_FAIL(VY_EINVAL, vy_state_set_init(s, big, 0, big, 10, E));
	vy_state_close(s);
}

/* Write a u32/u64 of the header through the fd, as a predecessor would. */
static void poke(int fd, size_t off, const void *v, size_t n)
{
	if (pwrite(fd, v, n, (off_t)off) != (ssize_t)n) {
		perror("pwrite");
		exit(1);
	}
}

/* Another format, older or newer: refused with the exact message, and
 * not a byte of the region or its images written. */
static void other_format_refused_untouched(void)
{
	static const uint32_t formats[] = {0, VY_STATE_FORMAT_MIN - 1, VY_STATE_FORMAT + 1, 0xffffffffu};
	for (size_t i = 0; i < sizeof(formats) / sizeof(*formats); i++) {
		vy_state *s;
		MUST(vy_state_create(4096, &s, E));
		CHECK_EQ(state_append_str(s, 1, 1, "x"), 1);
		state_model m = {0};
		model_add(&m, "x", 1);
		MUST(state_checkpoint(s, &m, E));
		vy_state_fds f = state_dup_fds(s);
		vy_state_close(s);
		poke(f.region, offsetof(vy_state_hdr, format), &formats[i], 4);
		poke(f.region, offsetof(vy_state_hdr, version), "9.9.9-next\0", 11);
		size_t n0, n1, a0, a1;
		uint8_t *before = state_snapshot(f.region, &n0), *img0 = state_snapshot(f.image[0], &a0);
		vy_state *t = NULL;
		MUST_FAIL(VY_ENOTSUP, vy_state_adopt(&f, &t, NULL, E));
		char want[300];
		snprintf(want, sizeof(want),
			 "state format %u from vyrefs 9.9.9-next; this binary reads %u..%u (Fix: the old binary serves on; "
			 "install a matching vyrefs to upgrade)",
			 formats[i], VY_STATE_FORMAT_MIN, VY_STATE_FORMAT);
		if (strcmp(vy_test_last_error.msg, want)) {
			fprintf(stderr, "  got: %s\n want: %s\n", vy_test_last_error.msg, want);
			vy_test_failures++;
		}
		CHECK(t == NULL);
		uint8_t *after = state_snapshot(f.region, &n1), *img1 = state_snapshot(f.image[0], &a1);
		CHECK_EQ(n0, n1);
		CHECK(n0 == n1 && !memcmp(before, after, n0));
		CHECK(a0 == a1 && !memcmp(img0, img1, a0));
		/* The fds are still the caller's: they work. */
		CHECK(fcntl(f.region, F_GETFD) >= 0);
		free(before), free(after), free(img0), free(img1);
		state_close_fds(&f);
	}
}

/* Each hostile or torn header field: an error with a Fix, no fault. */
/* An older format it reads is taken over and becomes this binary's: the
 * header then names VY_STATE_FORMAT and this version, so an older binary
 * refuses what this one writes. */
static void older_format_adopted_and_claimed(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	CHECK_EQ(state_append_str(s, 1, 1, "x"), 1);
	vy_state_fds f = state_dup_fds(s);
	vy_state_close(s);
	uint32_t old = VY_STATE_FORMAT_MIN;
	poke(f.region, offsetof(vy_state_hdr, format), &old, 4);
	poke(f.region, offsetof(vy_state_hdr, version), "0.0.1-old\0", 10);
	vy_state *t = NULL;
	MUST(vy_state_adopt(&f, &t, NULL, E));
	CHECK_EQ(t->hdr->format, VY_STATE_FORMAT);
	CHECK(!strcmp(t->hdr->version, VY_VERSION));
	vy_state_close(t);
}

static void hostile_headers_refused(void)
{
	struct {
		size_t off, n;
		uint64_t v;
	} cases[] = {
		{0, 8, 0x5441545352595658ull /* "XVYRSTAT" */},
		{offsetof(vy_state_hdr, header_bytes), 4, 8192},
		{offsetof(vy_state_hdr, region_bytes), 8, 1ull << 40},
		{offsetof(vy_state_hdr, log_offset), 8, 4097},
		{offsetof(vy_state_hdr, log_offset), 8, 8192},
		{offsetof(vy_state_hdr, log_bytes), 8, 8192},
		{offsetof(vy_state_hdr, log_bytes), 8, 3000},
		{offsetof(vy_state_hdr, log_bytes), 8, 0},
		{offsetof(vy_state_hdr, log_head), 8, 16},
		{offsetof(vy_state_hdr, log_tail), 8, 4096 + 8},
		{offsetof(vy_state_hdr, log_tail), 8, 12},
		{offsetof(vy_state_hdr, log_offset), 8, UINT64_MAX - 7},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		vy_state *s;
		MUST(vy_state_create(4096, &s, E));
		vy_state_fds f = state_dup_fds(s);
		vy_state_close(s);
		poke(f.region, cases[i].off, &cases[i].v, cases[i].n);
		vy_state *t = NULL;
		MUST_FAIL(VY_EINVAL, vy_state_adopt(&f, &t, NULL, E));
		if (t) {
			fprintf(stderr, "  case %zu adopted\n", i);
			vy_state_close(t);
		} else {
			state_close_fds(&f);
		}
	}
}

static void unsealed_or_small_refused(void)
{
	int fd = memfd_create("not-a-region", MFD_CLOEXEC);
	int a = memfd_create("a", MFD_CLOEXEC), b = memfd_create("b", MFD_CLOEXEC);
	CHECK(fd >= 0 && a >= 0 && b >= 0);
	vy_state_fds f = {fd, {a, b}};
	vy_state *t = NULL;
	MUST_FAIL(VY_EINVAL, vy_state_adopt(&f, &t, NULL, E)); /* empty */
	/* A whole region's bytes in an unsealed memfd: it could shrink under
	 * a mapping, so it is refused. */
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	CHECK(ftruncate(fd, (off_t)s->bytes) == 0);
	CHECK(pwrite(fd, s->base, s->bytes, 0) == (ssize_t)s->bytes);
	vy_state_close(s);
	MUST_FAIL(VY_EINVAL, vy_state_adopt(&f, &t, NULL, E));
	CHECK(strstr(vy_test_last_error.msg, "not sealed") != NULL);
	/* A pipe is no memfd. */
	int p[2];
	CHECK(pipe(p) == 0);
	vy_state_fds g = {p[0], {a, b}};
	MUST_FAIL(VY_EINVAL, vy_state_adopt(&g, &t, NULL, E));
	vy_state_fds h = {fd, {p[1], b}};
	MUST_FAIL(VY_EINVAL, vy_state_adopt(&h, &t, NULL, E));
	close(p[0]), close(p[1]);
	state_close_fds(&f);
}

/* Torn INIT: the lengths are stored last; past the maximum, none. */
static void torn_init_absent(void)
{
	vy_state *s;
	MUST(vy_state_create(4096, &s, E));
	const uint8_t *rq, *rp;
	uint32_t a, b;
	memset(s->hdr->init_req, 0xaa, 40); /* bytes without their lengths */
	CHECK(!vy_state_get_init(s, &rq, &a, &rp, &b));
	s->hdr->init_lens = (uint64_t)(VY_STATE_INIT_MAX + 1) | 80ull << 32;
	CHECK(!vy_state_get_init(s, &rq, &a, &rp, &b));
	vy_state_close(s);
}

/* The log's memory is the region's from its creation (state/region.c): no
 * page of it is first allocated, nor faulted in, by a change. */
static void log_memory_taken_at_create(void)
{
	vy_state *s;
	MUST(vy_state_create(1 << 20, &s, E));
	struct stat st;
	CHECK_EQ(fstat(s->fds.region, &st), 0);
	CHECK((uint64_t)st.st_blocks * 512 >= s->bytes); /* allocated, not only sized */
	long page = sysconf(_SC_PAGESIZE);
	size_t pages = (s->bytes + (size_t)page - 1) / (size_t)page;
	unsigned char *in = calloc(pages, 1);
	CHECK(in != NULL);
	if (in) {
		CHECK_EQ(mincore(s->base, s->bytes, in), 0);
		size_t resident = 0;
		for (size_t i = 0; i < pages; i++)
			resident += in[i] & 1;
		CHECK_EQ(resident, pages);
		free(in);
	}
	vy_state_close(s);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(create_adopt_round_trip), TEST_CASE(bad_sizes_refused),
		TEST_CASE(other_format_refused_untouched), TEST_CASE(older_format_adopted_and_claimed),
		TEST_CASE(hostile_headers_refused),
		TEST_CASE(unsealed_or_small_refused), TEST_CASE(torn_init_absent), TEST_CASE(log_memory_taken_at_create),
	};
	return vy_test_main("state_region", cases, sizeof(cases) / sizeof(*cases));
}
