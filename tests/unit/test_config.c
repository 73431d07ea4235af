/* Configuration and shared plumbing: sizes as users write them, -o options
 * (every key, refusals with a Fix hint, all-or-none), error messages and
 * their errno mapping, telemetry rendering and reset. */
#include "config/config.h"
#include "config/options.h"
#include "config/size.h"
#include "core/err.h"
#include "core/telemetry.h"
#include "tests/unit/support.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define TiB (1ull << 40)

/* ---- sizes ------------------------------------------------------------ */

static void size_parse_accepts_numbers_and_units(void)
{
	static const struct {
		const char *text;
		uint64_t want;
	} good[] = {
		{"0", 0},
		{"1", 1},
		{"4096", 4096},
		{"64K", 64 * KiB},
		{"64k", 64 * KiB},
		{"64KiB", 64 * KiB},
		{"64kib", 64 * KiB},
		{"64KB", 64 * KiB},
		{"64kb", 64 * KiB},
		{"512M", 512 * MiB},
		{"512MiB", 512 * MiB},
		{"2G", 2 * GiB},
		{"2g", 2 * GiB},
		{"1T", 1 * TiB},
		{"0K", 0},
		{"007", 7},
		{"18446744073709551615", UINT64_MAX},
		/* The largest multiples that fit. 17000000000G is among them:
		 * 17e9 < 2^34 = 17179869184. */
		{"17000000000G", 17000000000ull * GiB},
		{"17179869183G", 17179869183ull * GiB},
		{"16777215T", 16777215ull * TiB},
		{"18014398509481983K", 18014398509481983ull * KiB},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t v = 12345;
		vy_error e = {0};
		vy_err rc = vy_size_parse(good[i].text, &v, &e);
		if (rc != VY_OK || v != good[i].want) {
			fprintf(stderr, "  '%s': %s, %" PRIu64 " (want %" PRIu64 ") %s\n", good[i].text,
				vy_err_name(rc), v, good[i].want, e.msg);
			vy_test_failures++;
		}
	}
}

static void size_parse_refuses_overflow(void)
{
	static const char *const big[] = {
		"99999999999999999999", "18446744073709551616", "18000000000G", "17179869184G",
		"16777216T", "18014398509481984K", "99999999999999999999999999K",
	};
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		uint64_t v = 777;
		MUST_FAIL(VY_EOVERFLOW, vy_size_parse(big[i], &v, E));
		CHECK_EQ(v, 777); /* untouched */
		CHECK_EQ(vy_test_last_error.code, VY_EOVERFLOW);
		CHECK(strstr(vy_test_last_error.msg, big[i]) != NULL);
	}
}

static void size_parse_refuses_garbage(void)
{
	static const char *const bad[] = {
		"", "M", "1.5G", "-1", "+1", "12X", "1GiBx", "1GB ", " 1", "1 G", "1iB", "1B", "0x10",
		"1GG", "1Gi", "1KiBiB", "K1", "1e3",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 777;
		vy_error e = {0};
		vy_err rc = vy_size_parse(bad[i], &v, &e);
		if (rc != VY_EINVAL || !strstr(e.msg, "(Fix: ") || v != 777) {
			fprintf(stderr, "  '%s': %s, %" PRIu64 ", %s\n", bad[i], vy_err_name(rc), v, e.msg);
			vy_test_failures++;
		}
	}
	uint64_t v;
	MUST_FAIL(VY_EINVAL, vy_size_parse("12X", &v, E));
	CHECK(strstr(vy_test_last_error.msg, "'12X'") != NULL); /* names the text */
	CHECK_EQ(vy_test_last_error.code, VY_EINVAL);
}

static void size_format_renders_binary_units(void)
{
	static const struct {
		uint64_t bytes;
		const char *want;
	} cases[] = {
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{512 * MiB, "512.0 MiB"},
		{3 * GiB / 2, "1.5 GiB"},
		{2 * TiB, "2.0 TiB"},
		{UINT64_MAX, "16.0 EiB"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char buf[32];
		memset(buf, 'Z', sizeof(buf));
		vy_size_format(cases[i].bytes, buf, sizeof(buf));
		if (strcmp(buf, cases[i].want) != 0) {
			fprintf(stderr, "  %" PRIu64 ": '%s', want '%s'\n", cases[i].bytes, buf, cases[i].want);
			vy_test_failures++;
		}
	}
	/* A small buffer is truncated and terminated, never overrun. */
	char small[8];
	memset(small, 'Z', sizeof(small));
	vy_size_format(3 * GiB / 2, small, 4);
	CHECK(strcmp(small, "1.5") == 0);
	CHECK(small[4] == 'Z');
}

/* ---- options ---------------------------------------------------------- */

static bool same_options(const vy_config *a, const vy_config *b)
{
	return a->core.device.backend == b->core.device.backend && a->core.device.ordinal == b->core.device.ordinal &&
	       a->core.device.host_memory == b->core.device.host_memory && a->core.store.budget_bytes == b->core.store.budget_bytes &&
	       a->core.store.budget_percent == b->core.store.budget_percent && a->core.store.pool_cap == b->core.store.pool_cap &&
	       a->core.staging_cache == b->core.staging_cache && a->core.staging_chunk == b->core.staging_chunk &&
	       a->core.streams == b->core.streams;
}

static void defaults(vy_config *o)
{
	memset(o, 0, sizeof(*o)); /* padding too, for memcmp */
	vy_config_defaults(o);
}

/* Parse `list` into the defaults and compare with `want` (defaults edited). */
static void expect_parse(const char *list, const vy_config *want, int line)
{
	vy_config o;
	defaults(&o);
	vy_error e = {0};
	vy_err rc = vy_config_parse_list(&o, list, &e);
	if (rc != VY_OK || !same_options(&o, want)) {
		fprintf(stderr, "  line %d: '%s': %s %s\n", line, list, vy_err_name(rc), e.msg);
		vy_test_failures++;
	}
}

static void options_each_key_sets_its_field(void)
{
	vy_config w;
	defaults(&w);
	CHECK_EQ(w.core.device.backend, VY_BACKEND_AUTO);
	w.core.device.backend = VY_BACKEND_HOST;
	expect_parse("backend=host", &w, __LINE__);
	w.core.device.backend = VY_BACKEND_CUDA;
	expect_parse("backend=cuda", &w, __LINE__);
	w.core.device.backend = VY_BACKEND_AUTO;
	expect_parse("backend=host,backend=auto", &w, __LINE__); /* the last wins */

	defaults(&w);
	w.core.device.ordinal = 3;
	expect_parse("ordinal=3", &w, __LINE__);
	w.core.device.ordinal = 2147483647;
	expect_parse("ordinal=2147483647", &w, __LINE__);

	defaults(&w);
	w.core.device.host_memory = 4 * GiB;
	expect_parse("host_memory=4G", &w, __LINE__);
	w.core.device.host_memory = 1 << 20;
	expect_parse("host_memory=1M", &w, __LINE__);

	defaults(&w);
	w.core.store.budget_bytes = 8 * GiB;
	w.core.store.budget_percent = 0;
	expect_parse("resident_budget=8G", &w, __LINE__);
	w.core.store.budget_bytes = 0;
	w.core.store.budget_percent = 50;
	expect_parse("resident_budget=50%", &w, __LINE__);
	/* Each form clears the other. */
	expect_parse("resident_budget=8G,resident_budget=50%", &w, __LINE__);
	w.core.store.budget_bytes = 123;
	w.core.store.budget_percent = 0;
	expect_parse("resident_budget=50%,resident_budget=123", &w, __LINE__);
	w.core.store.budget_bytes = 0;
	w.core.store.budget_percent = 1;
	expect_parse("resident_budget=1%", &w, __LINE__);
	w.core.store.budget_percent = 100;
	expect_parse("resident_budget=100%", &w, __LINE__);

	defaults(&w);
	CHECK_EQ(w.core.store.pool_cap, VY_POOL_CAP_DEFAULT);
	w.core.store.pool_cap = 0;
	expect_parse("pool_budget=0", &w, __LINE__); /* the pool off */
	w.core.store.pool_cap = 256 * MiB;
	expect_parse("pool_budget=256M", &w, __LINE__);

	defaults(&w);
	CHECK_EQ(w.core.staging_cache, 128 * MiB);
	w.core.staging_cache = 32 * MiB;
	expect_parse("staging_cache=32MiB", &w, __LINE__);
	w.core.staging_cache = 0;
	expect_parse("staging_cache=0", &w, __LINE__);

	/* All at once. */
	defaults(&w);
	w.core.device.backend = VY_BACKEND_HOST;
	w.core.device.ordinal = 2;
	w.core.device.host_memory = 1 * GiB;
	w.core.store.budget_percent = 75;
	w.core.store.pool_cap = 64 * MiB;
	w.core.staging_cache = 16 * MiB;
	expect_parse("backend=host,ordinal=2,host_memory=1G,resident_budget=75%,pool_budget=64M,staging_cache=16M",
		     &w, __LINE__);

	/* Nothing to apply changes nothing. */
	defaults(&w);
	expect_parse("", &w, __LINE__);
}

/* vy_config_parse_list(list) must fail with VY_EINVAL, a Fix hint, a message
 * holding `names`, and leave the options byte for byte as they were. */
static void expect_refused(const char *list, const char *names, int line)
{
	vy_config o, before;
	defaults(&o);
	o.core.device.ordinal = 5; /* not only defaults */
	o.core.store.budget_bytes = 3 * GiB;
	memcpy(&before, &o, sizeof(o));
	vy_error e = {0};
	vy_err rc = vy_config_parse_list(&o, list, &e);
	bool ok = rc == VY_EINVAL && strstr(e.msg, "(Fix: ") && strstr(e.msg, names) &&
		  memcmp(&o, &before, sizeof(o)) == 0;
	if (!ok) {
		fprintf(stderr, "  line %d: '%s' gave %s: %s%s\n", line, list, vy_err_name(rc), e.msg,
			memcmp(&o, &before, sizeof(o)) ? " (options changed)" : "");
		vy_test_failures++;
	}
}

static void options_refuse_bad_values(void)
{
	expect_refused("resident_budget=0%", "0%", __LINE__);
	expect_refused("resident_budget=0%", "resident_budget", __LINE__);
	expect_refused("resident_budget=101%", "101%", __LINE__);
	expect_refused("resident_budget=abc", "abc", __LINE__);
	expect_refused("resident_budget=abc", "resident_budget", __LINE__);
	expect_refused("resident_budget=0", "resident_budget", __LINE__);
	expect_refused("resident_budget=%", "resident_budget", __LINE__);
	expect_refused("resident_budget=5.5%", "5.5%", __LINE__);
	expect_refused("resident_budget=-5%", "-5%", __LINE__);
	expect_refused("resident_budget=50%%", "50%%", __LINE__);
	expect_refused("resident_budget=", "resident_budget", __LINE__);
	expect_refused("backend=gpu", "gpu", __LINE__);
	expect_refused("backend=gpu", "backend", __LINE__);
	expect_refused("backend=", "backend", __LINE__);
	expect_refused("ordinal=-1", "-1", __LINE__);
	expect_refused("ordinal=-1", "ordinal", __LINE__);
	expect_refused("ordinal=1x", "1x", __LINE__);
	expect_refused("ordinal= 3", "ordinal", __LINE__); /* strtol would take these */
	expect_refused("ordinal=+3", "+3", __LINE__);
	expect_refused("resident_budget=+50%", "+50%", __LINE__);
	expect_refused("resident_budget= 50%", "resident_budget", __LINE__);
	expect_refused("ordinal=", "ordinal", __LINE__);
	expect_refused("ordinal=2147483648", "2147483648", __LINE__);
	expect_refused("ordinal=99999999999999999999", "ordinal", __LINE__);
	expect_refused("host_memory=0", "host_memory", __LINE__);
	expect_refused("host_memory=1", "at least 1M", __LINE__); /* a 0-byte budget */
	expect_refused("host_memory=16T", "this machine has", __LINE__);
	expect_refused("host_memory=lots", "lots", __LINE__);
	expect_refused("host_memory=99999999999999999999", "host_memory", __LINE__);
	expect_refused("pool_budget=1.5G", "1.5G", __LINE__);
	expect_refused("pool_budget=1.5G", "pool_budget", __LINE__);
	expect_refused("staging_cache=12X", "12X", __LINE__);
	expect_refused("staging_cache=12X", "staging_cache", __LINE__);
	expect_refused("bogus=1", "bogus", __LINE__);
	expect_refused("backend", "backend", __LINE__); /* no '=' */
	expect_refused("ordinal", "ordinal", __LINE__);
}

static void options_are_all_or_none(void)
{
	expect_refused("backend=host,bogus=1", "bogus", __LINE__);
	expect_refused("ordinal=1,host_memory=2G,resident_budget=0%", "0%", __LINE__);
	expect_refused("pool_budget=1G,staging_cache", "staging_cache", __LINE__);
	expect_refused("resident_budget=50%,backend=gpu,ordinal=1", "gpu", __LINE__);
	/* vy_options_set on its own also leaves a refused key's field alone. */
	vy_config o, before;
	defaults(&o);
	memcpy(&before, &o, sizeof(o));
	static const char *const kv[][2] = {
		{"backend", "gpu"}, {"ordinal", "-1"}, {"host_memory", "0"}, {"resident_budget", "101%"},
		{"resident_budget", "x"}, {"pool_budget", "x"}, {"staging_cache", "1.5G"}, {"nope", "1"},
	};
	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		MUST_FAIL(VY_EINVAL, vy_config_set(&o, kv[i][0], kv[i][1], E));
		CHECK(strstr(vy_test_last_error.msg, kv[i][0]) != NULL);
		CHECK(memcmp(&o, &before, sizeof(o)) == 0);
	}
	MUST(vy_config_set(&o, "ordinal", "7", E));
	CHECK_EQ(o.core.device.ordinal, 7);
}

/* ---- config files and the fs keys -------------------------------------- */

static char *write_temp(const char *text)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/vyrefs-conf.XXXXXX");
	int fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, "w");
	fputs(text, f);
	fclose(f);
	return path;
}

static void config_fs_keys_and_defaults(void)
{
	vy_config c;
	vy_config_defaults(&c);
	CHECK_EQ(c.max_write, 1u << 20);
	CHECK(c.page_cache);
	CHECK(!c.allow_other);
	CHECK_EQ(c.kernel_cache, 256ull << 20);
	CHECK(c.readahead && c.write_behind);
	CHECK_EQ(c.idle_threads, 2);
	CHECK(c.survive); /* a keeper unless asked not to (survive=off) */
	CHECK(!c.survive_set); /* the default: off where no device can keep */
	MUST(vy_config_set(&c, "survive", "off", E));
	CHECK(c.survive_set);
	CHECK(!c.survive);
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "survive", "maybe", E));
	CHECK(!c.survive);
	MUST(vy_config_set(&c, "survive", "on", E));
	CHECK(c.survive);
	MUST(vy_config_set(&c, "survive", "off", E));
	CHECK_EQ(c.survive_log, 64ull << 20);
	CHECK(c.survive_standby); /* on by default */
	MUST(vy_config_set(&c, "survive_standby", "off", E));
	CHECK(!c.survive_standby);
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "survive_standby", "maybe", E));
	CHECK(!c.survive_standby);
	MUST(vy_config_set(&c, "survive_log", "64K", E));
	CHECK_EQ(c.survive_log, 64u << 10);
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "survive_log", "96K", E)); /* not a power of two */
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "survive_log", "32K", E));
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "survive_log", "2G", E));
	CHECK_EQ(c.survive_log, 64u << 10);
	MUST(vy_config_parse_list(&c, "max_write=128K,page_cache=off,allow_other=on,kernel_cache=0,readahead=off,idle_threads=4", E));
	CHECK_EQ(c.max_write, 128u << 10);
	CHECK(!c.readahead);
	CHECK_EQ(c.idle_threads, 4);
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "idle_threads", "-1", E));
	CHECK(strstr(vy_test_last_error.msg, "from 2 to 10, or 0 for libfuse's own loop") != NULL);
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "idle_threads", "11", E));
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "idle_threads", "1", E)); /* would wake a worker per request */
	CHECK_EQ(c.idle_threads, 4);
	CHECK(!c.page_cache);
	CHECK(c.allow_other);
	CHECK_EQ(c.kernel_cache, 0);
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "max_write", "2M", E));
	CHECK(strstr(vy_test_last_error.msg, "4K to 1M") != NULL);
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "max_write", "1K", E));
	MUST_FAIL(VY_EINVAL, vy_config_set(&c, "page_cache", "maybe", E));
	CHECK(strstr(vy_test_last_error.msg, "on or off") != NULL);
	CHECK_EQ(c.max_write, 128u << 10);
}

static void config_file_sections_and_comments(void)
{
	const char *path = write_temp("# vyrefs settings\n; another comment\nbackend = host\n\n[vyrefs]\n"
				      "pool_budget = 16M\nresident_budget = 40%\nallow_other = yes\n");
	CHECK(path != NULL);
	if (!path)
		return;
	vy_config c;
	vy_config_defaults(&c);
	MUST(vy_config_load_file(&c, path, E));
	CHECK_EQ(c.core.device.backend, VY_BACKEND_HOST);
	CHECK_EQ(c.core.store.pool_cap, 16u << 20);
	CHECK(c.pool_budget_set);
	CHECK_EQ(c.core.store.budget_percent, 40);
	CHECK(c.allow_other);
	unlink(path);
}

static void config_file_errors_name_file_and_line(void)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
		{"backend = host\nmax_write = 9G\n", "line 2: bad value '9G' for max_write"},
		{"[other]\nbackend = host\n", "line 2: unknown section [other]"},
		{"backend = host\nthis line has no equals sign\n", "line 2: not `key = value`"},
		{"bogus = 1\n", "line 1: unknown option 'bogus'"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *path = write_temp(bad[i].text);
		CHECK(path != NULL);
		if (!path)
			continue;
		vy_config c, before;
		vy_config_defaults(&c);
		before = c;
		MUST_FAIL(VY_EINVAL, vy_config_load_file(&c, path, E));
		if (!strstr(vy_test_last_error.msg, bad[i].want) || !strstr(vy_test_last_error.msg, path)) {
			fprintf(stderr, "  case %zu: %s\n", i, vy_test_last_error.msg);
			vy_test_failures++;
		}
		CHECK(memcmp(&c, &before, sizeof(c)) == 0); /* all or none */
		unlink(path);
	}
	vy_config c;
	vy_config_defaults(&c);
	MUST_FAIL(VY_ENOENT, vy_config_load_file(&c, "/nonexistent/vyrefs.conf", E));
}

/* What .vyre/config shows loads back to the same configuration. */
static void config_ini_round_trips(void)
{
	vy_config c, back;
	vy_config_defaults(&c);
	MUST(vy_config_parse_list(&c, "backend=cuda,ordinal=3,host_memory=2G,resident_budget=12G,pool_budget=64M,"
				      "staging_cache=32M,max_write=512K,page_cache=off,kernel_cache=1G,allow_other=on",
				  E));
	for (int round = 0; round < 2; round++) {
		size_t need = vy_config_format_ini(&c, NULL, 0);
		char *text = malloc(need + 1);
		CHECK(text != NULL);
		if (!text)
			return;
		CHECK_EQ(vy_config_format_ini(&c, text, need + 1), need);
		const char *path = write_temp(text);
		free(text);
		vy_config_defaults(&back);
		MUST(vy_config_load_file(&back, path, E));
		unlink(path);
		CHECK(memcmp(&c, &back, sizeof(c)) == 0);
		vy_config_defaults(&c); /* and the defaults, with their comments */
	}
}

/* devices=: all, or a list that goes on past the -o list's commas; one
 * GPU (ordinal's) by default. host_devices and peer beside it. */
static void options_name_the_devices(void)
{
	vy_config w, c;
	defaults(&w);
	CHECK(!w.devices_all && w.ndevices == 0 && w.host_devices == 1 && w.peer);
	w.devices_all = true;
	expect_parse("devices=all", &w, __LINE__);
	defaults(&w);
	w.ndevices = 3;
	w.devices[0] = 2, w.devices[1] = 0, w.devices[2] = 5;
	expect_parse("devices=2,0,5", &w, __LINE__);
	expect_parse("devices=2+0+5", &w, __LINE__);
	w.peer = false;
	w.host_devices = 3;
	expect_parse("devices=2,0,5,peer=off,host_devices=3", &w, __LINE__);
	expect_parse("peer=off,devices=2:0:5,host_devices=3", &w, __LINE__);
	expect_refused("devices=0,0", "named twice", __LINE__);
	expect_refused("devices=", "devices", __LINE__);
	expect_refused("devices=1x", "1x", __LINE__);
	expect_refused("devices=0::1", "devices", __LINE__);
	expect_refused("devices=-1", "devices", __LINE__);
	expect_refused("devices=0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "too many", __LINE__);
	expect_refused("host_devices=0", "host_devices", __LINE__);
	expect_refused("host_devices=17", "host_devices", __LINE__);
	expect_refused("peer=maybe", "peer", __LINE__);
	expect_refused("1", "'1'", __LINE__); /* a number with no devices= before it */
	/* What .vyre/config writes reads back to the same list. */
	vy_config_defaults(&c);
	MUST(vy_config_parse_list(&c, "devices=1,0,host_devices=2,peer=off", E));
	char text[8192];
	CHECK(vy_config_format_ini(&c, text, sizeof(text)) < sizeof(text));
	CHECK(strstr(text, "devices = 1,0\n") != NULL);
	const char *path = write_temp(text);
	vy_config back;
	vy_config_defaults(&back);
	MUST(vy_config_load_file(&back, path, E));
	unlink(path);
	CHECK(memcmp(&c, &back, sizeof(c)) == 0);
}

/* The settings table and the parser know the same keys: each table key
 * (but config, which main takes) is a key vy_config_set knows, and
 * .vyre/config has a line for each, in the table's order. */
static void options_table_matches_the_settings(void)
{
	vy_config c;
	vy_config_defaults(&c);
	size_t need = vy_config_format_ini(&c, NULL, 0);
	char *text = malloc(need + 1);
	CHECK(text != NULL);
	if (!text)
		return;
	vy_config_format_ini(&c, text, need + 1);
	const char *at = text;
	for (size_t i = 0; i < vy_options_count; i++) {
		const char *key = vy_options[i].key;
		CHECK(vy_option_find(key) == &vy_options[i]);
		CHECK(vy_options[i].values[0] && vy_options[i].dflt[0] && vy_options[i].help[0]);
		if (!strcmp(key, "config"))
			continue;
		vy_error e;
		vy_config_set(&c, key, "\x01bogus", &e);
		if (strstr(e.msg, "unknown option")) {
			fprintf(stderr, "  table key %s: %s\n", key, e.msg);
			vy_test_failures++;
		}
		char set[64], unset[64];
		snprintf(set, sizeof(set), "\n%s = ", key);
		snprintf(unset, sizeof(unset), "\n# %s: %s\n", key, vy_options[i].dflt);
		const char *line = strstr(at, set);
		if (!line)
			line = strstr(at, unset);
		if (!line) {
			fprintf(stderr, "  .vyre/config has no line for %s after %.20s\n", key, at);
			vy_test_failures++;
			continue;
		}
		at = line + 1;
	}
	free(text);
	vy_error e;
	CHECK_EQ(vy_config_set(&c, "bogus", "1", &e), VY_EINVAL);
	CHECK(strstr(e.msg, "allow_other, vyre_dir, launch_timeout, kernel_cflags, xattr_budget, max_inodes, survive, survive_standby, survive_log, backing, writeback_delay, config") != NULL); /* the list comes from the table */
}

/* ---- errors ----------------------------------------------------------- */

static void fail_formats_message_and_hint(void)
{
	vy_error e;
	vy_error_clear(&e);
	CHECK_EQ(vy_fail(&e, VY_ENOSPC, "free some buffers", "need %d bytes, %s", 42, "none left"), VY_ENOSPC);
	CHECK_EQ(e.code, VY_ENOSPC);
	CHECK(strcmp(e.msg, "need 42 bytes, none left (Fix: free some buffers)") == 0);
	CHECK_EQ(vy_fail(NULL, VY_EBUSY, "x", "y"), VY_EBUSY); /* no slot: just the code */
	vy_error_clear(&e);
	CHECK_EQ(e.code, VY_OK);
	CHECK_EQ(e.msg[0], '\0');
	vy_error_clear(NULL);
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && memcmp(s + n - t, tail, t) == 0;
}

static void long_message_keeps_the_whole_hint(void)
{
	static char text[4000];
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	const char *hint = "lower resident_budget to 50%";
	const char *tail = " (Fix: lower resident_budget to 50%)";
	size_t tlen = strlen(tail);
	vy_error e;
	CHECK_EQ(vy_fail(&e, VY_ENOSPC, hint, "%s", text), VY_ENOSPC);
	CHECK_EQ(strlen(e.msg), VY_ERROR_MSG_MAX - 1);
	CHECK(ends_with(e.msg, tail));
	CHECK_EQ(strspn(e.msg, "x"), VY_ERROR_MSG_MAX - 1 - tlen);
	/* Exactly fitting text is kept whole; one byte more is cut by one. */
	size_t fit = VY_ERROR_MSG_MAX - 1 - tlen;
	CHECK_EQ(vy_fail(&e, VY_EINVAL, hint, "%.*s", (int)fit, text), VY_EINVAL);
	CHECK_EQ(strlen(e.msg), VY_ERROR_MSG_MAX - 1);
	CHECK_EQ(strspn(e.msg, "x"), fit);
	CHECK(ends_with(e.msg, tail));
	CHECK_EQ(vy_fail(&e, VY_EINVAL, hint, "%.*s", (int)fit + 1, text), VY_EINVAL);
	CHECK_EQ(strspn(e.msg, "x"), fit);
	CHECK(ends_with(e.msg, tail));
	/* Short text is not padded. */
	CHECK_EQ(vy_fail(&e, VY_EINVAL, hint, "%.*s", 3, text), VY_EINVAL);
	CHECK_EQ(strlen(e.msg), 3 + tlen);
	/* A hint longer than a whole message is cut, and still closes. */
	CHECK_EQ(vy_fail(&e, VY_EINVAL, text, "short"), VY_EINVAL);
	CHECK_EQ(strlen(e.msg), VY_ERROR_MSG_MAX - 1);
	CHECK(strncmp(e.msg, " (Fix: xxx", 10) == 0);
	CHECK(ends_with(e.msg, "x)"));
}

static void errno_mapping(void)
{
	CHECK_EQ(vy_err_errno(VY_OK), 0);
	CHECK_EQ(vy_err_errno(VY_EINVAL), EINVAL);
	CHECK_EQ(vy_err_errno(VY_ERANGE), EINVAL);
	CHECK_EQ(vy_err_errno(VY_ENOENT), ENOENT);
	CHECK_EQ(vy_err_errno(VY_ENOSPC), ENOSPC);
	CHECK_EQ(vy_err_errno(VY_EBUSY), EBUSY);
	CHECK_EQ(vy_err_errno(VY_EOVERFLOW), EOVERFLOW);
	CHECK_EQ(vy_err_errno(VY_ENOMEM), ENOMEM);
	CHECK_EQ(vy_err_errno(VY_ENODEV), ENODEV);
	CHECK_EQ(vy_err_errno(VY_EDEVICE), EIO);
	CHECK_EQ(vy_err_errno(VY_ENOTSUP), EOPNOTSUPP);
	CHECK_EQ(vy_err_errno(VY_EINTERNAL), EIO);
	CHECK_EQ(vy_err_errno(VY_EXDEV), EXDEV);
	CHECK_EQ(vy_err_errno((vy_err)999), EIO);
}

static void error_names(void)
{
	static const char *const names[] = {
		"ok", "einval", "erange", "enoent", "enospc", "ebusy", "eoverflow",
		"enomem", "enodev", "edevice", "enotsup", "einternal",
	};
	CHECK_EQ(VY_EINTERNAL + 1, sizeof(names) / sizeof(names[0]));
	for (int c = VY_OK; c <= VY_EINTERNAL; c++) {
		if (strcmp(vy_err_name((vy_err)c), names[c]) != 0) {
			fprintf(stderr, "  code %d: '%s', want '%s'\n", c, vy_err_name((vy_err)c), names[c]);
			vy_test_failures++;
		}
	}
	CHECK(strcmp(vy_err_name(VY_ENOSPC), "enospc") == 0);
	CHECK(strcmp(vy_err_name(VY_EXDEV), "exdev") == 0);
	CHECK(strcmp(vy_err_name((vy_err)999), "unknown") == 0);
}

static void keep_first_keeps_the_first_failure(void)
{
	vy_error a, b, dst;
	vy_fail(&a, VY_EBUSY, "wait", "first");
	vy_fail(&b, VY_EDEVICE, "check", "second");
	vy_error_clear(&dst);
	vy_err first = VY_OK;
	vy_error_keep_first(&first, VY_OK, &dst, &a); /* a success records nothing */
	CHECK_EQ(first, VY_OK);
	CHECK_EQ(dst.msg[0], '\0');
	vy_error_keep_first(&first, VY_EBUSY, &dst, &a);
	CHECK_EQ(first, VY_EBUSY);
	CHECK_EQ(dst.code, VY_EBUSY);
	CHECK(strcmp(dst.msg, "first (Fix: wait)") == 0);
	vy_error_keep_first(&first, VY_EDEVICE, &dst, &b);
	CHECK_EQ(first, VY_EBUSY);
	CHECK(strcmp(dst.msg, "first (Fix: wait)") == 0);
	vy_error_keep_first(&first, VY_OK, &dst, &b);
	CHECK_EQ(first, VY_EBUSY);
	/* Without message slots only the code is kept. */
	vy_err f2 = VY_OK;
	vy_error_keep_first(&f2, VY_ENOSPC, NULL, &a);
	CHECK_EQ(f2, VY_ENOSPC);
	vy_err f3 = VY_OK;
	vy_error_keep_first(&f3, VY_ENOENT, &dst, NULL);
	CHECK_EQ(f3, VY_ENOENT);
	CHECK(strcmp(dst.msg, "first (Fix: wait)") == 0);
}

/* ---- telemetry -------------------------------------------------------- */

#define KIND_IS_COUNTER_COUNTER 1
#define KIND_IS_COUNTER_GAUGE 0

static const char *const tel_names[] = {
#define NAME(name, kind, help) #name,
	VY_TELEMETRY_FIELDS(NAME)
#undef NAME
};
#define TEL_FIELDS (sizeof(tel_names) / sizeof(tel_names[0]))

/* Every field a distinct value: 1000 + its position. */
static void distinct_snapshot(vy_telemetry_snapshot *s)
{
	uint64_t v = 1000;
#define SETV(name, kind, help) s->name = v++;
	VY_TELEMETRY_FIELDS(SETV)
#undef SETV
}

/* How many times `line` appears as a whole line of `text`. */
static int count_lines(const char *text, const char *line)
{
	int n = 0;
	size_t len = strlen(line);
	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t l = nl ? (size_t)(nl - p) : strlen(p);
		n += l == len && memcmp(p, line, len) == 0;
		p += l + (nl != NULL);
	}
	return n;
}

static void telemetry_format_prints_every_key_once(void)
{
	vy_telemetry_snapshot s;
	distinct_snapshot(&s);
	s.staging_cached_bytes = UINT64_MAX;
	static char buf[8192];
	size_t n = vy_telemetry_format(&s, buf, sizeof(buf));
	CHECK_EQ(n, strlen(buf));
	CHECK(n > 0 && buf[n - 1] == '\n');
	size_t lines = 0;
	for (size_t i = 0; i < n; i++)
		lines += buf[i] == '\n';
	CHECK_EQ(lines, TEL_FIELDS);
	for (size_t i = 0; i < TEL_FIELDS; i++) {
		char want[96];
		uint64_t v = strcmp(tel_names[i], "staging_cached_bytes") ? 1000 + i : UINT64_MAX;
		snprintf(want, sizeof(want), "%s %" PRIu64, tel_names[i], v);
		if (count_lines(buf, want) != 1) {
			fprintf(stderr, "  '%s' appears %d times\n", want, count_lines(buf, want));
			vy_test_failures++;
		}
	}
	/* The documented names, spelled out (a rename must show up here). */
	static const char *const keys[] = {
		"h2d_bytes", "h2d_ops", "d2h_bytes", "d2h_ops", "syncs", "pool_hits", "pool_misses",
		"staging_hits", "staging_misses", "resident_bytes", "pooled_bytes", "staging_cached_bytes",
	};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		int found = 0;
		for (const char *p = buf; (p = strstr(p, keys[k])) != NULL; p++)
			found += (p == buf || p[-1] == '\n') && p[strlen(keys[k])] == ' ';
		if (found != 1) {
			fprintf(stderr, "  key %s found %d times\n", keys[k], found);
			vy_test_failures++;
		}
	}
	CHECK(count_lines(buf, "staging_cached_bytes 18446744073709551615") == 1);
}

static void telemetry_format_truncates_like_snprintf(void)
{
	vy_telemetry_snapshot s;
	distinct_snapshot(&s);
	static char full[8192];
	size_t need = vy_telemetry_format(&s, full, sizeof(full));
	CHECK_EQ(need, strlen(full));
	CHECK_EQ(vy_telemetry_format(&s, NULL, 0), need); /* measure only */
	char *buf = malloc(need + 16);
	CHECK(buf != NULL);
	if (!buf)
		return;
	size_t bad = 0;
	for (size_t cap = 1; cap <= need + 1; cap++) {
		memset(buf, '#', need + 16);
		size_t r = vy_telemetry_format(&s, buf, cap);
		size_t kept = cap - 1 < need ? cap - 1 : need;
		bad += r != need;                            /* what the full text needs */
		bad += strlen(buf) != kept;                  /* terminated within cap */
		bad += memcmp(buf, full, kept) != 0;         /* a prefix of the full text */
		bad += buf[cap] != '#' || buf[need + 15] != '#'; /* nothing past cap */
	}
	CHECK_EQ(bad, 0);
	memset(buf, '#', need + 16);
	CHECK_EQ(vy_telemetry_format(&s, buf, 10), need);
	CHECK_EQ(strlen(buf), 9);
	CHECK(strncmp(buf, full, 9) == 0);
	free(buf);
}

static void telemetry_reset_zeroes_counters_keeps_gauges(void)
{
	vy_telemetry t;
	vy_telemetry_init(&t);
	vy_telemetry_snapshot s;
	vy_telemetry_snapshot_take(&t, &s);
	size_t nonzero = 0;
#define NONZERO(name, kind, help) nonzero += s.name != 0;
	VY_TELEMETRY_FIELDS(NONZERO)
#undef NONZERO
	CHECK_EQ(nonzero, 0); /* init zeroes everything */
	/* Every field gets a distinct nonzero value. */
	uint64_t v = 1;
#define FILL(name, kind, help) atomic_store(&t.name, v++);
	VY_TELEMETRY_FIELDS(FILL)
#undef FILL
	vy_telemetry_add(&t, h2d_bytes, 100);
	vy_telemetry_set(&t, resident_bytes, 5000);
	vy_telemetry_set(&t, pooled_bytes, 7000);
	vy_telemetry_reset(&t);
	vy_telemetry_snapshot_take(&t, &s);
	CHECK_EQ(s.h2d_bytes, 0);
	CHECK_EQ(s.d2h_ops, 0);
	CHECK_EQ(s.syncs, 0);
	CHECK_EQ(s.pool_hits, 0);
	CHECK_EQ(s.staging_misses, 0);
	CHECK_EQ(s.resident_bytes, 5000);
	CHECK_EQ(s.pooled_bytes, 7000);
	size_t bad = 0;
	v = 1;
#define AFTER(name, kind, help)                                                            \
	if (strcmp(#name, "resident_bytes") && strcmp(#name, "pooled_bytes"))        \
		bad += s.name != (KIND_IS_COUNTER_##kind ? 0 : v);                   \
	v++;
	VY_TELEMETRY_FIELDS(AFTER)
#undef AFTER
	CHECK_EQ(bad, 0);
	CHECK(s.staging_cached_bytes != 0 && s.resident_buffers != 0 && s.pooled_buffers != 0);
	/* Counting starts again from zero. */
	vy_telemetry_add(&t, h2d_bytes, 3);
	vy_telemetry_snapshot_take(&t, &s);
	CHECK_EQ(s.h2d_bytes, 3);
}

/* A successor's counters over the dead daemon's: counts stay, gauges go
 * (it sets them from what it holds); the layout names the field list. */
static void telemetry_clear_gauges_keeps_counts(void)
{
	vy_telemetry t;
	vy_telemetry_init(&t);
	uint64_t v = 1;
#define FILL(name, kind, help) atomic_store(&t.name, v++);
	VY_TELEMETRY_FIELDS(FILL)
#undef FILL
	vy_telemetry_clear_gauges(&t);
	vy_telemetry_snapshot s;
	vy_telemetry_snapshot_take(&t, &s);
	size_t bad = 0, gauges = 0;
	v = 1;
#define AFTER(name, kind, help)                                                \
	bad += s.name != (KIND_IS_COUNTER_##kind ? v : 0);                     \
	gauges += !KIND_IS_COUNTER_##kind;                                     \
	v++;
	VY_TELEMETRY_FIELDS(AFTER)
#undef AFTER
	CHECK_EQ(bad, 0);
	CHECK(gauges >= 6);
	CHECK_EQ(s.h2d_bytes, 1); /* the first field, a counter */
	CHECK_EQ(s.resident_bytes, 0);
	CHECK_EQ(vy_telemetry_layout(), vy_telemetry_layout());
	CHECK(vy_telemetry_layout() != 0xcbf29ce484222325ull); /* not the empty list's */
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(size_parse_accepts_numbers_and_units),
		TEST_CASE(size_parse_refuses_overflow),
		TEST_CASE(size_parse_refuses_garbage),
		TEST_CASE(size_format_renders_binary_units),
		TEST_CASE(options_each_key_sets_its_field),
		TEST_CASE(options_refuse_bad_values),
		TEST_CASE(options_are_all_or_none),
		TEST_CASE(options_name_the_devices),
		TEST_CASE(fail_formats_message_and_hint),
		TEST_CASE(long_message_keeps_the_whole_hint),
		TEST_CASE(config_fs_keys_and_defaults),
		TEST_CASE(config_file_sections_and_comments),
		TEST_CASE(config_file_errors_name_file_and_line),
		TEST_CASE(config_ini_round_trips),
		TEST_CASE(options_table_matches_the_settings),
		TEST_CASE(errno_mapping),
		TEST_CASE(error_names),
		TEST_CASE(keep_first_keeps_the_first_failure),
		TEST_CASE(telemetry_format_prints_every_key_once),
		TEST_CASE(telemetry_format_truncates_like_snprintf),
		TEST_CASE(telemetry_reset_zeroes_counters_keeps_gauges),
		TEST_CASE(telemetry_clear_gauges_keeps_counts),
	};
	return vy_test_main("config", cases, sizeof(cases) / sizeof(cases[0]));
}
