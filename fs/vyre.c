/* .vyre/: the control directory and the text of its files. */
#include "fs/vyre.h"
#include "persist/writer.h"
#include "fs/kind.h"
#include "fs/seqlog.h"
#include "tier/tier.h"
#include "daemon/session.h"

#include <errno.h>
#include <fcntl.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static vy_inode *add(vy_fs *fs, vy_inode *dir, const char *name, vy_kind kind, vy_virtual virt, mode_t mode)
{
	vy_inode *in = vy_inode_new(vy_fs_ns(fs), kind, mode, fs->owner, fs->group);
	if (!in)
		return NULL;
	if (!vy_dir_add(&dir->dir, name, in->ino))
		return NULL; /* vy_fs_destroy frees the inode with the table */
	in->virt = virt;
	in->fixed = true;
	in->nlink = kind == VY_DIR ? 2 : 1;
	if (kind == VY_DIR) {
		in->parent = dir->ino;
		dir->nlink++;
	}
	return in;
}

/* The entries and their modes: docs/manual.md's table and the man page's
 * THE CONTROL DIRECTORY list them (tests/cli/docs_test.sh checks both
 * against a mount). */
vy_err vy_vyre_build(vy_fs *fs, vy_inode *root, vy_error *e)
{
	vy_inode *v = add(fs, root, VY_VYRE_NAME, VY_DIR, VY_V_NONE, S_IFDIR | 0755);
	if (v && !fs->cfg.vyre_dir_visible)
		root->nlink--; /* the root's links count the directories it lists */
	vy_inode *m = v ? add(fs, v, "modules", VY_DIR, VY_V_NONE, S_IFDIR | 0700) : NULL;
	if (!v || !m || !add(fs, v, "ctl", VY_VIRTUAL, VY_V_CTL, S_IFREG | 0600) ||
	    /* the mounting user's, as ctl: its lines name files and pids */
	    !add(fs, v, "log", VY_VIRTUAL, VY_V_LOG, S_IFREG | 0600) ||
	    !add(fs, v, "stats", VY_VIRTUAL, VY_V_STATS, S_IFREG | 0444) ||
	    !add(fs, v, "metrics", VY_VIRTUAL, VY_V_METRICS, S_IFREG | 0444) ||
	    !add(fs, v, "device", VY_VIRTUAL, VY_V_DEVICE, S_IFREG | 0444) ||
	    !add(fs, v, "config", VY_VIRTUAL, VY_V_CONFIG, S_IFREG | 0444) ||
	    !add(fs, v, "socket", VY_VIRTUAL, VY_V_SOCKET, S_IFREG | 0444) ||
	    /* the mounting user's: a write hands the mount to a new daemon */
	    !add(fs, v, "upgrade", VY_VIRTUAL, VY_V_UPGRADE, S_IFREG | 0200))
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot build the .vyre directory");
	fs->vyre_ino = v->ino;
	fs->modules_ino = m->ino;
	return VY_OK;
}

bool vy_vyre_listed(const vy_fs *fs, uint64_t dir, uint64_t ino)
{
	return fs->cfg.vyre_dir_visible || dir != FUSE_ROOT_ID || ino != fs->vyre_ino;
}

typedef struct text {
	char *buf;
	size_t len, cap;
	bool failed;
} text;

static void add_text(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_text(text *t, const char *fmt, ...)
{
	for (int tries = 0; tries < 2 && !t->failed; tries++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->failed = true;
			return;
		}
		if (t->buf && (size_t)n < t->cap - t->len) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = (t->cap ? t->cap : 1024) * 2 + (size_t)n;
		char *b = realloc(t->buf, cap);
		if (!b) {
			t->failed = true;
			return;
		}
		t->buf = b;
		t->cap = cap;
	}
}

/* Every device's snapshot summed, and the budgets. */
static void totals(vy_fs *fs, vy_telemetry_snapshot *s, uint64_t *budget)
{
	memset(s, 0, sizeof(*s));
	*budget = 0;
	for (unsigned d = 0; d < fs->ndev; d++) {
		vy_telemetry_snapshot one;
		vy_telemetry_snapshot_take(fs->dev[d].core->tel, &one);
		vy_telemetry_snapshot_add(s, &one);
		vy_store_usage u;
		vy_store_usage_get(fs->dev[d].core->store, &u);
		*budget += u.budget;
	}
}

/* `key value` lines of a snapshot, each key after `prefix`. */
static void add_snapshot(text *t, const vy_telemetry_snapshot *s, const char *prefix)
{
	size_t need = vy_telemetry_format(s, NULL, 0);
	char *body = malloc(need + 1);
	if (!body) {
		t->failed = true;
		return;
	}
	vy_telemetry_format(s, body, need + 1);
	for (char *line = body, *next; *line; line = next) {
		next = strchr(line, '\n');
		next = next ? next + 1 : line + strlen(line);
		add_text(t, "%s%.*s", prefix, (int)(next - line), line);
	}
	free(body);
}

/* What the kernel holds, as this daemon counts it (survive=on takes it
 * over: docs/survive.md). */
typedef struct held {
	uint64_t handles, lookups, unmatched;
} held;

/* Read whole, without ns: a stat of .vyre/stats renders it, and an entry
 * reply stats under ns. */
static void held_now(vy_fs *fs, held *h)
{
	*h = (held){__atomic_load_n(&fs->handles.live, __ATOMIC_RELAXED), __atomic_load_n(&fs->lookups, __ATOMIC_RELAXED),
		    __atomic_load_n(&fs->forgets_unmatched, __ATOMIC_RELAXED)};
}

/* The mount's totals; over several devices each device's own keys too,
 * as devN.KEY (N: the device's ordinal). */
/* Who serves (survive=on, docs/survive.md): microseconds from the last
 * daemon's death to its successor's first answer, 0 before one. */
static uint64_t between_us(uint64_t from, uint64_t to)
{
	return from && to > from ? (to - from) / 1000 : 0;
}

static uint64_t takeover_us(vy_fs *fs)
{
	return between_us(fs->takeovers ? fs->death_ns : 0, vy_session_first_answer_ns());
}

/* The last takeover's steps, in microseconds: the death to the successor
 * holding the keeper's fds, its devices opened (the driver's start), the
 * namespace and its memory made again. */
enum { STEPS = 3 };
static const char *const step_name[STEPS] = {"start", "devices", "replay"};
static const char *const step_help[STEPS] = {"the death to the successor's start",
					     "the successor's devices opened (the driver's start)",
					     "the namespace and its memory made again"};

static void takeover_steps(vy_fs *fs, uint64_t us[STEPS])
{
	us[0] = between_us(fs->takeovers ? fs->death_ns : 0, fs->started_ns);
	us[1] = between_us(fs->started_ns, fs->devices_ns);
	us[2] = between_us(fs->devices_ns, fs->replayed_ns);
}

static void add_takeover(text *t, vy_fs *fs)
{
	uint64_t us[STEPS];
	takeover_steps(fs, us);
	add_text(t, "takeover_us %" PRIu64 "\n", takeover_us(fs));
	for (int i = 0; i < STEPS; i++)
		add_text(t, "takeover_%s_us %" PRIu64 "\n", step_name[i], us[i]);
}

/* backing=DIR: the tier's counters (tier/stats.c). */
static void add_tier(text *t, vy_fs *fs, bool prometheus)
{
	if (!fs->tier)
		return;
	char buf[4096];
	size_t n = vy_tier_stats_format(&fs->tier->stats, prometheus, buf, sizeof(buf));
	if (n < sizeof(buf))
		add_text(t, "%s", buf);
	else
		t->failed = true;
}

static void render_stats(vy_fs *fs, text *t)
{
	vy_telemetry_snapshot s;
	uint64_t budget;
	totals(fs, &s, &budget);
	add_snapshot(t, &s, "");
	add_text(t, "budget_bytes %" PRIu64 "\n", budget);
	add_text(t, "pid %d\nkeeper_pid %d\nstandby_pid %d\ntakeovers %" PRIu64 "\n", (int)getpid(),
		 atomic_load(&fs->keeper_pid), atomic_load(&fs->standby_pid), fs->takeovers);
	add_takeover(t, fs);
	vy_persist_counts kept; /* this daemon's records for its successor */
	vy_persist_counts_get(fs, &kept);
	add_text(t, "kept_records %" PRIu64 "\nkept_checkpoints %" PRIu64 "\nkept_failures %" PRIu64
		    "\nresends_answered %" PRIu64 "\n",
		 kept.records, kept.checkpoints, kept.failures, kept.resends_answered);
	held h;
	held_now(fs, &h);
	add_text(t, "open_handles %" PRIu64 "\nkernel_lookups %" PRIu64 "\nforgets_unmatched %" PRIu64 "\n", h.handles,
		 h.lookups, h.unmatched);
	add_text(t, "sequences_running %" PRIu64 "\n", atomic_load(&fs->seqlog.running));
	add_tier(t, fs, false);
	if (fs->ndev < 2)
		return;
	for (unsigned d = 0; d < fs->ndev; d++) {
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "dev%d.", fs->dev[d].core->dev->info.ordinal);
		vy_telemetry_snapshot_take(fs->dev[d].core->tel, &s);
		add_snapshot(t, &s, prefix);
		vy_store_usage u;
		vy_store_usage_get(fs->dev[d].core->store, &u);
		add_text(t, "%sbudget_bytes %" PRIu64 "\n", prefix, u.budget);
	}
}

/* A label value as the exposition format writes it: \\, \" and \n escaped. */
static void add_label_value(text *t, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			add_text(t, "\\%c", *v);
		else if (*v == '\n')
			add_text(t, "\\n");
		else
			add_text(t, "%c", *v);
	}
}

/* .vyre/metrics: the snapshot .vyre/stats shows, in the Prometheus text
 * exposition format, then the budget and the device's memory as gauges and
 * the device as an info metric (labels backend, name, ordinal). */
/* Each device's total or free memory: one series, labelled by ordinal
 * when the mount has several. */
static void memory_series(vy_fs *fs, text *t, bool free_memory)
{
	for (unsigned d = 0; d < fs->ndev; d++) {
		vy_device *dev = fs->dev[d].core->dev;
		uint64_t free_b = 0, total = 0;
		vy_error e;
		if (dev->ops->mem_info(dev, &free_b, &total, &e) != VY_OK)
			continue;
		char label[48] = "";
		if (fs->ndev > 1)
			snprintf(label, sizeof(label), "{ordinal=\"%d\"}", dev->info.ordinal);
		add_text(t, "vyrefs_device_memory_%s_bytes%s %" PRIu64 "\n", free_memory ? "free" : "total", label,
			 free_memory ? free_b : total);
	}
}

static void render_metrics(vy_fs *fs, text *t)
{
	vy_telemetry_snapshot s;
	uint64_t budget;
	totals(fs, &s, &budget);
	size_t need = vy_telemetry_format_prometheus(&s, NULL, 0);
	char *body = malloc(need + 1);
	if (!body) {
		t->failed = true;
		return;
	}
	vy_telemetry_format_prometheus(&s, body, need + 1);
	add_text(t, "%s", body);
	free(body);
	add_text(t, "# HELP vyrefs_budget_bytes the resident budget: device bytes files may use\n"
		    "# TYPE vyrefs_budget_bytes gauge\nvyrefs_budget_bytes %" PRIu64 "\n",
		 budget);
	uint64_t us = takeover_us(fs);
	add_text(t, "# HELP vyrefs_pid the daemon serving the mount\n# TYPE vyrefs_pid gauge\nvyrefs_pid %d\n"
		    "# HELP vyrefs_keeper_pid the keeper holding the mount (survive=on), 0: none\n"
		    "# TYPE vyrefs_keeper_pid gauge\nvyrefs_keeper_pid %d\n"
		    "# HELP vyrefs_standby_pid the keeper's standby successor, ready (survive_standby), 0: none\n"
		    "# TYPE vyrefs_standby_pid gauge\nvyrefs_standby_pid %d\n"
		    "# HELP vyrefs_takeovers_total daemons that took over the mount after a death\n"
		    "# TYPE vyrefs_takeovers_total counter\nvyrefs_takeovers_total %" PRIu64 "\n"
		    "# HELP vyrefs_takeover_seconds the last takeover: from the daemon's death to the first answer\n"
		    "# TYPE vyrefs_takeover_seconds gauge\nvyrefs_takeover_seconds %" PRIu64 ".%06" PRIu64 "\n",
		 (int)getpid(), atomic_load(&fs->keeper_pid), atomic_load(&fs->standby_pid), fs->takeovers, us / 1000000,
		 us % 1000000);
	uint64_t steps[STEPS];
	takeover_steps(fs, steps);
	for (int i = 0; i < STEPS; i++)
		add_text(t, "# HELP vyrefs_takeover_%s_seconds the last takeover's step: %s\n"
			    "# TYPE vyrefs_takeover_%s_seconds gauge\nvyrefs_takeover_%s_seconds %" PRIu64 ".%06" PRIu64 "\n",
			 step_name[i], step_help[i], step_name[i], step_name[i], steps[i] / 1000000, steps[i] % 1000000);
	vy_persist_counts kept;
	vy_persist_counts_get(fs, &kept);
	add_text(t, "# HELP vyrefs_kept_records_total records this daemon kept for a successor (survive=on)\n"
		    "# TYPE vyrefs_kept_records_total counter\nvyrefs_kept_records_total %" PRIu64 "\n"
		    "# HELP vyrefs_kept_checkpoints_total checkpoints of the namespace this daemon wrote (survive=on)\n"
		    "# TYPE vyrefs_kept_checkpoints_total counter\nvyrefs_kept_checkpoints_total %" PRIu64 "\n"
		    "# HELP vyrefs_kept_failures_total changes that could not be kept for a successor (survive=on)\n"
		    "# TYPE vyrefs_kept_failures_total counter\nvyrefs_kept_failures_total %" PRIu64 "\n"
		    "# HELP vyrefs_resends_answered_total resent requests answered with the reply the dead daemon kept\n"
		    "# TYPE vyrefs_resends_answered_total counter\nvyrefs_resends_answered_total %" PRIu64 "\n",
		 kept.records, kept.checkpoints, kept.failures, kept.resends_answered);
	held h;
	held_now(fs, &h);
	add_text(t, "# HELP vyrefs_open_handles open files and directories the kernel holds\n"
		    "# TYPE vyrefs_open_handles gauge\nvyrefs_open_handles %" PRIu64 "\n"
		    "# HELP vyrefs_kernel_lookups references the kernel holds on inodes (entry replies not yet forgotten)\n"
		    "# TYPE vyrefs_kernel_lookups gauge\nvyrefs_kernel_lookups %" PRIu64 "\n"
		    "# HELP vyrefs_forgets_unmatched_total references the kernel forgot that were never counted\n"
		    "# TYPE vyrefs_forgets_unmatched_total counter\nvyrefs_forgets_unmatched_total %" PRIu64 "\n"
		    "# HELP vyrefs_sequences_running control sequences running now\n"
		    "# TYPE vyrefs_sequences_running gauge\nvyrefs_sequences_running %" PRIu64 "\n",
		 h.handles, h.lookups, h.unmatched, atomic_load(&fs->seqlog.running));
	add_tier(t, fs, true);
	add_text(t, "# HELP vyrefs_device_memory_total_bytes the device's memory\n"
		    "# TYPE vyrefs_device_memory_total_bytes gauge\n");
	memory_series(fs, t, false);
	add_text(t, "# HELP vyrefs_device_memory_free_bytes the device's free memory, as its driver reports it\n"
		    "# TYPE vyrefs_device_memory_free_bytes gauge\n");
	memory_series(fs, t, true);
	add_text(t, "# HELP vyrefs_device_info the device under the mount (always 1)\n"
		    "# TYPE vyrefs_device_info gauge\n");
	for (unsigned d = 0; d < fs->ndev; d++) {
		const vy_device_info *i = &fs->dev[d].core->dev->info;
		add_text(t, "vyrefs_device_info{backend=\"");
		add_label_value(t, i->backend);
		add_text(t, "\",name=\"");
		add_label_value(t, i->name);
		add_text(t, "\",ordinal=\"%d\"} 1\n", i->ordinal);
	}
}

/* Each device's facts; several devices are blocks a blank line apart. */
static void render_device(vy_fs *fs, text *t)
{
	for (unsigned d = 0; d < fs->ndev; d++) {
		vy_device *dev = fs->dev[d].core->dev;
		const vy_device_info *i = &dev->info;
		uint64_t free_b = 0, total = 0;
		vy_error e;
		dev->ops->mem_info(dev, &free_b, &total, &e);
		add_text(t, "%sbackend %s\nname %s\nordinal %d\n", d ? "\n" : "", i->backend, i->name, i->ordinal);
		add_text(t, "compute_capability %d.%d\ndriver_version %d\nmultiprocessors %d\n", i->cc_major, i->cc_minor,
			 i->driver_version, i->multiprocessors);
		add_text(t, "memory_total %" PRIu64 "\nmemory_free %" PRIu64 "\n", total, free_b);
		add_text(t, "max_threads_per_block %d\nmax_block %d,%d,%d\nmax_grid %d,%d,%d\nmax_shared_per_block %d\n",
			 i->max_threads_per_block, i->max_block[0], i->max_block[1], i->max_block[2], i->max_grid[0],
			 i->max_grid[1], i->max_grid[2], i->max_shared_per_block);
		if (fs->ndev > 1) {
			vy_store_usage u;
			vy_store_usage_get(fs->dev[d].core->store, &u);
			add_text(t, "budget %" PRIu64 "\nresident %" PRIu64 "\npeers", u.budget, u.resident);
			for (unsigned o = 0; o < fs->ndev; o++)
				if (fs->direct[d * fs->ndev + o])
					add_text(t, " %d", fs->dev[o].core->dev->info.ordinal);
			add_text(t, "\n");
		}
	}
}

char *vy_vyre_render(vy_fs *fs, vy_inode *in, size_t *len)
{
	text t = {0};
	switch (in->virt) {
	case VY_V_STATS:
		render_stats(fs, &t);
		break;
	case VY_V_METRICS:
		render_metrics(fs, &t);
		break;
	case VY_V_DEVICE:
		render_device(fs, &t);
		break;
	case VY_V_CONFIG: {
		/* Which binary serves: after `vyrefs --upgrade`, the new one's. */
		char head[64];
		int hl = snprintf(head, sizeof(head), "# served by vyrefs %s\n", VY_VERSION);
		size_t need = vy_config_format_ini(&fs->cfg, NULL, 0);
		t.buf = hl > 0 && (size_t)hl < sizeof(head) ? malloc((size_t)hl + need + 1) : NULL;
		if (t.buf) {
			memcpy(t.buf, head, (size_t)hl);
			t.len = (size_t)hl + vy_config_format_ini(&fs->cfg, t.buf + hl, need + 1);
		}
		t.failed = !t.buf;
		break;
	}
	case VY_V_LOG:
		t.buf = vy_seqlog_text(&fs->seqlog, &t.len);
		t.failed = !t.buf;
		break;
	case VY_V_MODLOG:
		t.buf = vy_modules_log(fs->dev[0].modules, in->target);
		t.len = t.buf ? strlen(t.buf) : 0;
		break;
	case VY_V_SOCKET:
		if (fs->socket_name && fs->socket_name(fs))
			add_text(&t, "%s\n", fs->socket_name(fs));
		break;
	case VY_V_CTL: /* read per open file: vy_ctlfile_read */
	case VY_V_UPGRADE: /* written only */
	case VY_V_NONE:
		break;
	}
	if (t.failed) {
		free(t.buf);
		return NULL;
	}
	if (!t.buf)
		t.buf = calloc(1, 1);
	*len = t.len;
	return t.buf;
}

size_t vy_vyre_size(vy_fs *fs, vy_inode *in)
{
	size_t len = 0;
	free(vy_vyre_render(fs, in, &len));
	return len;
}

/* The table of .vyre's rendered files (kind.h; the control file has its
 * own, fs/ctl_file.c): made anew at each open, read by offset from that
 * copy, written by no one. */
static void vyre_stat(vy_fs *fs, vy_inode *in, struct stat *st)
{
	st->st_size = (off_t)vy_vyre_size(fs, in);
}

static bool vyre_open(fuse_req_t req, vy_fs *fs, vy_open *h, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EPERM); /* .vyre's files are vyrefs's to write */
		return false;
	}
	h->text = vy_vyre_render(fs, h->in, &h->len);
	if (!h->text) {
		fuse_reply_err(req, ENOMEM);
		return false;
	}
	fi->direct_io = 1; /* made anew at each open: never cached */
	return true;
}

static void vyre_read(fuse_req_t req, vy_fs *fs, vy_open *h, size_t size, off_t off)
{
	(void)fs;
	/* A copy: the handle may be released the moment the reply is in. */
	size_t at = (uint64_t)off < h->len ? (size_t)off : h->len;
	size_t n = h->len - at < size ? h->len - at : size;
	char *copy = malloc(n ? n : 1);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, h->text + at, n);
	fuse_reply_buf(req, copy, n);
	free(copy);
}

/* Of .vyre's files only modules/NAME.log is not fixed: it goes with its
 * module (moddir.c), never by itself. */
static int vyre_unlink(vy_fs *fs, vy_inode *dir, vy_inode *in)
{
	(void)fs;
	(void)dir;
	(void)in;
	return EPERM;
}

const vy_kind_ops vy_vyre_kind = {
	.no_data = EINVAL,
	.uncached = true,
	.stat = vyre_stat,
	.open = vyre_open,
	.read = vyre_read,
	.unlink = vyre_unlink,
};
