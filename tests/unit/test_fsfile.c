/* A file's bytes when the device fails under them (injected by the counting
 * device): a write-behind copy that fails, at queueing or at completion, is
 * reported by every later settle, write and read of the file (never a
 * silent loss); a readahead copy that fails only costs the read a direct
 * copy; survive=on, a failed copy's slot stays for a successor, which
 * copies it again (or, failing too, reports it); and everything is given
 * back at the end. */
#include "fs/file.h"
#include "fs/wbehind.h"
#include "fs/wbehind_keep.h"
#include "persist/format.h"
#include "tests/unit/fs_fixture.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fixture {
	struct vy_test_fs; /* d, c, fs, free0 (fs_fixture.h): the first member */
	vy_inode *in;
} fixture;

static void fx_open(fixture *f)
{
	vy_test_fs_open((vy_test_fs *)f);
	f->in = vy_test_fs_file((vy_test_fs *)f);
}

static void fx_close(fixture *f)
{
	vy_test_fs_close((vy_test_fs *)f);
}

/* Byte i of the test pattern. */
static uint8_t pattern(uint64_t i)
{
	return (uint8_t)(i * 131 + (i >> 12));
}

static void fill(uint8_t *p, uint64_t off, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pattern(off + i);
}

/* Read [off, off+n) and compare with the pattern; the call's result. */
static vy_err read_back(fixture *f, uint64_t off, size_t n, bool *same, vy_error *e)
{
	vy_ra_hit hit = {0};
	vy_staging_buf buf = {0};
	size_t got = 0;
	vy_err rc = vy_file_read(&f->fs, f->in, off, n, &hit, &buf, &got, e);
	*same = false;
	if (rc == VY_OK && got == n) {
		const uint8_t *p = hit.chunk ? hit.data : buf.ptr;
		*same = true;
		for (size_t i = 0; i < n && *same; i++)
			*same = p[i] == pattern(off + i);
	}
	if (hit.chunk)
		vy_readahead_put(&f->fs, f->in, &hit);
	vy_staging_release(f->c->staging, &buf);
	return rc;
}

/* Three small writes gathered (no copy yet), then the slot's copy fails:
 * when queued, or on the device (its event wait). */
static void gathered_copy_fails(bool on_the_device)
{
	fixture f;
	fx_open(&f);
	uint8_t chunk[4096];
	pthread_rwlock_wrlock(&f.in->lock);
	uint64_t htod0 = vy_counts_get(f.d).copy_htod;
	for (uint64_t off = 0; off < 3 * sizeof(chunk); off += sizeof(chunk)) {
		fill(chunk, off, sizeof(chunk));
		MUST(vy_file_write(&f.fs, f.in, off, chunk, sizeof(chunk), E));
	}
	CHECK_EQ(vy_counts_get(f.d).copy_htod, htod0); /* gathered, not copied */
	_Atomic uint64_t *knob = on_the_device ? &f.d->fail_event_syncs : &f.d->fail_htod;
	atomic_store(knob, 1);
	MUST_FAIL(VY_EDEVICE, vy_file_settle(&f.fs, f.in, E));
	CHECK(strstr(vy_test_last_error.msg, "injected") != NULL);
	CHECK_EQ(atomic_load(knob), 0);
	/* Sticky, with no failure left to inject: nothing pretends the bytes
	 * arrived. */
	MUST_FAIL(VY_EDEVICE, vy_file_settle(&f.fs, f.in, E));
	fill(chunk, 3 * sizeof(chunk), sizeof(chunk));
	MUST_FAIL(VY_EDEVICE, vy_file_write(&f.fs, f.in, 3 * sizeof(chunk), chunk, sizeof(chunk), E));
	bool same;
	MUST_FAIL(VY_EDEVICE, read_back(&f, 0, sizeof(chunk), &same, E));
	pthread_rwlock_unlock(&f.in->lock);
	fx_close(&f);
}

static void write_behind_copy_failing_to_queue_is_reported_from_then_on(void)
{
	gathered_copy_fails(false);
}

static void write_behind_copy_failing_on_the_device_is_reported_from_then_on(void)
{
	gathered_copy_fails(true);
}

/* Readahead is an optimization: when its copy fails the read is made
 * directly, with the right bytes and no error. */
static void readahead_copy_failure_costs_only_a_direct_read(void)
{
	fixture f;
	fx_open(&f);
	enum { FILE_BYTES = 4 << 20, READ = 128 << 10 };
	uint8_t *data = malloc(FILE_BYTES);
	CHECK(data != NULL);
	if (!data) {
		fx_close(&f);
		return;
	}
	fill(data, 0, FILE_BYTES);
	pthread_rwlock_wrlock(&f.in->lock);
	MUST(vy_file_write(&f.fs, f.in, 0, data, FILE_BYTES, E));
	MUST(vy_file_settle(&f.fs, f.in, E));
	pthread_rwlock_unlock(&f.in->lock);
	free(data);

	pthread_rwlock_rdlock(&f.in->lock);
	vy_telemetry_snapshot t0;
	vy_telemetry_snapshot_take(f.c->tel, &t0);
	uint64_t dtoh0 = vy_counts_get(f.d).copy_dtoh;
	atomic_store(&f.d->fail_dtoh, 1); /* the chunk's copy */
	bool same = false;
	MUST(read_back(&f, 0, READ, &same, E));
	CHECK(same);
	CHECK_EQ(atomic_load(&f.d->fail_dtoh), 0);
	/* Reads in order go on, from readahead chunks again. */
	for (uint64_t off = READ; off < 2 * (2u << 20); off += READ) {
		MUST(read_back(&f, off, READ, &same, E));
		CHECK(same);
	}
	vy_telemetry_snapshot t1;
	vy_telemetry_snapshot_take(f.c->tel, &t1);
	/* 32 reads: the first direct (its chunk failed), then one chunk from
	 * the second read on and the next queued at its first hit. */
	CHECK_EQ(vy_counts_get(f.d).copy_dtoh - dtoh0, 3);
	CHECK_EQ(t1.ra_copies - t0.ra_copies, 2);
	CHECK_EQ(t1.ra_hits - t0.ra_hits, 31);
	pthread_rwlock_unlock(&f.in->lock);
	fx_close(&f);
}

/* survive=on: the keeper, as far as the write-behind region goes (a
 * fake sink keeping a copy of its fd, in slot KEPT). */
enum { KEPT = 7 };
static int keeper_fd = -1;

static vy_keep_slot keep_add(void *ctx, int fd)
{
	(void)ctx;
	keeper_fd = dup(fd);
	return keeper_fd >= 0 ? KEPT : 0;
}

static void keep_drop(void *ctx, vy_keep_slot slot)
{
	(void)ctx;
	(void)slot;
}

/* A fixture with survive=on's write-behind region, the inode's lock
 * held for writing. */
static void start_kept(fixture *f, vy_keep_sink *sink)
{
	fx_open(f);
	*sink = (vy_keep_sink){.add = keep_add, .drop = keep_drop};
	f->fs.cfg.survive = true;
	f->fs.keep_sink = sink;
	CHECK(vy_wbk_start(&f->fs));
	pthread_rwlock_wrlock(&f->in->lock);
}

/* The daemon dies (what was in its memory is gone: the region unmapped,
 * nothing else run) and a successor adopts the keeper's copy of the
 * region, its copies failing when `fail`. */
static void die_and_adopt(fixture *f, bool fail, uint64_t *applied, uint64_t *skipped)
{
	vy_wbk_stop(&f->fs);
	vy_wbehind_free(&f->fs, f->in);
	struct stat st;
	CHECK(fstat(keeper_fd, &st) == 0);
	vy_p_wbehind rec = {.slot = KEPT, .slots = VY_WB_SLOTS, .slot_bytes = VY_WB_SLOT, .bytes = (uint64_t)st.st_size};
	int table[KEPT + 1] = {-1, -1, -1, -1, -1, -1, -1, dup(keeper_fd)};
	vy_keep_fds mem = {.fd = table, .n = KEPT + 1};
	*applied = *skipped = 0;
	atomic_store(&f->d->fail_htod, fail ? 1 : 0);
	vy_wbk_adopt(&f->fs, &rec, &mem, vy_wbehind_fail, applied, skipped);
	atomic_store(&f->d->fail_htod, 0);
	CHECK_EQ(table[KEPT], -1); /* the region is the successor's */
}

static void end_kept(fixture *f)
{
	vy_wbk_stop(&f->fs);
	close(keeper_fd);
	fx_close(f);
}

/* Settled, the file reads the pattern over [0, n); then all ends (the
 * inode's lock, held by the caller, let go). */
static void reads_pattern_then_ends(fixture *f, size_t n)
{
	MUST(vy_file_settle(&f->fs, f->in, E));
	bool same = false;
	MUST(read_back(f, 0, n, &same, E));
	CHECK(same);
	pthread_rwlock_unlock(&f->in->lock);
	end_kept(f);
}

/* Three writes gathered in a kept slot whose copy fails; a successor
 * copies the slot again: the bytes land, or (`again_fails`) the file's
 * settle reports it and the slot waits, held, for the next successor,
 * which copies it. */
static void failed_kept_copy(bool again_fails)
{
	fixture f;
	vy_keep_sink sink;
	start_kept(&f, &sink);
	uint8_t chunk[4096];
	for (uint64_t off = 0; off < 3 * sizeof(chunk); off += sizeof(chunk)) {
		fill(chunk, off, sizeof(chunk));
		MUST(vy_file_write(&f.fs, f.in, off, chunk, sizeof(chunk), E));
	}
	atomic_store(&f.d->fail_htod, 1);
	MUST_FAIL(VY_EDEVICE, vy_file_settle(&f.fs, f.in, E));
	uint64_t applied, skipped;
	die_and_adopt(&f, again_fails, &applied, &skipped);
	CHECK_EQ(applied, again_fails ? 0 : 1);
	CHECK_EQ(skipped, again_fails ? 1 : 0);
	if (again_fails) {
		MUST_FAIL(VY_EDEVICE, vy_file_settle(&f.fs, f.in, E));
		CHECK(strstr(vy_test_last_error.msg, "injected") != NULL);
		die_and_adopt(&f, false, &applied, &skipped);
		CHECK_EQ(applied, 1);
		CHECK_EQ(skipped, 0);
	}
	reads_pattern_then_ends(&f, 3 * sizeof(chunk));
}

static void failed_kept_copy_is_copied_again_by_a_successor(void)
{
	failed_kept_copy(false);
}

static void failed_kept_copy_failing_again_waits_for_the_next_successor(void)
{
	failed_kept_copy(true);
}

/* A slot gathering newer bytes over a slot whose copy then fails on the
 * device is not copied after it: a successor copies both, the older
 * first, so the newer bytes win. */
static void newer_slot_waits_behind_a_failed_older_one(void)
{
	fixture f;
	vy_keep_sink sink;
	start_kept(&f, &sink);
	uint8_t chunk[4096];
	memset(chunk, 0xaa, sizeof(chunk));
	MUST(vy_file_write(&f.fs, f.in, 4096, chunk, sizeof(chunk), E)); /* slot A: [4K, 8K) */
	fill(chunk, 0, sizeof(chunk));
	MUST(vy_file_write(&f.fs, f.in, 0, chunk, sizeof(chunk), E)); /* A queued; slot B: [0, 4K) */
	fill(chunk, 4096, sizeof(chunk));
	MUST(vy_file_write(&f.fs, f.in, 4096, chunk, sizeof(chunk), E)); /* B: [0, 8K), over A */
	atomic_store(&f.d->fail_event_syncs, 1); /* A's copy, waited for before B's is queued */
	MUST_FAIL(VY_EDEVICE, vy_file_settle(&f.fs, f.in, E));
	uint64_t applied, skipped;
	die_and_adopt(&f, false, &applied, &skipped);
	CHECK_EQ(applied, 2);
	reads_pattern_then_ends(&f, 2 * sizeof(chunk));
}

/* Until the file goes: then its held slot is cleared and free again. */
static void failed_kept_copy_is_held_until_its_file_goes(void)
{
	fixture f;
	vy_keep_sink sink;
	start_kept(&f, &sink);
	uint8_t chunk[4096];
	fill(chunk, 0, sizeof(chunk));
	MUST(vy_file_write(&f.fs, f.in, 0, chunk, sizeof(chunk), E));
	atomic_store(&f.d->fail_htod, 1);
	MUST_FAIL(VY_EDEVICE, vy_file_settle(&f.fs, f.in, E));
	/* Every other slot can be taken, that one not. */
	int idx[VY_WB_SLOTS], n = 0;
	while (n < VY_WB_SLOTS && vy_wbk_take(f.fs.wbk, &idx[n]))
		n++;
	CHECK_EQ(n, VY_WB_SLOTS - 1);
	for (int i = 0; i < n; i++)
		vy_wbk_give(f.fs.wbk, idx[i]);
	vy_wbehind_free(&f.fs, f.in); /* the file goes */
	pthread_rwlock_unlock(&f.in->lock);
	n = 0;
	while (n < VY_WB_SLOTS && vy_wbk_take(f.fs.wbk, &idx[n]))
		n++;
	CHECK_EQ(n, VY_WB_SLOTS);
	for (int i = 0; i < n; i++)
		vy_wbk_give(f.fs.wbk, idx[i]);
	/* A successor would find nothing waiting. */
	uint64_t applied, skipped;
	die_and_adopt(&f, false, &applied, &skipped);
	CHECK_EQ(applied + skipped, 0);
	end_kept(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(write_behind_copy_failing_to_queue_is_reported_from_then_on),
		TEST_CASE(write_behind_copy_failing_on_the_device_is_reported_from_then_on),
		TEST_CASE(readahead_copy_failure_costs_only_a_direct_read),
		TEST_CASE(failed_kept_copy_is_copied_again_by_a_successor),
		TEST_CASE(failed_kept_copy_failing_again_waits_for_the_next_successor),
		TEST_CASE(newer_slot_waits_behind_a_failed_older_one),
		TEST_CASE(failed_kept_copy_is_held_until_its_file_goes),
	};
	return vy_test_main("fsfile", cases, sizeof(cases) / sizeof(cases[0]));
}
