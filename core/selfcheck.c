/* End-to-end check of the core on the chosen backend. */
#include "core/selfcheck.h"
#include "core/transfer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define FIX_BUG "run `make test` for details and report the failure"

static void pattern(unsigned char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

static vy_err expect(bool ok, const char *what, vy_error *e)
{
	return ok ? VY_OK : vy_fail(e, VY_EINTERNAL, FIX_BUG, "self-check failed: %s", what);
}

#define STEP(expr)                    \
	do {                          \
		rc = (expr);          \
		if (rc != VY_OK)      \
			goto done;    \
	} while (0)

static vy_err exercise(vy_core *c, FILE *out, vy_error *e)
{
	const size_t n = (4u << 20) + 7; /* 4 MiB + 7: not a power of two */
	unsigned char *src = malloc(n), *back = malloc(n);
	vy_handle a = 0, b = 0;
	vy_err rc = VY_OK;
	if (!src || !back) {
		rc = vy_fail(e, VY_ENOMEM, "free host memory", "self-check: no host memory for its buffers");
		goto done;
	}
	pattern(src, n, 1);
	STEP(vy_store_alloc(c->store, n, &a, e));
	STEP(vy_store_alloc(c->store, n, &b, e));
	STEP(vy_upload_whole(c, a, src, n, e));
	fprintf(out, "  upload %zu bytes: ok\n", n);

	/* Three adjacent ranges read back as one fused copy. */
	vy_telemetry_snapshot before, after;
	vy_telemetry_snapshot_take(c->tel, &before);
	size_t third = n / 3;
	vy_readback rb[3] = {
		{a, 0, back, third},
		{a, third, back + third, third},
		{a, 2 * third, back + 2 * third, n - 2 * third},
	};
	STEP(vy_readback_many(c, rb, 3, e));
	vy_telemetry_snapshot_take(c->tel, &after);
	STEP(expect(!memcmp(src, back, n), "readback differs from upload", e));
	STEP(expect(after.d2h_ops - before.d2h_ops == 1 && after.syncs - before.syncs == 1,
		    "three adjacent readbacks were not one copy and one sync", e));
	fprintf(out, "  fused readback of 3 ranges: 1 copy, 1 sync: ok\n");

	/* Device copy, then fill part of it: no host-to-device bytes. */
	vy_telemetry_snapshot_take(c->tel, &before);
	STEP(vy_copy(c, a, 0, b, 0, n, e));
	STEP(vy_fill(c, b, 1000, 5000, 0xAB, e));
	vy_telemetry_snapshot_take(c->tel, &after);
	STEP(expect(after.h2d_bytes == before.h2d_bytes, "copy or fill moved host-to-device bytes", e));
	memset(src + 1000, 0xAB, 5000);
	vy_readback whole = {b, 0, back, n};
	STEP(vy_readback_many(c, &whole, 1, e));
	STEP(expect(!memcmp(src, back, n), "copy + fill result differs", e));
	fprintf(out, "  device copy and fill: ok, 0 host-to-device bytes\n");

	/* A freed buffer is reused for the same size without the driver. */
	STEP(vy_store_free(c->store, b, e));
	b = 0;
	vy_store_usage u;
	vy_store_usage_get(c->store, &u);
	if (u.pool_cap < n) {
		fprintf(out, "  pool reuse: not checked (pool_budget of %" PRIu64 " bytes holds no %zu-byte buffer)\n",
			u.pool_cap, n);
		goto done;
	}
	vy_telemetry_snapshot_take(c->tel, &before);
	STEP(vy_store_alloc(c->store, n, &b, e));
	vy_telemetry_snapshot_take(c->tel, &after);
	STEP(expect(after.pool_hits - before.pool_hits == 1 && after.driver_allocs == before.driver_allocs,
		    "a same-size allocation after a free was not served by the pool", e));
	fprintf(out, "  pool reuse: ok, no driver allocation\n");
done:
	if (a)
		vy_store_free(c->store, a, NULL);
	if (b)
		vy_store_free(c->store, b, NULL);
	free(src);
	free(back);
	return rc;
}

vy_err vy_selfcheck(const vy_core_options *opt, FILE *out, vy_error *e)
{
	vy_device *dev;
	char note[VY_NOTE_MAX];
	vy_err rc = vy_device_open(&opt->device, &dev, note, sizeof(note), e);
	if (rc != VY_OK)
		return rc;
	if (note[0])
		fprintf(out, "vyrefs: %s\n", note);
	const vy_device_info *i = &dev->info;
	fprintf(out, "backend %s: %s", i->backend, i->name);
	if (!strcmp(i->backend, "cuda"))
		fprintf(out, " (sm_%d%d, %d SMs, driver %d)", i->cc_major, i->cc_minor, i->multiprocessors,
			i->driver_version);
	fprintf(out, ", %" PRIu64 " bytes\n", i->total_bytes);

	uint64_t free0, free1, total;
	vy_core *c = NULL;
	/* The baseline after the driver's own memory for as many streams as
	 * the core may use, which it keeps until the context goes (an H200
	 * kept 2 MiB of it past the core's close). */
	rc = vy_device_warm_streams(dev, opt->streams, e);
	if (rc == VY_OK)
		rc = dev->ops->mem_info(dev, &free0, &total, e);
	if (rc == VY_OK)
		rc = vy_core_attach(dev, opt, &c, e);
	if (rc == VY_OK) {
		rc = exercise(c, out, e);
		vy_telemetry_snapshot s;
		vy_telemetry_snapshot_take(c->tel, &s);
		char text[2048];
		vy_telemetry_format(&s, text, sizeof(text));
		fprintf(out, "telemetry:\n%s", text);
		vy_error err;
		vy_error_keep_first(&rc, vy_core_close(c, &err), e, &err);
	}
	if (rc == VY_OK)
		rc = dev->ops->mem_info(dev, &free1, &total, e);
	if (rc == VY_OK && free1 != free0)
		rc = vy_fail(e, VY_EINTERNAL, FIX_BUG,
			     "device memory not back to baseline: %" PRIu64 " bytes free before, %" PRIu64 " after",
			     free0, free1);
	if (rc == VY_OK)
		fprintf(out, "device memory back to baseline (%" PRIu64 " bytes free)\nself-check passed\n", free1);
	vy_device_close(dev);
	return rc;
}
