/* Unit-test support: checks that report and go on, a run loop that ends with
 * `N passed, N failed`, the backend under test (VY_TEST_BACKEND=host|cuda),
 * and a counting wrapper over a real backend so a test can assert which
 * driver calls a piece of work made (and that it made none). */
#ifndef VY_TEST_SUPPORT_H
#define VY_TEST_SUPPORT_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/core.h"

extern int vy_test_failures; /* in the current test */

#define CHECK(cond)                                                                  \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__,     \
				__LINE__, #cond);                                    \
			vy_test_failures++;                                          \
		}                                                                    \
	} while (0)

#define CHECK_EQ(a, b)                                                               \
	do {                                                                         \
		uint64_t chk_a_ = (uint64_t)(a), chk_b_ = (uint64_t)(b);                     \
		if (chk_a_ != chk_b_) {                                                    \
			fprintf(stderr, "  %s:%d: %s == %s failed: %" PRIu64         \
					" != %" PRIu64 "\n",                         \
				__FILE__, __LINE__, #a, #b, chk_a_, chk_b_);               \
			vy_test_failures++;                                          \
		}                                                                    \
	} while (0)

/* A call that must succeed; on failure print its message and leave the test. */
#define MUST(call)                                                                   \
	do {                                                                         \
		vy_error must_e_;                                                    \
		vy_error *e_saved_ = vy_test_err;                                    \
		vy_test_err = &must_e_;                                              \
		vy_err must_rc_ = (call);                                            \
		vy_test_err = e_saved_;                                              \
		if (must_rc_ != VY_OK) {                                             \
			fprintf(stderr, "  %s:%d: %s failed: %s: %s\n", __FILE__,    \
				__LINE__, #call, vy_err_name(must_rc_), must_e_.msg); \
			vy_test_failures++;                                          \
			return;                                                      \
		}                                                                    \
	} while (0)

/* Inside MUST(...), the error slot to pass: MUST(vy_store_alloc(s, n, &h, E)). */
extern vy_error *vy_test_err;
#define E vy_test_err

/* A call that must fail with `code` and a message holding "(Fix: ". */
#define MUST_FAIL(code, call)                                                        \
	do {                                                                         \
		vy_error fail_e_ = {0};                                              \
		vy_error *e_saved_ = vy_test_err;                                    \
		vy_test_err = &fail_e_;                                              \
		vy_err fail_rc_ = (call);                                            \
		vy_test_err = e_saved_;                                              \
		if (fail_rc_ != (code)) {                                            \
			fprintf(stderr, "  %s:%d: %s gave %s, expected %s (%s)\n",   \
				__FILE__, __LINE__, #call, vy_err_name(fail_rc_),    \
				vy_err_name(code), fail_e_.msg);                     \
			vy_test_failures++;                                          \
		} else if (!strstr(fail_e_.msg, "(Fix: ")) {                         \
			fprintf(stderr, "  %s:%d: %s: message without a Fix hint: "  \
					"%s\n",                                      \
				__FILE__, __LINE__, #call, fail_e_.msg);             \
			vy_test_failures++;                                          \
		}                                                                    \
		vy_test_last_error = fail_e_;                                        \
	} while (0)

extern vy_error vy_test_last_error; /* the error MUST_FAIL saw last */

typedef void (*vy_test_fn)(void);
typedef struct vy_test_case {
	const char *name;
	vy_test_fn fn;
	bool host_only; /* meaningful only on the host backend */
} vy_test_case;
#define TEST_CASE(fn) {#fn, fn, false}
#define HOST_ONLY(fn) {#fn, fn, true}

/* Run the cases, print `ok NAME` / `FAIL NAME` / `skip NAME` lines and a last
 * line `N passed, N failed`; exit status 0 only if none failed. */
int vy_test_main(const char *suite, const vy_test_case *cases, size_t n);

/* The backend under test, from VY_TEST_BACKEND (default host). */
vy_backend_kind vy_test_backend(void);

/* Host capacity for tests on the host backend. */
#define VY_TEST_HOST_MEMORY (512ull << 20)

/* Counting wrapper: every call is forwarded to `inner` and counted. */
#define VY_COUNT_FIELDS(X)                                                      \
	X(mem_info) X(alloc) X(free) X(host_alloc) X(host_free) X(stream_create) \
	X(stream_destroy) X(stream_sync) X(copy_htod) X(copy_dtoh) X(copy_dtod)  \
	X(memset8) X(event_create) X(event_destroy) X(event_record) X(event_sync) X(event_elapsed)  \
	X(module_load) X(module_unload) X(function_get) X(function_info) X(launch)

typedef struct vy_counts {
#define VY_COUNT_PLAIN(f) uint64_t f;
	VY_COUNT_FIELDS(VY_COUNT_PLAIN)
#undef VY_COUNT_PLAIN
} vy_counts;

typedef struct vy_counting_device {
	vy_device base;
	vy_device *inner;
	struct {
#define VY_COUNT_ATOMIC(f) _Atomic uint64_t f;
		VY_COUNT_FIELDS(VY_COUNT_ATOMIC)
#undef VY_COUNT_ATOMIC
	} n;
	/* Tests: this many coming allocations fail with ENOSPC, as a full
	 * device would fail them; this many coming copies to / from the device
	 * and event waits fail with EDEVICE, as a lost device would. */
	_Atomic uint64_t fail_allocs, fail_htod, fail_dtoh, fail_event_syncs;
} vy_counting_device;

/* Open the backend under test wrapped in a counter. */
/* The same, sharing as the backend does (allocations of the share
 * granularity or more are rounded up to it and can be exported). */
vy_counting_device *vy_test_device_open_shared(void);
vy_counting_device *vy_test_device_open(void);
void vy_test_device_close(vy_counting_device *d);
/* Driver calls of any kind made so far, except mem_info. */
uint64_t vy_counts_driver_calls(const vy_counts *c);
vy_counts vy_counts_get(vy_counting_device *d);

/* After a close: check every driver allocation, pinned buffer and stream was
 * given back, and the device's free memory is exactly `free0` again; then
 * close the device. */
void vy_test_expect_baseline_and_close(vy_counting_device *d, uint64_t free0);

/* vy_device_warm_streams, exiting on failure (see core/device.h). */
void vy_test_warm_streams(vy_device *d, unsigned n);

/* Core options for tests: the backend under test, small staging chunks so
 * that multi-round paths run with small data. */
void vy_test_core_options(vy_core_options *o);

/* Deterministic pseudo-random bytes. */
void vy_test_fill_pattern(void *p, size_t n, unsigned seed);

#endif
