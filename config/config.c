/* Configuration: defaults, INI files (inih), -o key=value. */
#include "config/config.h"
#include "config/options.h"
#include "config/size.h"
#include "core/checked.h"

#include <ctype.h>
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FIX_SIZE "write a whole number of bytes, optionally with K, M, G or T, e.g. 512M"
#define MAX_WRITE_MIN 4096u
#define MAX_WRITE_MAX (1u << 20) /* what the kernel's max_pages allows */

void vy_config_defaults(vy_config *c)
{
	memset(c, 0, sizeof(*c));
	vy_core_options_default(&c->core);
	c->core.store.budget_percent = 90; /* what the store assumes, said */
	c->max_write = MAX_WRITE_MAX;
	c->page_cache = true;
	c->write_behind = true;
	c->readahead = true;
	c->idle_threads = 2;
	c->survive = true;
	c->survive_log = 64ull << 20;
	c->survive_standby = true;
	c->kernel_cache = 256ull << 20;
	c->allow_other = false;
	c->launch_timeout_ms = 60000;
	c->writeback_delay_ms = 5000;
	c->host_devices = 1;
	c->peer = true;
	c->xattr_budget = 64ull << 20;
	/* As tmpfs's nr_inodes: half the pages of RAM. */
	long pages = sysconf(_SC_PHYS_PAGES);
	c->max_inodes = pages > 0 ? (uint64_t)pages / 2 : 1u << 20;
}

static vy_err bad_value(vy_error *e, const char *key, const char *value, const char *allowed)
{
	return vy_fail(e, VY_EINVAL, allowed, "bad value '%s' for %s", value, key);
}

/* A duration: a whole number with ms, s, m or h (plain: seconds). */
static vy_err duration_value(const char *key, const char *value, uint64_t *ms, vy_error *e)
{
	const char *fix = "write a whole number with ms, s, m or h, e.g. 60s or 500ms; 0 means no limit";
	char *end;
	errno = 0;
	if (!isdigit((unsigned char)value[0]))
		return bad_value(e, key, value, fix);
	unsigned long long n = strtoull(value, &end, 10);
	uint64_t unit = 0;
	if (!strcmp(end, "ms"))
		unit = 1;
	else if (!strcmp(end, "s") || !*end)
		unit = 1000;
	else if (!strcmp(end, "m"))
		unit = 60000;
	else if (!strcmp(end, "h"))
		unit = 3600000;
	uint64_t out;
	if (errno || !unit || !vy_mul_u64(n, unit, &out) || out > (uint64_t)INT32_MAX)
		return bad_value(e, key, value, fix);
	*ms = out;
	return VY_OK;
}

static vy_err size_value(const char *key, const char *value, uint64_t *out, vy_error *e)
{
	vy_error why;
	if (vy_size_parse(value, out, &why) != VY_OK)
		return bad_value(e, key, value, FIX_SIZE);
	return VY_OK;
}

static vy_err bool_value(const char *key, const char *value, bool *out, vy_error *e)
{
	static const char *const yes[] = {"on", "yes", "true", "1"}, *const no[] = {"off", "no", "false", "0"};
	for (size_t i = 0; i < 4; i++) {
		if (!strcmp(value, yes[i])) {
			*out = true;
			return VY_OK;
		}
		if (!strcmp(value, no[i])) {
			*out = false;
			return VY_OK;
		}
	}
	return bad_value(e, key, value, "use on or off");
}

/* A whole decimal number, digits only (no sign, no spaces). */
static bool digits(const char *s, unsigned long long max, unsigned long long *out)
{
	if (!isdigit((unsigned char)s[0]))
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

/* devices=all or a list of distinct ordinals. */
static vy_err set_devices(vy_config *c, const char *key, const char *value, vy_error *e)
{
	const char *fix = "use devices=all or a list of device numbers from `nvidia-smi -L`, e.g. devices=0,1";
	if (!strcmp(value, "all")) {
		c->devices_all = true;
		c->ndevices = 0;
		return VY_OK;
	}
	/* vy_config_parse_list gives the whole list past its commas; '+'
	 * and ':' separate too. */
	unsigned n = 0;
	int list[VY_DEVICES_MAX];
	const char *at = value;
	for (;;) {
		char num[16];
		size_t len = strcspn(at, ",+:");
		unsigned long long v;
		if (len == 0 || len >= sizeof(num))
			return bad_value(e, key, value, fix);
		memcpy(num, at, len);
		num[len] = '\0';
		if (!digits(num, INT_MAX, &v))
			return bad_value(e, key, value, fix);
		for (unsigned i = 0; i < n; i++)
			if (list[i] == (int)v)
				return vy_fail(e, VY_EINVAL, fix, "bad value '%s' for %s: device %llu is named twice", value,
					       key, v);
		if (n == VY_DEVICES_MAX)
			return vy_fail(e, VY_EINVAL, "name at most 16 devices", "bad value '%s' for %s: too many devices",
				       value, key);
		list[n++] = (int)v;
		if (!at[len])
			break;
		at += len + 1;
	}
	c->devices_all = false;
	c->ndevices = n;
	memcpy(c->devices, list, n * sizeof(*list));
	return VY_OK;
}

static vy_err set_budget(vy_config *c, const char *key, const char *value, vy_error *e)
{
	size_t len = strlen(value);
	if (len > 1 && value[len - 1] == '%') {
		char num[32];
		unsigned long long pct;
		if (len - 1 >= sizeof(num))
			return bad_value(e, key, value, "use a percentage from 1% to 100%, or a size such as 8G");
		memcpy(num, value, len - 1);
		num[len - 1] = '\0';
		if (!digits(num, 100, &pct) || pct < 1)
			return bad_value(e, key, value, "use a percentage from 1% to 100%, or a size such as 8G");
		c->core.store.budget_bytes = 0;
		c->core.store.budget_percent = (unsigned)pct;
		return VY_OK;
	}
	uint64_t v;
	vy_err rc = size_value(key, value, &v, e);
	if (rc == VY_OK && v == 0)
		return bad_value(e, key, value, "use a percentage such as 90% or a size such as 8G");
	if (rc == VY_OK) {
		c->core.store.budget_bytes = v;
		c->core.store.budget_percent = 0;
	}
	return rc;
}

vy_err vy_config_set(vy_config *c, const char *key, const char *value, vy_error *e)
{
	vy_config next = *c;
	vy_err rc;
	unsigned long long n = 0;
	uint64_t v = 0;
	if (!strcmp(key, "backend")) {
		rc = vy_backend_parse(value, &next.core.device.backend)
			     ? VY_OK
			     : bad_value(e, key, value, "use backend=auto, backend=cuda or backend=host");
	} else if (!strcmp(key, "ordinal")) {
		rc = digits(value, INT_MAX, &n) ? VY_OK
						: bad_value(e, key, value, "use a device number from `nvidia-smi -L`, e.g. ordinal=0");
		next.core.device.ordinal = (int)n;
	} else if (!strcmp(key, "devices")) {
		rc = set_devices(&next, key, value, e);
	} else if (!strcmp(key, "host_devices")) {
		rc = digits(value, VY_DEVICES_MAX, &n) && n >= 1
			     ? VY_OK
			     : bad_value(e, key, value, "use a count from 1 to 16, e.g. host_devices=3");
		next.host_devices = (unsigned)n;
	} else if (!strcmp(key, "peer")) {
		rc = bool_value(key, value, &next.peer, e);
	} else if (!strcmp(key, "host_memory")) {
		rc = size_value(key, value, &v, e);
		long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
		uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
		if (rc == VY_OK && v < (1u << 20))
			rc = bad_value(e, key, value, "give the host backend at least 1M, e.g. host_memory=4G");
		else if (rc == VY_OK && ram && v > ram)
			rc = vy_fail(e, VY_EINVAL, "give at most the machine's memory (free -h), e.g. host_memory=4G",
				     "bad value '%s' for host_memory: this machine has %llu bytes of memory", value,
				     (unsigned long long)ram);
		next.core.device.host_memory = v;
	} else if (!strcmp(key, "resident_budget")) {
		rc = set_budget(&next, key, value, e);
	} else if (!strcmp(key, "pool_budget")) {
		rc = size_value(key, value, &next.core.store.pool_cap, e);
		next.pool_budget_set = true;
	} else if (!strcmp(key, "staging_cache")) {
		rc = size_value(key, value, &next.core.staging_cache, e);
	} else if (!strcmp(key, "max_write")) {
		rc = size_value(key, value, &v, e);
		if (rc == VY_OK && (v < MAX_WRITE_MIN || v > MAX_WRITE_MAX))
			rc = bad_value(e, key, value, "use a size from 4K to 1M, e.g. max_write=1M");
		next.max_write = v;
	} else if (!strcmp(key, "page_cache")) {
		rc = bool_value(key, value, &next.page_cache, e);
	} else if (!strcmp(key, "write_behind")) {
		rc = bool_value(key, value, &next.write_behind, e);
	} else if (!strcmp(key, "readahead")) {
		rc = bool_value(key, value, &next.readahead, e);
	} else if (!strcmp(key, "survive")) {
		rc = bool_value(key, value, &next.survive, e);
		next.survive_set = true;
	} else if (!strcmp(key, "survive_standby")) {
		rc = bool_value(key, value, &next.survive_standby, e);
	} else if (!strcmp(key, "survive_log")) {
		rc = size_value(key, value, &v, e);
		if (rc == VY_OK && (v < (64u << 10) || v > (1u << 30) || (v & (v - 1))))
			rc = bad_value(e, key, value, "use a power of two from 64K to 1G, e.g. survive_log=64M");
		next.survive_log = v;
	} else if (!strcmp(key, "idle_threads")) {
		rc = digits(value, 10, &n) && n != 1
			     ? VY_OK
			     : bad_value(e, key, value, "use a count from 2 to 10, or 0 for libfuse's own loop, e.g. idle_threads=2");
		next.idle_threads = (unsigned)n;
	} else if (!strcmp(key, "kernel_cache")) {
		rc = size_value(key, value, &next.kernel_cache, e);
	} else if (!strcmp(key, "allow_other")) {
		rc = bool_value(key, value, &next.allow_other, e);
	} else if (!strcmp(key, "vyre_dir")) {
		rc = !strcmp(value, "hidden") || !strcmp(value, "visible")
			     ? VY_OK
			     : bad_value(e, key, value, "use vyre_dir=hidden or vyre_dir=visible");
		next.vyre_dir_visible = !strcmp(value, "visible");
	} else if (!strcmp(key, "kernel_cflags")) {
		size_t len = strlen(value);
		rc = len < sizeof(next.kernel_cflags) && !strchr(value, '\n')
			     ? VY_OK
			     : bad_value(e, key, value, "give NVRTC options on one line, under 256 characters, e.g. "
							"kernel_cflags=-use_fast_math");
		if (rc == VY_OK)
			memcpy(next.kernel_cflags, value, len + 1);
	} else if (!strcmp(key, "xattr_budget")) {
		rc = size_value(key, value, &next.xattr_budget, e);
	} else if (!strcmp(key, "max_inodes")) {
		unsigned long long n;
		char *end;
		errno = 0;
		n = strtoull(value, &end, 10);
		rc = isdigit((unsigned char)value[0]) && !*end && !errno && n >= 16
			     ? VY_OK
			     : bad_value(e, key, value, "give a count of at least 16, e.g. max_inodes=1000000");
		next.max_inodes = n;
	} else if (!strcmp(key, "launch_timeout")) {
		rc = duration_value(key, value, &next.launch_timeout_ms, e);
	} else if (!strcmp(key, "backing")) {
		size_t len = strlen(value);
		rc = value[0] == '/' && len < sizeof(next.backing) && !strchr(value, '\n')
			     ? VY_OK
			     : bad_value(e, key, value, "give the directory as an absolute path, e.g. backing=/srv/models");
		if (rc == VY_OK)
			memcpy(next.backing, value, len + 1);
	} else if (!strcmp(key, "writeback_delay")) {
		rc = duration_value(key, value, &next.writeback_delay_ms, e);
	} else {
		char keys[512] = "use one of: ";
		size_t at = strlen(keys);
		for (size_t i = 0; i < vy_options_count; i++) {
			int n = snprintf(keys + at, sizeof(keys) - at, "%s%s", i ? ", " : "", vy_options[i].key);
			if (n < 0 || (size_t)n >= sizeof(keys) - at)
				break;
			at += (size_t)n;
		}
		rc = vy_fail(e, VY_EINVAL, keys, "unknown option '%s'", key);
	}
	if (rc == VY_OK)
		*c = next;
	return rc;
}

vy_err vy_config_parse_list(vy_config *c, const char *list, vy_error *e)
{
	char *copy = strdup(list);
	if (!copy)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot copy the option list");
	vy_config next = *c;
	vy_err rc = VY_OK;
	char *save = NULL;
	char devs[128] = ""; /* devices=0,1: the list goes on past a comma */
	for (char *item = strtok_r(copy, ",", &save); item && rc == VY_OK; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		size_t dl = strlen(devs);
		if (!eq && dl && isdigit((unsigned char)item[0]) && dl + strlen(item) + 2 < sizeof(devs)) {
			devs[dl] = ',';
			strcpy(devs + dl + 1, item);
			rc = vy_config_set(&next, "devices", devs, e);
			continue;
		}
		devs[0] = '\0';
		if (eq && !strncmp(item, "devices=", 8) && strlen(eq + 1) < sizeof(devs))
			strcpy(devs, eq + 1);
		if (!eq) {
			rc = vy_fail(e, VY_EINVAL, "write options as key=value, e.g. -o backend=host",
				     "option '%s' has no value", item);
			break;
		}
		*eq = '\0';
		rc = vy_config_set(&next, item, eq + 1, e);
	}
	free(copy);
	if (rc == VY_OK)
		*c = next;
	return rc;
}

typedef struct ini_state {
	vy_config next;
	vy_error why; /* the first key's error */
	bool failed;
} ini_state;

static int on_ini(void *user, const char *section, const char *name, const char *value)
{
	ini_state *s = user;
	if (s->failed)
		return 0;
	if (section[0] && strcmp(section, VY_CONFIG_SECTION) != 0)
		vy_fail(&s->why, VY_EINVAL, "put the keys in a [" VY_CONFIG_SECTION "] section, or at the top",
			"unknown section [%s]", section);
	else if (vy_config_set(&s->next, name, value, &s->why) == VY_OK)
		return 1;
	s->failed = true;
	return 0;
}

vy_err vy_config_load_file(vy_config *c, const char *path, vy_error *e)
{
	/* O_NONBLOCK: a FIFO (or a device) named by mistake must not hang the
	 * mount waiting for a writer; only a regular file is read. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return vy_fail(e, errno == ENOENT ? VY_ENOENT : VY_EINVAL, "give -o config= a readable INI file",
			       "cannot read config file %s: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return vy_fail(e, VY_EINVAL, "give -o config= a regular INI file", "config file %s is not a regular file",
			       path);
	}
	enum { CONFIG_MAX = 1 << 20 };
	char *text = st.st_size <= CONFIG_MAX ? malloc((size_t)st.st_size + 1) : NULL;
	ssize_t got = text ? read(fd, text, (size_t)st.st_size) : -1;
	close(fd);
	if (got < 0 || (off_t)got != st.st_size) {
		free(text);
		return vy_fail(e, VY_EINVAL, "give -o config= an INI file of at most 1 MiB",
			       "cannot read config file %s whole", path);
	}
	text[got] = '\0';
	if (memchr(text, '\0', (size_t)got)) {
		free(text);
		return vy_fail(e, VY_EINVAL, "give -o config= a text INI file", "config file %s is not text (it holds NUL bytes)",
			       path);
	}
	ini_state s = {.next = *c};
	int line = ini_parse_string(text, on_ini, &s);
	free(text);
	if (s.failed) {
		vy_error_prefix(&s.why, "%s line %d: ", path, line);
		if (e)
			*e = s.why;
		return s.why.code;
	}
	if (line != 0)
		return vy_fail(e, VY_EINVAL,
			       "write one `key = value` a line (at most 200 characters), in a [" VY_CONFIG_SECTION
			       "] section or at the top",
			       "%s line %d: not `key = value`", path, line);
	*c = s.next;
	return VY_OK;
}

/* Append to buf like snprintf would, tracking the length needed. */
static void put(char *buf, size_t cap, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void put(char *buf, size_t cap, size_t *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(*at < cap ? buf + *at : NULL, *at < cap ? cap - *at : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at += (size_t)n;
}

/* The value of setting `key` as .vyre/config writes it, into v; false when
 * it is left to a computed default (the table's words say which) or is not
 * a setting of the INI file (config). */
static bool ini_value(const vy_config *c, const char *key, char *v, size_t cap)
{
	const vy_core_options *o = &c->core;
	if (!strcmp(key, "backend"))
		snprintf(v, cap, "%s", vy_backend_name(o->device.backend));
	else if (!strcmp(key, "ordinal"))
		snprintf(v, cap, "%d", o->device.ordinal);
	else if (!strcmp(key, "devices") && c->devices_all)
		snprintf(v, cap, "all");
	else if (!strcmp(key, "devices") && c->ndevices) {
		size_t at = 0;
		v[0] = '\0';
		for (unsigned i = 0; i < c->ndevices; i++)
			put(v, cap, &at, "%s%d", i ? "," : "", c->devices[i]);
	} else if (!strcmp(key, "host_devices"))
		snprintf(v, cap, "%u", c->host_devices);
	else if (!strcmp(key, "peer"))
		snprintf(v, cap, "%s", c->peer ? "on" : "off");
	else if (!strcmp(key, "host_memory") && o->device.host_memory)
		snprintf(v, cap, "%llu", (unsigned long long)o->device.host_memory);
	else if (!strcmp(key, "resident_budget") && o->store.budget_bytes)
		snprintf(v, cap, "%llu", (unsigned long long)o->store.budget_bytes);
	else if (!strcmp(key, "resident_budget"))
		snprintf(v, cap, "%u%%", o->store.budget_percent);
	else if (!strcmp(key, "pool_budget") && c->pool_budget_set)
		snprintf(v, cap, "%llu", (unsigned long long)o->store.pool_cap);
	else if (!strcmp(key, "staging_cache"))
		snprintf(v, cap, "%llu", (unsigned long long)o->staging_cache);
	else if (!strcmp(key, "max_write"))
		snprintf(v, cap, "%llu", (unsigned long long)c->max_write);
	else if (!strcmp(key, "page_cache"))
		snprintf(v, cap, "%s", c->page_cache ? "on" : "off");
	else if (!strcmp(key, "write_behind"))
		snprintf(v, cap, "%s", c->write_behind ? "on" : "off");
	else if (!strcmp(key, "readahead"))
		snprintf(v, cap, "%s", c->readahead ? "on" : "off");
	else if (!strcmp(key, "survive") && c->survive_set) /* else the default: on, off where it cannot be */
		snprintf(v, cap, "%s", c->survive ? "on" : "off");
	else if (!strcmp(key, "survive_standby"))
		snprintf(v, cap, "%s", c->survive_standby ? "on" : "off");
	else if (!strcmp(key, "survive_log"))
		snprintf(v, cap, "%llu", (unsigned long long)c->survive_log);
	else if (!strcmp(key, "idle_threads"))
		snprintf(v, cap, "%u", c->idle_threads);
	else if (!strcmp(key, "kernel_cache"))
		snprintf(v, cap, "%llu", (unsigned long long)c->kernel_cache);
	else if (!strcmp(key, "allow_other"))
		snprintf(v, cap, "%s", c->allow_other ? "on" : "off");
	else if (!strcmp(key, "vyre_dir"))
		snprintf(v, cap, "%s", c->vyre_dir_visible ? "visible" : "hidden");
	else if (!strcmp(key, "launch_timeout"))
		snprintf(v, cap, "%llums", (unsigned long long)c->launch_timeout_ms);
	else if (!strcmp(key, "xattr_budget"))
		snprintf(v, cap, "%llu", (unsigned long long)c->xattr_budget);
	else if (!strcmp(key, "kernel_cflags") && c->kernel_cflags[0])
		snprintf(v, cap, "%s", c->kernel_cflags);
	else if (!strcmp(key, "max_inodes"))
		snprintf(v, cap, "%llu", (unsigned long long)c->max_inodes);
	else if (!strcmp(key, "backing") && c->backing[0])
		snprintf(v, cap, "%s", c->backing);
	else if (!strcmp(key, "writeback_delay"))
		snprintf(v, cap, "%llums", (unsigned long long)c->writeback_delay_ms);
	else
		return false;
	return true;
}

size_t vy_config_format_ini(const vy_config *c, char *buf, size_t cap)
{
	size_t at = 0;
	if (cap)
		buf[0] = '\0';
	put(buf, cap, &at, "[%s]\n", VY_CONFIG_SECTION);
	for (size_t i = 0; i < vy_options_count; i++) {
		const vy_option_doc *d = &vy_options[i];
		char v[4200]; /* backing= may be a long path */
		if (ini_value(c, d->key, v, sizeof(v)))
			put(buf, cap, &at, "%s = %s\n", d->key, v);
		else if (strcmp(d->key, "config") != 0)
			put(buf, cap, &at, "# %s: %s\n", d->key, d->dflt);
	}
	return at;
}
