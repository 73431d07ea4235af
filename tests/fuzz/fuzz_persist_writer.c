/* libFuzzer target for the survive=on writer (persist/writer.h,
 * request.h) and what a successor makes of what it wrote (issue "survive
 * 2": the log only ever holds what the loader accepts). A daemon's fs on
 * the host backend, its store kept by a table that plays the keeper, a
 * real state region; the input is a sequence of the calls fs/, sock/ and
 * daemon/ make into the writer, with values from the input (0, bit 63,
 * UINT64_MAX, names with '/' or past 255 bytes, huge xattrs, replies of
 * any length): every record type (NS at start; INODE, NAME, GONE, XATTRS,
 * LAYOUT through the file layer, HANDLE, LOOKUP, CTL, MAPCONN, MODULE,
 * WBEHIND, GROUP through a request's answer). At a death (an input op, and
 * the end) a successor does what daemon/adopt.c and adopt_ns.c do.
 *
 * At every death, either the writer refused something (the region is
 * marked broken: a successor refuses it up front), or the region adopts
 * and loads whole; a first daemon's loaded state is its writer's shadow,
 * record for record (answers aside: a sent one is forgotten unlogged);
 * vy_replay accepts it, and every kept inode, name and xattr is in the
 * successor's fs as kept. On a ring survive_log allows, a call with the
 * values its callers let through is never refused. Never a crash, leak,
 * hang or sanitizer report. */
#include "core/backend.h"
#include "core/core.h"
#include "fs/file.h"
#include "fs/lifecycle.h"
#include "persist/format.h"
#include "persist/group.h"
#include "persist/load.h"
#include "persist/replay.h"
#include "persist/replay_kernel.h"
#include "persist/request.h"
#include "persist/writer.h"
#include "persist/writer_parts.h"
#include "state/state.h"

#include <xxhash.h>

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NODES 12   /* inodes an input makes */
#define SLOTS 512  /* the keeper's table */
#define FIRST_SLOT 6
#define DEATHS_MAX 2 /* successors an input may ask for, the last one aside */

/* ---- the daemon's log (daemon/log.c is not linked): the last lines,
 * printed when the invariant fails ---- */
static char logs[4][1024];
static unsigned nlogs;

void vy_log(int priority, const char *fmt, ...)
{
	(void)priority;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(logs[nlogs++ % 4], sizeof(logs[0]), fmt, ap);
	va_end(ap);
}

void vy_log_use_syslog(bool on)
{
	(void)on;
}

void vy_log_step(const char *step)
{
	(void)step;
}

static void __attribute__((noreturn, format(printf, 1, 2))) broken_invariant(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "fuzz_persist_writer: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	for (unsigned i = nlogs > 4 ? nlogs - 4 : 0; i < nlogs; i++)
		fprintf(stderr, "  log: %s\n", logs[i % 4]);
	abort();
}

/* ---- the input ---- */
typedef struct input {
	const uint8_t *p;
	size_t n;
} input;

static uint8_t u8(input *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static uint64_t uN(input *in, unsigned bytes)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)u8(in) << (8 * i);
	return v;
}

/* A 64-bit field: the extremes often, any value sometimes. */
static uint64_t x64(input *in)
{
	switch (u8(in) % 8) {
	case 0: return 0;
	case 1: return 1 + u8(in);
	case 2: return UINT64_MAX - u8(in);
	case 3: return (1ull << 63) | u8(in);
	case 4: return uN(in, 4) << 32 | uN(in, 4);
	case 5: return (uint64_t)u8(in) << 32 | u8(in); /* a handle id's shape */
	default: return uN(in, 8);
	}
}

static uint32_t x32(input *in)
{
	switch (u8(in) % 6) {
	case 0: return 0;
	case 1: return UINT32_MAX - u8(in);
	case 2: return 1u << 31 | u8(in);
	case 3: return u8(in);
	default: return (uint32_t)uN(in, 4);
	}
}

/* A string of up to `max` bytes (NUL ends it: the writer's callers pass
 * C strings), sometimes one byte repeated to a length past any limit. */
static size_t text(input *in, char *out, size_t max)
{
	size_t n = u8(in);
	if (n >= 250) { /* long: one byte, many times */
		n = (n - 250 + 1) * 80 + u8(in);
		char c = (char)u8(in);
		n = n < max ? n : max;
		memset(out, c ? c : 'a', n);
	} else {
		n = n < max ? n : max;
		n = n < in->n ? n : in->n;
		memcpy(out, in->p, n);
		in->p += n;
		in->n -= n;
	}
	out[n] = 0;
	return strlen(out);
}

/* ---- the keeper: slot -> its copy of an fd ---- */
typedef struct keeper {
	int fd[SLOTS];
	uint32_t next;
} keeper;

/* One daemon's sink into the keeper; a dead daemon's calls do nothing (it
 * is gone: its frees never reach the keeper). */
typedef struct sink {
	keeper *k;
	bool dead;
	vy_keep_sink s;
} sink;

static vy_keep_slot k_add(void *ctx, int fd)
{
	sink *s = ctx;
	if (s->dead || s->k->next >= SLOTS)
		return 0;
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (copy < 0)
		return 0;
	s->k->fd[s->k->next] = copy;
	return s->k->next++;
}

static void k_drop(void *ctx, vy_keep_slot slot)
{
	sink *s = ctx;
	if (s->dead || slot >= SLOTS || s->k->fd[slot] < 0)
		return;
	close(s->k->fd[slot]);
	s->k->fd[slot] = -1;
}

/* ---- a daemon ---- */
typedef struct proc {
	vy_device *dev;
	vy_core *core;
	vy_fs fs;
	vy_state *st;
	sink sink;
	bool fresh; /* a first daemon: its writer's shadow is the region's */
	vy_inode *node[NODES];
	uint64_t ino[NODES];
	uint64_t handles[8]; /* ids given to the writer */
} proc;

static void daemon_open(proc *d, keeper *k)
{
	vy_error e;
	vy_core_options o;
	vy_core_options_default(&o);
	o.device.backend = VY_BACKEND_HOST;
	o.device.host_memory = 64ull << 20;
	o.staging_chunk = 1u << 20;
	o.staging_cache = 4u << 20;
	o.streams = 2;
	vy_config cfg;
	vy_config_defaults(&cfg);
	cfg.write_behind = false; /* its slots are the keeper's memfd, not a record (fs/wbehind_keep.c) */
	cfg.readahead = false;
	d->sink = (sink){.k = k, .s = {.ctx = &d->sink, .add = k_add, .drop = k_drop}};
	if (vy_device_host_open(o.device.host_memory, &d->dev, &e) != VY_OK)
		broken_invariant("no host device: %s", e.msg);
	/* Sequences (and modules) run in this process, as on a GPU without
	 * VMM: a launcher would be this binary again (fs/lifecycle.c open_runner). */
	d->dev->share = NULL;
	d->dev->info.share_granularity = 0;
	if (vy_core_attach(d->dev, &o, &d->core, &e) != VY_OK || vy_fs_init(&d->fs, &d->core, 1, &cfg, &e) != VY_OK ||
	    vy_store_keep(d->core->store, &d->sink.s, &e) != VY_OK)
		broken_invariant("cannot open a daemon: %s", e.msg);
}

/* The daemon dies: nothing of it reaches the keeper or the region again. */
static void daemon_die(proc *d)
{
	d->sink.dead = true;
	vy_group_end(); /* its thread's request dies with it */
	vy_persist_stop(&d->fs);
	vy_fs_destroy(&d->fs);
	vy_core_close(d->core, NULL);
	vy_device_close(d->dev);
	vy_state_close(d->st);
}

/* ---- comparing states: a hash of each record of a shadow's dump
 * (answers aside), sorted ---- */
typedef struct dump {
	uint64_t *h;
	size_t n, cap;
} dump;

static vy_err dump_one(void *ctx, uint16_t type, const void *p, uint32_t len, vy_error *e)
{
	(void)e;
	dump *d = ctx;
	if (type == VY_P_GROUP)
		return VY_OK;
	if (d->n == d->cap && !(d->h = realloc(d->h, (d->cap = d->cap ? 2 * d->cap : 64) * sizeof(*d->h))))
		abort();
	d->h[d->n++] = XXH3_64bits_withSeed(p, len, type);
	return VY_OK;
}

static int u64_order(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static dump dump_of(const vy_shadow *s)
{
	dump d = {0};
	vy_error e;
	if (vy_shadow_dump(s, dump_one, &d, &e) != VY_OK)
		broken_invariant("a shadow does not dump: %s", e.msg);
	qsort(d.h, d.n, sizeof(*d.h), u64_order);
	return d;
}

static void same_state(const vy_shadow *wrote, const vy_shadow *loaded)
{
	dump a = dump_of(wrote), b = dump_of(loaded);
	if (a.n != b.n || (a.n && memcmp(a.h, b.h, a.n * sizeof(*a.h))))
		broken_invariant("the loaded state is not the written one (%zu records written, %zu loaded)", a.n, b.n);
	free(a.h);
	free(b.h);
}

/* ---- what the successor made, against the state it made it from ---- */
static void check_made(vy_fs *fs, vy_shadow *sh)
{
	vy_shadow_node **order;
	size_t n;
	vy_error e;
	if (vy_shadow_by_ino(sh, &order, &n, &e) != VY_OK)
		abort();
	for (size_t i = 0; i < n; i++) {
		const vy_shadow_node *node = order[i];
		const vy_p_inode *r = (const void *)node->inode;
		vy_inode *in = vy_fs_inode(fs, node->ino);
		if (r && node->ino != VY_NS_ROOT) {
			const char *t = (const char *)(r + 1);
			if (!in || in->kind != (vy_kind)r->kind || in->mode != r->mode || in->uid != r->uid ||
			    in->gid != r->gid || in->nlink != r->nlink || in->mtime.tv_sec != r->mtime.sec ||
			    in->mtime.tv_nsec != r->mtime.nsec || in->attr_flags != r->attr_flags ||
			    (r->kind == VY_FILE && in->size != r->size) ||
			    (r->target_len && (!in->target || strlen(in->target) != r->target_len ||
					       memcmp(in->target, t, r->target_len))))
				broken_invariant("inode %llu is not made as kept", (unsigned long long)node->ino);
		}
		if (in && node->xattrs && in->xattrs.n != ((const vy_p_xattrs *)(const void *)node->xattrs)->n)
			broken_invariant("inode %llu's xattrs are not made as kept", (unsigned long long)node->ino);
		vy_inode *dir = node->has_names ? vy_fs_inode(fs, node->ino) : NULL;
		for (const vy_dirent *d = dir && dir->kind == VY_DIR ? vy_dir_next(&node->names, 0) : NULL; d;
		     d = vy_dir_next(&node->names, d->cookie)) {
			vy_inode *child = vy_fs_inode(fs, d->ino);
			const vy_dirent *got = vy_dir_find(&dir->dir, d->name);
			vy_inode *other = got && got->ino != d->ino ? vy_fs_inode(fs, got->ino) : NULL; /* .vyre's, left out */
			if (child && !child->fixed && (!got || (got->ino != d->ino && !(other && other->fixed))))
				broken_invariant("name %s of directory %llu is not made as kept", d->name,
						 (unsigned long long)node->ino);
		}
	}
	free(order);
}

/* The writer kept everything (else a successor refuses the region, and
 * there is nothing to check): the successor's load and replay must take
 * all of it. Returns the successor, writing on, or NULL (nothing kept). */
static proc *succeed(proc *d, keeper *k)
{
	vy_persist *p = d->fs.persist;
	bool broken = vy_state_broken(d->st);
	if (broken != __atomic_load_n(&p->broken, __ATOMIC_ACQUIRE))
		broken_invariant("the writer's broken flag (%d) is not the region's", !broken);
	vy_state_fds fds = {dup(d->st->fds.region), {dup(d->st->fds.image[0]), dup(d->st->fds.image[1])}};
	vy_shadow wrote = {0};
	bool fresh = d->fresh && !broken;
	if (fresh) { /* what the writer holds, taken before the death frees it */
		wrote = p->shadow;
		vy_shadow_init(&p->shadow);
	}
	daemon_die(d);
	if (broken) {
		close(fds.region);
		close(fds.image[0]);
		close(fds.image[1]);
		return NULL; /* refused: daemon/adopt.c ends the mount here */
	}
	proc *s = calloc(1, sizeof(*s));
	vy_error e;
	vy_state_scan found;
	if (!s || vy_state_adopt(&fds, &s->st, &found, &e) != VY_OK)
		broken_invariant("a successor cannot adopt the region: %s", s ? e.msg : "no memory");
	if (found.stopped)
		broken_invariant("the log the writer wrote is torn: %s", found.why);
	vy_state_region_claim(s->st);
	if (fresh) {
		vy_shadow loaded;
		vy_shadow_init(&loaded);
		vy_load_ctx c = {.shadow = &loaded};
		vy_state_loaded got;
		if (vy_state_load(s->st, vy_load_section, vy_load_record, &c, &got, &e) != VY_OK || got.log.stopped)
			broken_invariant("the loader refuses what the writer kept: %s", got.log.stopped ? got.log.why : e.msg);
		same_state(&wrote, &loaded);
		vy_shadow_destroy(&loaded);
		vy_shadow_destroy(&wrote);
	}
	daemon_open(s, k);
	/* The keeper's fds, as it hands them (copies); what no file,
	 * module or connection takes goes from the keeper after. */
	int mfd[SLOTS];
	for (uint32_t i = 0; i < SLOTS; i++)
		mfd[i] = k->fd[i] >= 0 ? dup(k->fd[i]) : -1;
	vy_keep_fds mem = {.fd = mfd, .n = SLOTS};
	vy_shadow sh;
	vy_replay_counts n;
	vy_err rc = vy_replay(&s->fs, s->st, &mem, NULL, &sh, &n, &e);
	if (rc != VY_OK)
		broken_invariant("a successor refuses what the writer kept: %s: %s", vy_err_name(rc), e.msg);
	vy_kept_conns conns;
	if (vy_replay_mapconns(&sh, &mem, &conns, &e) != VY_OK)
		broken_invariant("the kept connections are not taken back: %s", e.msg);
	vy_kept_conns_free(&conns); /* no map server here: each connection ends */
	for (uint32_t i = 0; i < SLOTS; i++)
		if (mfd[i] >= 0) {
			close(mfd[i]);
			if (k->fd[i] >= 0)
				close(k->fd[i]);
			k->fd[i] = -1;
		}
	check_made(&s->fs, &sh);
	if (getenv("FUZZ_WRITER_SAY")) /* what the inputs reach (-runs=0 over a corpus) */
		fprintf(stderr, "made: inodes %lu names %lu files %lu handles %lu modules %lu conns %zu\n", n.inodes,
			n.names, n.files, n.handles, n.modules, sh.mapconns.count);
	if (vy_persist_start(&s->fs, s->st, &sh, &e) != VY_OK)
		broken_invariant("a successor cannot keep on: %s", e.msg);
	vy_persist_request(&s->fs, 0, false); /* a fresh thread: serving nothing */
	for (unsigned i = 0; i < NODES; i++) /* the input's inodes, as the successor made them (d is dead, not freed) */
		if ((s->ino[i] = d->ino[i]))
			s->node[i] = vy_fs_inode(&s->fs, s->ino[i]);
	memcpy(s->handles, d->handles, sizeof(s->handles));
	return s;
}

static vy_inode *node_at(proc *d, input *in)
{
	unsigned i = u8(in) % (NODES + 1);
	if (i == NODES)
		return vy_fs_inode(&d->fs, VY_NS_ROOT);
	if (d->node[i] && vy_fs_inode(&d->fs, d->ino[i]) != d->node[i])
		d->node[i] = NULL;
	return d->node[i];
}

/* Inode i made anew (as a create, mkdir, symlink or mknod does), kept. */
static vy_inode *make_node(proc *d, unsigned i, vy_kind kind, mode_t mode, uid_t uid, gid_t gid, const char *target)
{
	vy_ns *ns = vy_fs_ns(&d->fs);
	pthread_mutex_lock(&d->fs.ns);
	vy_inode *n = vy_inode_new(ns, kind, mode, uid, gid);
	if (n && target && vy_xattr_budget_take(&ns->xattr_budget, strlen(target) + 1))
		n->target = strdup(target);
	if (n)
		atomic_store(&n->nlink, kind == VY_DIR ? 2 : 1);
	pthread_mutex_unlock(&d->fs.ns);
	if (!n)
		return NULL;
	d->node[i] = n;
	d->ino[i] = n->ino;
	vy_persist_inode(&d->fs, n);
	return n;
}

static bool op_new(proc *d, input *in)
{
	static const vy_kind kinds[] = {VY_DIR, VY_FILE, VY_SYMLINK, VY_SPECIAL, VY_MODULE};
	static const mode_t special[] = {S_IFIFO, S_IFCHR, S_IFBLK, S_IFSOCK};
	unsigned i = u8(in) % NODES;
	vy_kind kind = kinds[u8(in) % 5];
	mode_t type = kind == VY_DIR ? S_IFDIR : kind == VY_SYMLINK ? S_IFLNK : kind == VY_SPECIAL ? special[u8(in) % 4] : S_IFREG;
	char target[5000];
	size_t tl = kind == VY_SYMLINK ? text(in, target, sizeof(target) - 1) : 0;
	make_node(d, i, kind, type | (u8(in) & 0777), x32(in), x32(in), kind == VY_SYMLINK ? target : NULL);
	return kind != VY_SYMLINK || (tl >= 1 && tl < 4096); /* the kernel's: symlink(2) takes 1 to PATH_MAX - 1 */
}

/* A first daemon's namespace before the input's calls: one inode of each
 * kind and more, each named in the root, so the calls find them. */
static void populate(proc *d)
{
	static const vy_kind kinds[NODES] = {VY_DIR,	VY_FILE, VY_FILE, VY_SYMLINK, VY_DIR,	 VY_FILE,
					     VY_SPECIAL, VY_MODULE, VY_FILE, VY_DIR,	 VY_SYMLINK, VY_MODULE};
	vy_inode *root = vy_fs_inode(&d->fs, VY_NS_ROOT);
	for (unsigned i = 0; i < NODES; i++) {
		vy_kind k = kinds[i];
		mode_t type = k == VY_DIR ? S_IFDIR : k == VY_SYMLINK ? S_IFLNK : k == VY_SPECIAL ? S_IFIFO : S_IFREG;
		vy_inode *n = make_node(d, i, k, type | 0644, 1000, 1000, k == VY_SYMLINK ? "n1" : NULL);
		if (!n || k == VY_MODULE)
			continue; /* a module is named in .vyre/modules, made by its own record */
		char name[16];
		snprintf(name, sizeof(name), "n%u", i);
		pthread_mutex_lock(&d->fs.ns);
		vy_dir_add(&root->dir, name, n->ino);
		vy_persist_name(&d->fs, root, name);
		pthread_mutex_unlock(&d->fs.ns);
	}
}

/* Attributes as setattr, link and unlink leave them: any value a client
 * may set; the type bits never change, the place is a device or none. */
static bool op_attrs(proc *d, input *in)
{
	vy_inode *n = node_at(d, in);
	if (!n)
		return true;
	pthread_mutex_lock(&n->meta);
	n->mode = (n->mode & S_IFMT) | (x32(in) & 07777);
	n->uid = x32(in);
	n->gid = x32(in);
	n->atime = (struct timespec){.tv_sec = (time_t)x64(in), .tv_nsec = (long)(x32(in) % 1000000000)};
	n->mtime = (struct timespec){.tv_sec = (time_t)x64(in), .tv_nsec = (long)(x32(in) % 1000000000)};
	n->ctime = n->mtime;
	n->attr_flags = x32(in);
	pthread_mutex_unlock(&n->meta);
	n->rdev = x64(in);
	atomic_store(&n->nlink, x32(in));
	n->parent = x64(in);
	n->linkable = u8(in) & 1;
	n->place = (uint8_t)(u8(in) % (d->fs.ndev + 1));
	vy_persist_inode(&d->fs, n);
	return true;
}

static bool op_name(proc *d, input *in)
{
	vy_inode *dir = node_at(d, in);
	char name[700];
	size_t nl = text(in, name, sizeof(name) - 1);
	/* The kernel's (a component) and fs/'s (NAME_MAX_LEN) rules. */
	bool valid = nl >= 1 && nl <= 255 && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
	uint8_t how = u8(in);
	vy_inode *child = node_at(d, in);
	if (!dir || dir->kind != VY_DIR)
		return true;
	if (child && (child->kind == VY_MODULE || child->fixed))
		child = NULL; /* named in .vyre/ alone (vy_op_link refuses them: EPERM) */
	pthread_mutex_lock(&d->fs.ns);
	vy_dirent *at = vy_dir_find(&dir->dir, name);
	vy_inode *named = at ? vy_u64map_get(&d->fs.inodes, at->ino) : NULL; /* ns held: the table itself */
	if (named && named->fixed) /* .vyre: never renamed over or removed */
		;
	else if (how % 3 == 0 && at && child) /* rename over: its place stays */
		at->ino = child->ino;
	else if (how % 3 == 1 && at)
		vy_dir_remove(&dir->dir, name);
	else if (!at && child)
		vy_dir_add(&dir->dir, name, child->ino);
	vy_persist_name(&d->fs, dir, name);
	pthread_mutex_unlock(&d->fs.ns);
	return valid;
}

/* setxattr or removexattr, as fs/ops_attr.c makes them (the kernel's
 * names: 1 to 255 bytes; a set the kept state cannot hold is ENOSPC), or
 * a set past that check. */
static bool op_xattr(proc *d, input *in)
{
	vy_inode *n = node_at(d, in);
	char name[400];
	static char value[VY_XATTR_VALUE_MAX + 16];
	size_t nl = text(in, name, sizeof(name) - 1);
	uint8_t how = u8(in);
	size_t vl = how & 1 ? (size_t)uN(in, 3) % sizeof(value) : u8(in);
	memset(value, how, vl);
	if (!n)
		return true;
	bool checked = !(how & 4);
	pthread_rwlock_wrlock(&n->lock);
	if (how & 2)
		vy_xattrs_remove(&n->xattrs, name);
	else if (name[0] && (!checked || vy_persist_xattr_fits(&d->fs, n, name, vl)))
		vy_xattrs_set(&n->xattrs, name, value, vl, 0);
	vy_persist_xattrs(&d->fs, n);
	pthread_rwlock_unlock(&n->lock);
	return checked && nl >= 1 && nl <= 255;
}

/* A file's memory as the file layer changes it (each change keeps its
 * layout), or its layout again as it is. */
static bool op_data(proc *d, input *in)
{
	vy_inode *n = node_at(d, in);
	uint8_t how = u8(in);
	uint64_t off = uN(in, 3) % (1u << 20), len = uN(in, 2) + 1;
	if (how & 0x80)
		off = x64(in);
	if (!n || n->kind != VY_FILE)
		return true;
	static uint8_t buf[65536];
	vy_error e;
	pthread_rwlock_wrlock(&n->lock);
	switch (how % 5) {
	case 0: memset(buf, how, len); vy_file_write(&d->fs, n, off, buf, len, &e); break;
	case 1: vy_file_truncate(&d->fs, n, off, &e); break;
	case 2: vy_file_punch(&d->fs, n, off, len, &e); break;
	case 3: vy_file_drop(&d->fs, n); break;
	default: vy_persist_layout(&d->fs, n); break;
	}
	pthread_rwlock_unlock(&n->lock);
	return true;
}

/* An inode freed as unlink, rmdir and the kernel's FORGET leave it: its
 * names gone (each kept), no link, no reference, then reaped
 * (fs/file.c vy_inode_reap keeps its VY_P_GONE); or the VY_P_GONE of a
 * number no live inode has. */
static bool op_gone(proc *d, input *in)
{
	if (u8(in) & 1) {
		uint64_t ino = x64(in);
		if (!vy_fs_inode(&d->fs, ino))
			vy_persist_gone(&d->fs, ino);
		return false;
	}
	vy_inode *n = node_at(d, in);
	if (!n || n->fixed || (n->kind == VY_DIR && n->dir.count))
		return true; /* rmdir: ENOTEMPTY */
	pthread_mutex_lock(&d->fs.ns);
	uint64_t k;
	void *v;
	for (size_t i = 0; vy_u64map_next(&d->fs.inodes, &i, &k, &v);) {
		vy_inode *dir = v;
		for (const vy_dirent *e; dir->kind == VY_DIR && (e = vy_dir_naming(&dir->dir, n->ino));) {
			char *name = strdup(e->name);
			if (!name)
				abort();
			vy_dir_remove(&dir->dir, name);
			vy_persist_name(&d->fs, dir, name);
			free(name);
		}
	}
	atomic_store(&n->nlink, 0);
	vy_ns_lookups_set(vy_fs_ns(&d->fs), n, 0);
	vy_persist_inode(&d->fs, n);
	vy_inode_reap(&d->fs, n);
	pthread_mutex_unlock(&d->fs.ns);
	return true;
}

static bool op_handle(proc *d, input *in)
{
	uint8_t how = u8(in);
	uint64_t *id = &d->handles[how % 8];
	if (how & 8 || !*id)
		*id = x64(in);
	vy_inode *n = how & 16 ? NULL : node_at(d, in);
	unsigned kind = how & 32 ? x32(in) : n && n->kind == VY_DIR ? VY_HANDLE_DIR : VY_HANDLE_FILE;
	uint64_t limit = x64(in);
	pthread_mutex_lock(&d->fs.ns);
	vy_persist_handle(&d->fs, *id, n, kind, limit);
	pthread_mutex_unlock(&d->fs.ns);
	/* An id of the handle table (ns/handles.h), of a file or directory. */
	return (*id >> 32) && (uint32_t)*id < VY_NS_HANDLES_MAX && (kind == VY_HANDLE_FILE || kind == VY_HANDLE_DIR);
}

static bool op_lookup(proc *d, input *in)
{
	vy_inode *n = node_at(d, in);
	uint64_t count = x64(in);
	if (!n)
		return true;
	pthread_mutex_lock(&d->fs.ns);
	vy_ns_lookups_set(vy_fs_ns(&d->fs), n, count);
	vy_persist_lookup(&d->fs, n);
	pthread_mutex_unlock(&d->fs.ns);
	return true;
}

static bool op_ctl(proc *d, input *in)
{
	char reply[3000];
	size_t rl = text(in, reply, sizeof(reply) - 1);
	vy_open h = {.fh = d->handles[u8(in) % 8], .next_line = (int)x32(in), .reply = u8(in) & 1 ? reply : NULL,
		     .reply_len = rl, .reply_pos = u8(in) % (rl + 2), .ctl = PTHREAD_MUTEX_INITIALIZER};
	if (h.reply_pos > h.reply_len)
		h.reply_pos = h.reply_len;
	uint64_t running = x64(in), seq = x64(in);
	pthread_mutex_lock(&h.ctl);
	vy_persist_ctl(&d->fs, &h, running, seq, x32(in));
	pthread_mutex_unlock(&h.ctl);
	/* fs/ctl_file.c's: lines count from 1; the unique is the kernel's (bit 63 cleared) */
	return h.next_line >= 1 && !(running >> 63);
}

/* A connection's record as sock/mapconn_keep.c builds it: its framing
 * (n mappings follow), every field the input's. */
static void op_mapconn(proc *d, input *in)
{
	uint8_t how = u8(in);
	uint32_t n = how & 1 ? (uint32_t)uN(in, 2) % 1100 : how % 5;
	size_t len = sizeof(vy_p_mapconn) + (size_t)n * sizeof(vy_p_mapping);
	vy_p_mapconn *r = calloc(1, len);
	if (!r)
		return;
	*r = (vy_p_mapconn){.slot = how & 2 ? x32(in) : FIRST_SLOT + u8(in), .open = how & 4 ? x32(in) : 1, .uid = x32(in),
			    .minor = x32(in), .next_id = x64(in), .unique = x64(in), .ref = x64(in),
			    .opcode = (uint16_t)x32(in), .phase = (uint16_t)(how & 8 ? x32(in) : u8(in) % 3),
			    .status = (int32_t)x32(in), .n = n};
	vy_p_mapping *mp = (vy_p_mapping *)(r + 1);
	for (uint32_t i = 0; i < n && in->n; i++) {
		vy_inode *of = u8(in) & 1 ? NULL : node_at(d, in);
		mp[i] = (vy_p_mapping){.id = x64(in), .ino = of ? of->ino : x64(in), .bytes = x64(in)};
	}
	vy_persist_mapconn(&d->fs, r, (uint32_t)len);
	free(r);
}

/* A module file that loaded (fs/moddir_keep.c), its image a memfd the
 * keeper holds; or gone (slot 0). */
static void op_module(proc *d, input *in)
{
	vy_inode *n = node_at(d, in);
	uint8_t how = u8(in);
	char name[400];
	text(in, name, sizeof(name) - 8);
	if (how & 1)
		strcat(name, (const char *[]){".ptx", ".cubin", ".fatbin", ".cu"}[how / 2 % 4]);
	vy_p_module where = {.cookie = x64(in), .log_ino = how & 8 ? x64(in) : 0, .log_cookie = x64(in),
			     .bytes = how & 16 ? x64(in) : 1 + u8(in)};
	if (how & 32) {
		where.slot = x32(in);
	} else if (!(how & 64)) { /* an image of zeros: nothing an NVRTC would compile */
		int fd = memfd_create("module", MFD_CLOEXEC);
		where.slot = fd >= 0 && ftruncate(fd, 256) == 0 ? k_add(&d->sink, fd) : 0;
		close(fd);
	}
	if (!n || n->kind != VY_MODULE)
		return;
	if (how & 128)
		vy_persist_inode(&d->fs, n); /* its attributes again, as a chmod keeps them */
	else
		vy_persist_module(&d->fs, n, &where, name);
}

static void op_wbehind(proc *d, input *in)
{
	vy_p_wbehind r = {.slot = x32(in), .slots = x32(in), .slot_bytes = x64(in), .bytes = x64(in)};
	vy_persist_wbehind(&d->fs, &r);
}

/* daemon/resend.c's calls: a request served, its reply, sent; a resend. */
static uint64_t unique; /* the request served */

static void op_request(proc *d, input *in)
{
	uint8_t how = u8(in);
	if (how % 4 == 0) {
		unique = x64(in);
		vy_persist_request(&d->fs, unique, how & 4);
		if (how & 8)
			vy_persist_with_answer(&d->fs);
		return;
	}
	uint64_t u = how & 16 ? x64(in) : unique;
	if (how % 4 == 1) {
		char reply[700];
		size_t rl = (size_t)u8(in) * 3;
		memset(reply, how, sizeof(reply));
		struct iovec iov[2] = {{reply, rl < 16 ? rl : 16}, {reply + 16, rl > 16 ? rl - 16 : 0}};
		vy_persist_reply(&d->fs, u, iov, 1 + (how & 32 ? 1 : 0));
	} else if (how % 4 == 2) {
		vy_persist_sent(&d->fs, u);
	} else {
		char buf[600];
		vy_persist_resent(&d->fs, u, buf, sizeof(buf));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	input in = {data, size};
	keeper k = {.next = FIRST_SLOT};
	for (int i = 0; i < SLOTS; i++)
		k.fd[i] = -1;
	nlogs = 0;
	unique = 0;
	proc *d = calloc(1, sizeof(*d));
	if (!d)
		return 0;
	d->fresh = true;
	vy_error e;
	/* A ring of 4 KiB (a checkpoint every few records) or of survive_log's least. */
	bool strict = !(u8(&in) & 1);
	if (vy_state_create(strict ? 64u << 10 : 4096, &d->st, &e) != VY_OK)
		broken_invariant("no state region: %s", e.msg);
	daemon_open(d, &k);
	vy_persist_request(&d->fs, 0, false); /* a fresh thread: serving nothing */
	if (vy_persist_start(&d->fs, d->st, NULL, &e) != VY_OK)
		broken_invariant("the writer does not start: %s", e.msg);
	populate(d);
	unsigned deaths = 0;
	while (d && in.n) {
		bool was = d->fs.persist->broken, valid = false;
		switch (u8(&in) % 15) {
		case 0: valid = op_new(d, &in); break;
		case 1: valid = op_attrs(d, &in); break;
		case 2: valid = op_name(d, &in); break;
		case 3: valid = op_gone(d, &in); break;
		case 4: valid = op_xattr(d, &in); break;
		case 5: valid = op_data(d, &in); break;
		case 6: valid = op_handle(d, &in); break;
		case 7: valid = op_lookup(d, &in); break;
		case 8: valid = op_ctl(d, &in); break;
		case 9: op_mapconn(d, &in); break;
		case 10: op_module(d, &in); break;
		case 11: op_wbehind(d, &in); break;
		case 12: op_request(d, &in); break;
		case 13:
			if (u8(&in) == 0xa5) /* rarely: it ends what the rest of the input could reach */
				vy_persist_memory_lost(&d->fs, "the input says so");
			break;
		default:
			if (deaths++ < DEATHS_MAX) {
				proc *s = succeed(d, &k);
				free(d);
				d = s;
			}
			continue;
		}
		/* A call the daemon's callers make, with values they let through,
		 * is kept: a refusal would end a mount a client could end so. On
		 * a ring survive_log allows (the 4 KiB one is below it). */
		if (valid && strict && !was && d->fs.persist->broken)
			broken_invariant("the writer refused a change its callers make: %s", logs[(nlogs + 3) % 4]);
	}
	proc *s = d ? succeed(d, &k) : NULL;
	free(d);
	if (s)
		daemon_die(s);
	free(s);
	vy_group_end();
	for (int i = 0; i < SLOTS; i++)
		if (k.fd[i] >= 0)
			close(k.fd[i]);
	return 0;
}
