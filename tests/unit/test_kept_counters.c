/* The .vyre/stats counters a successor finds (daemon/kept_counters.c),
 * with a fake keeper (a table of dup'd fds) and a real state region:
 * counts go on and gauges start again; other devices, a memfd without the
 * region's key and a slot the keeper lost start again from zero, and the
 * region stops naming the slot. */
#include "daemon/kept_counters.h"
#include "tests/unit/state_support.h"

#include <sys/mman.h>

#define SLOT 9u

typedef struct fake_keeper {
	int fd[SLOT + 1];
} fake_keeper;

static vy_keep_slot keep_add(void *ctx, int fd)
{
	fake_keeper *k = ctx;
	k->fd[SLOT] = dup(fd);
	return k->fd[SLOT] >= 0 ? SLOT : 0;
}

static void keep_drop(void *ctx, vy_keep_slot slot)
{
	(void)ctx;
	(void)slot;
}

typedef struct fixture {
	vy_counting_device *d[2];
	vy_device *dev[2];
	vy_state *st;
	fake_keeper keeper;
	vy_keep_sink sink;
	int table[SLOT + 1]; /* a successor's handed fds */
	vy_keep_fds mem;
} fixture;

static void fx_open(fixture *f)
{
	*f = (fixture){0};
	for (int i = 0; i < 2; i++) {
		f->d[i] = vy_test_device_open();
		f->dev[i] = &f->d[i]->base;
	}
	vy_error e;
	if (vy_state_create(1 << 16, &f->st, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
	for (unsigned s = 0; s <= SLOT; s++)
		f->keeper.fd[s] = f->table[s] = -1;
	f->sink = (vy_keep_sink){.ctx = &f->keeper, .add = keep_add, .drop = keep_drop};
	f->mem = (vy_keep_fds){.fd = f->table, .n = SLOT + 1};
}

static void fx_close(fixture *f)
{
	for (unsigned s = 0; s <= SLOT; s++) {
		if (f->keeper.fd[s] >= 0)
			close(f->keeper.fd[s]);
		if (f->table[s] >= 0)
			close(f->table[s]);
	}
	vy_state_close(f->st);
	for (int i = 0; i < 2; i++)
		vy_test_device_close(f->d[i]);
}

/* The keeper hands its copy to a successor. */
static void hand_to_successor(fixture *f)
{
	f->table[SLOT] = dup(f->keeper.fd[SLOT]);
	CHECK(f->table[SLOT] >= 0);
}

/* A first daemon's counters, handed and counted into; then dead. */
static void first_daemon(fixture *f)
{
	vy_kept_counters *k = vy_kept_counters_new(f->dev, 2);
	CHECK(k != NULL);
	uint64_t key;
	CHECK_EQ(vy_state_counters(f->st, &key), 0); /* not named before the keeper has them */
	vy_kept_counters_hand(k, f->st, &f->sink);
	CHECK_EQ(vy_state_counters(f->st, &key), SLOT);
	CHECK(key != 0);
	vy_telemetry_add(vy_kept_counters_device(k, 0), h2d_bytes, 4096);
	vy_telemetry_add(vy_kept_counters_device(k, 1), launches, 3);
	vy_telemetry_set(vy_kept_counters_device(k, 0), resident_bytes, 1 << 20);
	vy_kept_counters_free(k);
}

static void counts_go_on_and_gauges_start_again(void)
{
	fixture f;
	fx_open(&f);
	first_daemon(&f);
	hand_to_successor(&f);
	vy_kept_counters *k = vy_kept_counters_adopt(f.st, &f.mem, f.dev, 2);
	CHECK(k != NULL);
	vy_telemetry_snapshot a, b;
	vy_telemetry_snapshot_take(vy_kept_counters_device(k, 0), &a);
	vy_telemetry_snapshot_take(vy_kept_counters_device(k, 1), &b);
	CHECK_EQ(a.h2d_bytes, 4096);
	CHECK_EQ(a.launches, 0);
	CHECK_EQ(b.launches, 3);
	CHECK_EQ(a.resident_bytes, 0); /* the successor sets it from what it holds */
	CHECK(f.table[SLOT] >= 0);    /* counted in use until claimed */
	vy_kept_counters_claim(k, &f.mem);
	CHECK_EQ(f.table[SLOT], -1);
	uint64_t key;
	CHECK_EQ(vy_state_counters(f.st, &key), SLOT);
	vy_kept_counters_hand(k, f.st, &f.sink); /* named already: nothing new */
	CHECK_EQ(vy_state_counters(f.st, &key), SLOT);
	/* The successor counts on into the keeper's copy. */
	vy_telemetry_add(vy_kept_counters_device(k, 0), h2d_bytes, 1);
	vy_kept_counters_free(k);
	hand_to_successor(&f);
	k = vy_kept_counters_adopt(f.st, &f.mem, f.dev, 2);
	CHECK(k != NULL);
	vy_telemetry_snapshot_take(vy_kept_counters_device(k, 0), &a);
	CHECK_EQ(a.h2d_bytes, 4097);
	vy_kept_counters_free(k);
	fx_close(&f);
}

/* Each refusal leaves the fd in mem (the caller drops it) and the region
 * naming no slot. */
static void refused(fixture *f, unsigned ndev)
{
	CHECK(vy_kept_counters_adopt(f->st, &f->mem, f->dev, ndev) == NULL);
	uint64_t key;
	CHECK_EQ(vy_state_counters(f->st, &key), 0);
	CHECK(vy_kept_counters_adopt(f->st, &f->mem, f->dev, ndev) == NULL); /* and stays so */
}

static void other_devices_start_again(void)
{
	fixture f;
	fx_open(&f);
	first_daemon(&f);
	hand_to_successor(&f);
	refused(&f, 1);
	CHECK(f.table[SLOT] >= 0);
	fx_close(&f);
}

/* A slot holding a memfd of the same size and header but another key (a
 * file's bytes in a slot reused after an older binary dropped it). */
static void a_memfd_without_the_key_is_refused(void)
{
	fixture f;
	fx_open(&f);
	first_daemon(&f);
	size_t n;
	uint8_t *bytes = state_snapshot(f.keeper.fd[SLOT], &n);
	bytes[8] ^= 1; /* the key */
	int fd = memfd_create("forged", 0);
	CHECK(fd >= 0 && write(fd, bytes, n) == (ssize_t)n);
	free(bytes);
	f.table[SLOT] = fd;
	refused(&f, 2);
	fx_close(&f);
}

static void a_slot_the_keeper_lost_starts_again(void)
{
	fixture f;
	fx_open(&f);
	first_daemon(&f); /* f.table[SLOT] stays -1 */
	refused(&f, 2);
	fx_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(counts_go_on_and_gauges_start_again),
		TEST_CASE(other_devices_start_again),
		TEST_CASE(a_memfd_without_the_key_is_refused),
		TEST_CASE(a_slot_the_keeper_lost_starts_again),
	};
	return vy_test_main("kept_counters", cases, sizeof(cases) / sizeof(cases[0]));
}
