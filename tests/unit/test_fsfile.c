/* A file's bytes when the device fails under them (injected by the counting
 * device): a write-behind copy that fails, at queueing or at completion, is
 * reported by every later settle, write and read of the file (never a
 * silent loss); a readahead copy that fails only costs the read a direct
 * copy; and everything is given back at the end. */
#include "fs/file.h"
#include "tests/unit/fs_fixture.h"

#include <stdlib.h>

typedef struct fixture {
	struct vy_test_fs; /* d, c, fs, free0 (fs_fixture.h): the first member */
	vy_inode *in;
} fixture;

static void fx_open(fixture *f)
{
	vy_test_fs_open((vy_test_fs *)f);
	pthread_mutex_lock(&f->fs.ns);
	f->in = vy_inode_new(vy_fs_ns(&f->fs), VY_FILE, S_IFREG | 0644, 0, 0);
	pthread_mutex_unlock(&f->fs.ns);
	if (!f->in) {
		fprintf(stderr, "fixture: no memory for an inode\n");
		exit(2);
	}
	f->in->nlink = 1;
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

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(write_behind_copy_failing_to_queue_is_reported_from_then_on),
		TEST_CASE(write_behind_copy_failing_on_the_device_is_reported_from_then_on),
		TEST_CASE(readahead_copy_failure_costs_only_a_direct_read),
	};
	return vy_test_main("fsfile", cases, sizeof(cases) / sizeof(cases[0]));
}
