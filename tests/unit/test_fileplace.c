/* Placement whatever order a file's bytes come in (fs/file_place.h, issue
 * 67): a file whose head comes first is placed as it comes, with no move;
 * one sized or written past its head first is placed by one move on its
 * device at its last close after writing (placed_moves), its bytes as
 * they were; a mapped file does not move, and its first mapping
 * once free places it; a truncate to 0 forgets it. */
#include "core/place.h"
#include "fs/file.h"
#include "tests/unit/fs_fixture.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { DATA_AT = 1000, FILE_BYTES = 3 << 20, LEAD = VY_PLACE_ALIGN - DATA_AT };

typedef struct fixture {
	struct vy_test_fs; /* d, c, fs, free0 (fs_fixture.h): the first member */
	vy_inode *in;
	uint8_t *bytes; /* the file's bytes: a safetensors head, then data at DATA_AT */
} fixture;

static void fx_open(fixture *f)
{
	vy_test_fs_open((vy_test_fs *)f);
	f->in = vy_test_fs_file((vy_test_fs *)f);
	f->bytes = malloc(FILE_BYTES);
	if (!f->bytes) {
		fprintf(stderr, "fixture: no memory\n");
		exit(2);
	}
	uint64_t n = DATA_AT - 8;
	for (int i = 0; i < 8; i++)
		f->bytes[i] = (uint8_t)(n >> (8 * i));
	memset(f->bytes + 8, ' ', n);
	memcpy(f->bytes + 8, "{\"t\":{}}", 8);
	for (uint64_t i = DATA_AT; i < FILE_BYTES; i++)
		f->bytes[i] = (uint8_t)(i * 131 + (i >> 12));
	pthread_rwlock_wrlock(&f->in->lock);
}

static void fx_close(fixture *f)
{
	pthread_rwlock_unlock(&f->in->lock);
	free(f->bytes);
	vy_test_fs_close((vy_test_fs *)f);
}

static void write_range(fixture *f, uint64_t from, uint64_t to)
{
	MUST(vy_file_write(&f->fs, f->in, from, f->bytes + from, to - from, E));
}

/* The file's lead as its buffer has it. */
static uint64_t lead_of(fixture *f)
{
	vy_buffer_view v = {0};
	vy_error e;
	CHECK_EQ(vy_store_view(f->c->store, f->in->buf, &v, &e), VY_OK);
	CHECK_EQ(v.lead, f->in->lead);
	return v.lead;
}

static uint64_t placed_moves(fixture *f)
{
	vy_telemetry_snapshot t;
	vy_telemetry_snapshot_take(f->c->tel, &t);
	return t.placed_moves;
}

/* Every byte of the file is f->bytes'. */
static void same_bytes(fixture *f)
{
	vy_ra_hit hit = {0};
	vy_staging_buf buf = {0};
	size_t got = 0;
	MUST(vy_file_read(&f->fs, f->in, 0, FILE_BYTES, &hit, &buf, &got, E));
	CHECK_EQ(got, (size_t)FILE_BYTES);
	const uint8_t *p = hit.chunk ? hit.data : buf.ptr;
	CHECK(p && memcmp(p, f->bytes, FILE_BYTES) == 0);
	if (hit.chunk)
		vy_readahead_put(&f->fs, f->in, &hit);
	vy_staging_release(f->c->staging, &buf);
}

static void head_first_is_placed_as_it_comes(void)
{
	fixture f;
	fx_open(&f);
	write_range(&f, 0, 8); /* safetensors' writer: the length alone */
	write_range(&f, 8, FILE_BYTES);
	CHECK_EQ(lead_of(&f), (uint64_t)LEAD);
	CHECK(!f.in->head_due);
	vy_file_closed(&f.fs, f.in);
	CHECK_EQ(placed_moves(&f), 0);
	same_bytes(&f);
	fx_close(&f);
}

static void header_last_is_placed_at_the_last_close(void)
{
	fixture f;
	fx_open(&f);
	write_range(&f, DATA_AT, FILE_BYTES);
	write_range(&f, 0, DATA_AT);
	CHECK_EQ(lead_of(&f), 0);
	CHECK(f.in->head_due);
	vy_file_closed(&f.fs, f.in);
	CHECK_EQ(lead_of(&f), (uint64_t)LEAD);
	CHECK(!f.in->head_due);
	CHECK_EQ(placed_moves(&f), 1);
	same_bytes(&f);
	/* Written again past its head, same head: no move. */
	write_range(&f, 0, 64);
	vy_file_closed(&f.fs, f.in);
	CHECK_EQ(placed_moves(&f), 1);
	fx_close(&f);
}

/* Sized first, then written front to back: placed at the close. (Holes
 * kept by the move: place_test's, on the host backend; this device maps
 * none.) */
static void sized_first_is_placed_at_the_last_close(void)
{
	fixture f;
	fx_open(&f);
	MUST(vy_file_truncate(&f.fs, f.in, FILE_BYTES, E));
	write_range(&f, 0, FILE_BYTES);
	CHECK_EQ(lead_of(&f), 0);
	vy_file_closed(&f.fs, f.in);
	CHECK_EQ(lead_of(&f), (uint64_t)LEAD);
	CHECK_EQ(placed_moves(&f), 1);
	same_bytes(&f);
	fx_close(&f);
}

static void a_mapped_file_waits_for_its_next_first_mapping(void)
{
	fixture f;
	fx_open(&f);
	write_range(&f, DATA_AT, FILE_BYTES);
	f.in->maps = 1; /* a program maps it */
	write_range(&f, 0, DATA_AT);
	vy_file_closed(&f.fs, f.in);
	CHECK_EQ(lead_of(&f), 0);
	CHECK_EQ(placed_moves(&f), 0);
	/* Mapped again: no move. This device shares no memory (ENOTSUP),
	 * after the placement that a share does first. */
	vy_error e;
	CHECK_EQ(vy_file_share(&f.fs, f.in, &e), VY_ENOTSUP);
	CHECK_EQ(lead_of(&f), 0);
	f.in->maps = 0;
	CHECK_EQ(vy_file_share(&f.fs, f.in, &e), VY_ENOTSUP); /* the next first mapping */
	CHECK_EQ(lead_of(&f), (uint64_t)LEAD);
	CHECK_EQ(placed_moves(&f), 1);
	same_bytes(&f);
	MUST(vy_file_truncate(&f.fs, f.in, 0, E));
	CHECK_EQ(f.in->lead, 0);
	CHECK(!f.in->head_due);
	fx_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(head_first_is_placed_as_it_comes),
		TEST_CASE(header_last_is_placed_at_the_last_close),
		TEST_CASE(sized_first_is_placed_at_the_last_close),
		TEST_CASE(a_mapped_file_waits_for_its_next_first_mapping),
	};
	return vy_test_main("fileplace", cases, sizeof(cases) / sizeof(cases[0]));
}
