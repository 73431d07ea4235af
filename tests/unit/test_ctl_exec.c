/* The sequence executor over the real core: results, one sync per
 * sequence, all-or-nothing validation with line numbers, locks and file
 * references given back, the step bound, and launches on the host backend. */
#include "core/transfer.h"
#include "ctl/exec.h"
#include "tests/unit/support.h"

#include <stdlib.h>

typedef struct tfile {
	const char *name;
	uint64_t ino;
	vy_handle h;
	uint64_t size;
	int locks, refs, written;
} tfile;

static tfile files[4];
static int lock_order_ok;
static uint64_t last_locked;

static vy_err t_lookup(void *ctx, const char *path, void **file, uint64_t *ino, vy_error *e)
{
	(void)ctx;
	for (int i = 0; i < 4; i++)
		if (files[i].name && !strcmp(files[i].name, path)) {
			files[i].refs++;
			*file = &files[i];
			*ino = files[i].ino;
			return VY_OK;
		}
	return vy_fail(e, VY_ENOENT, "create it first", "no file '%s'", path);
}

static void t_lock(void *ctx, void *f)
{
	(void)ctx;
	tfile *t = f;
	if (t->ino < last_locked)
		lock_order_ok = 0;
	last_locked = t->ino;
	t->locks++;
}

static void t_unlock(void *ctx, void *f)
{
	(void)ctx;
	((tfile *)f)->locks--;
}

static vy_err t_state(void *ctx, void *f, vy_handle *h, uint64_t *size, unsigned *dev, vy_error *e)
{
	(void)ctx;
	(void)e;
	*h = ((tfile *)f)->h;
	*size = ((tfile *)f)->size;
	*dev = 0;
	return VY_OK;
}

static void t_written(void *ctx, void *f, uint64_t ino)
{
	(void)ctx;
	(void)ino;
	((tfile *)f)->written++;
}

static void t_release(void *ctx, void *f)
{
	(void)ctx;
	((tfile *)f)->refs--;
}

static vy_err t_share(void *ctx, void *f, vy_error *e)
{
	(void)ctx;
	(void)f;
	(void)e;
	return VY_OK; /* the local runner shares nothing */
}

static const vy_ctl_files tfiles = {.lookup = t_lookup, .share = t_share, .lock = t_lock, .unlock = t_unlock,
				     .state = t_state, .written = t_written, .release = t_release};

typedef struct fixture {
	vy_counting_device *d;
	vy_core *c;
	vy_runner *r;
	vy_modules *m;
} fixture;

static void fx_open(fixture *f)
{
	vy_error e;
	vy_core_options o;
	vy_test_core_options(&o);
	f->d = vy_test_device_open();
	if (vy_core_attach(&f->d->base, &o, &f->c, &e) != VY_OK || vy_runner_local_open(&f->d->base, &f->r, &e) != VY_OK ||
	    vy_modules_open(f->r, &f->m, &e) != VY_OK) {
		fprintf(stderr, "fixture: %s\n", e.msg);
		exit(2);
	}
	memset(files, 0, sizeof(files));
	/* inos deliberately out of name order: locking must sort them */
	const char *names[4] = {"a", "b", "c", "empty"};
	uint64_t inos[4] = {40, 10, 30, 20}, sizes[4] = {4096, 4096, 64, 0};
	for (int i = 0; i < 4; i++) {
		files[i] = (tfile){.name = names[i], .ino = inos[i], .size = sizes[i]};
		if (sizes[i] && vy_store_alloc(f->c->store, sizes[i], &files[i].h, &e) == VY_OK)
			vy_clear(f->c, files[i].h, &e);
	}
}

static void fx_close(fixture *f)
{
	for (int i = 0; i < 4; i++) {
		CHECK_EQ(files[i].locks, 0);
		CHECK_EQ(files[i].refs, 0);
		if (files[i].h)
			vy_store_free(f->c->store, files[i].h, NULL);
	}
	vy_modules_close(f->m);
	vy_runner_close(f->r);
	CHECK(vy_core_close(f->c, NULL) == VY_OK);
	vy_test_device_close(f->d);
}

static vy_err run(fixture *f, const char *text, vy_ctl_result *res, vy_ctl_error *err)
{
	vy_ctl_plan plan;
	size_t used;
	vy_err rc = vy_ctl_parse(text, strlen(text), 1, &plan, &used, err);
	lock_order_ok = 1;
	last_locked = 0;
	vy_ctl_device dev = {f->c, f->m, f->r};
	vy_ctl_devices devs = {.dev = &dev, .n = 1};
	if (rc == VY_OK)
		rc = vy_ctl_run(&devs, &tfiles, &plan, res, err);
	vy_ctl_plan_free(&plan);
	return rc;
}

static void sequence_results_and_one_sync(void)
{
	fixture f;
	fx_open(&f);
	vy_ctl_result res;
	vy_ctl_error err;
	vy_telemetry_snapshot a, b;
	vy_telemetry_snapshot_take(f.c->tel, &a);
	MUST(run(&f, "fill a 0x11\nrepeat 3\nfill b 0x22 0 100\ncopy a b 0 100 8\nend\ncopy b c 0 0 64\n", &res, &err));
	vy_telemetry_snapshot_take(f.c->tel, &b);
	CHECK_EQ(res.steps, 1 + 6 + 1);
	CHECK_EQ(b.syncs - a.syncs, 1);
	CHECK_EQ(b.memset_ops - a.memset_ops, 4);
	CHECK_EQ(b.d2d_ops - a.d2d_ops, 4);
	CHECK_EQ(b.h2d_bytes - a.h2d_bytes, 0);
	CHECK_EQ(b.sequences - a.sequences, 1);
	CHECK_EQ(b.steps - a.steps, 8);
	CHECK(lock_order_ok);
	unsigned char back[64];
	vy_readback rb = {files[2].h, 0, back, 64};
	MUST(vy_readback_many(f.c, &rb, 1, E));
	/* c = b[0..64): all 0x22; b = 0x22 up to 100, then a's 0x11 for 8. */
	unsigned char want[64];
	memset(want, 0x22, 64);
	CHECK(memcmp(back, want, 64) == 0);
	vy_readback rb2 = {files[1].h, 96, back, 16};
	MUST(vy_readback_many(f.c, &rb2, 1, E));
	CHECK(back[3] == 0x22 && back[4] == 0x11 && back[11] == 0x11 && back[12] == 0);
	CHECK(files[0].written == 1 && files[1].written == 1 && files[2].written == 1);
	fx_close(&f);
}

static void validation_is_all_or_nothing(void)
{
	fixture f;
	fx_open(&f);
	static const struct {
		const char *text;
		vy_err code;
		int line;
		const char *want;
	} bad[] = {
		{"fill a 1\nfill a 1 4000 200\n", VY_ERANGE, 2, "200 bytes at offset 4000 do not fit 'a' of 4096 bytes"},
		{"fill a 1\nfill empty 1\n", VY_EINVAL, 2, "'empty' is empty"},
		{"fill a 1\nclear nope\n", VY_ENOENT, 2, "no file 'nope'"},
		{"copy a a 0 10 100\n", VY_EINVAL, 1, "overlap"},
		{"copy a c\n", VY_ERANGE, 1, "do not fit 'c'"},
		{"fill a 1\nlaunch k.k grid=1 block=1 a\n", VY_ENOENT, 2, "no module 'k'"},
		{"repeat 10000001\nfill a 1\nend\n", VY_EINVAL, 1, "10000001 steps"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		vy_counts before = vy_counts_get(f.d);
		vy_ctl_result res;
		vy_ctl_error err;
		vy_err rc = run(&f, bad[i].text, &res, &err);
		vy_counts after = vy_counts_get(f.d);
		if (rc != bad[i].code || err.line != bad[i].line || !strstr(err.e.msg, bad[i].want) ||
		    !strstr(err.e.msg, "(Fix: ")) {
			fprintf(stderr, "  case %zu: %s line %d: %s\n", i, vy_err_name(rc), err.line, err.e.msg);
			vy_test_failures++;
		}
		/* Nothing reached the device: no memset, copy or sync. */
		CHECK_EQ(after.memset8 + after.copy_dtod + after.stream_sync,
			 before.memset8 + before.copy_dtod + before.stream_sync);
		for (int k = 0; k < 4; k++)
			CHECK_EQ(files[k].written, 0);
	}
	fx_close(&f);
}

/* A sequence's two timing events are made once and reused after; the
 * runner destroys them at close. */
static void timing_events_are_reused(void)
{
	fixture f;
	fx_open(&f);
	vy_counts before = vy_counts_get(f.d);
	vy_ctl_result res;
	vy_ctl_error err;
	for (int i = 0; i < 3; i++)
		MUST(run(&f, "fill a 0x11\n", &res, &err));
	vy_counts after = vy_counts_get(f.d);
	CHECK_EQ(after.event_create - before.event_create, 2);
	CHECK_EQ(after.event_record - before.event_record, 6);
	CHECK_EQ(after.event_elapsed - before.event_elapsed, 3);
	CHECK_EQ(after.event_destroy - before.event_destroy, 0);
	for (int i = 0; i < 4; i++) {
		if (files[i].h)
			vy_store_free(f.c->store, files[i].h, NULL);
	}
	vy_modules_close(f.m);
	vy_runner_close(f.r);
	CHECK_EQ(vy_counts_get(f.d).event_destroy - before.event_destroy, 2);
	CHECK(vy_core_close(f.c, NULL) == VY_OK);
	vy_test_device_close(f.d);
}

static void launch_needs_the_cuda_backend_here(void)
{
	if (vy_test_backend() != VY_BACKEND_HOST)
		return;
	fixture f;
	fx_open(&f);
	MUST(vy_modules_load(f.m, "k", "ptx", 3, E));
	char *log = vy_modules_log(f.m, "k");
	CHECK(log && strstr(log, "not compiled"));
	free(log);
	vy_ctl_result res;
	vy_ctl_error err;
	CHECK_EQ(run(&f, "launch k.k grid=1 block=1 a\n", &res, &err), VY_ENOTSUP);
	CHECK(strstr(err.e.msg, "cuda backend") != NULL);
	CHECK_EQ(vy_counts_get(f.d).launch, 0);
	MUST(vy_modules_unload(f.m, "k", E));
	fx_close(&f);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(sequence_results_and_one_sync),
		TEST_CASE(validation_is_all_or_nothing),
		TEST_CASE(timing_events_are_reused),
		HOST_ONLY(launch_needs_the_cuda_backend_here),
	};
	return vy_test_main("ctl_exec", cases, sizeof(cases) / sizeof(cases[0]));
}
