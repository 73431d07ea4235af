/* The writer (writer.h). */
#include "persist/writer.h"
#include "core/store_keep.h"
#include "daemon/log.h"
#include "fs/fs.h"
#include "ns/acl.h"
#include "persist/answers.h"
#include "persist/format.h"
#include "persist/group.h"
#include "persist/shadow.h"
#include "persist/writer_parts.h"
#include "state/state.h"

#include <stdlib.h>
#include <string.h>

/* An image section's bytes at most (records are never split). */
#define CHUNK_BYTES (4u << 20)

/* An image being written: records gathered into sections. */
typedef struct image_out {
	vy_state_image_writer w;
	uint8_t *chunk;
	uint64_t used;
} image_out;

static vy_err flush_chunk(image_out *o, vy_error *e)
{
	vy_err rc = o->used ? vy_state_image_add(&o->w, VY_P_SECTION_RECORDS, o->chunk, o->used, e) : VY_OK;
	o->used = 0;
	return rc;
}

static vy_err emit(void *ctx, uint16_t type, const void *p, uint32_t len, vy_error *e)
{
	image_out *o = ctx;
	uint64_t need = sizeof(vy_p_head) + (((uint64_t)len + 7) & ~7ull);
	if (need > CHUNK_BYTES)
		return vy_fail(e, VY_EINVAL, "report this bug", "a kept record of %u bytes", len);
	if (o->used + need > CHUNK_BYTES) {
		vy_err rc = flush_chunk(o, e);
		if (rc != VY_OK)
			return rc;
	}
	vy_p_head h = {.len = len, .type = type};
	memcpy(o->chunk + o->used, &h, sizeof(h));
	memcpy(o->chunk + o->used + sizeof(h), p, len);
	memset(o->chunk + o->used + sizeof(h) + len, 0, need - sizeof(h) - len);
	o->used += need;
	return VY_OK;
}

/* Write the whole state as an image and drop the log it holds (lock held). */
static vy_err checkpoint(vy_persist *p, vy_error *e)
{
	image_out o = {.chunk = malloc(CHUNK_BYTES)};
	if (!o.chunk)
		return vy_fail(e, VY_ENOMEM, "free host memory", "no memory for a checkpoint of the kept state");
	vy_err rc = vy_state_image_begin(p->st, &o.w, e);
	if (rc == VY_OK)
		rc = vy_shadow_dump(&p->shadow, emit, &o, e);
	if (rc == VY_OK)
		rc = flush_chunk(&o, e);
	if (rc == VY_OK)
		rc = vy_state_image_publish(&o.w, e);
	free(o.chunk);
	if (rc == VY_OK)
		p->counts.checkpoints++;
	return rc;
}

void vy_persist_lose(vy_persist *p, const vy_error *e)
{
	/* Atomics: the keeper's memory slots lose from under the store's
	 * locks, without the writer's (vy_persist_memory_lost). */
	__atomic_add_fetch(&p->counts.failures, 1, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&p->broken, true, __ATOMIC_ACQ_REL))
		return;
	vy_state_mark_broken(p->st); /* the next death ends the mount: no stale namespace is ever served */
	vy_log(LOG_ERR, "cannot keep a change for a successor: %s; the mount no longer survives this daemon's death: "
			"it ends with it, as with survive=off (Fix: umount and mount again)", e->msg);
}

void vy_persist_commit(vy_persist *p, uint16_t type, const void *payload, uint32_t len)
{
	if (__atomic_load_n(&p->broken, __ATOMIC_ACQUIRE))
		return;
	vy_error e;
	vy_state_rec r = {.type = type, .payload = payload, .payload_len = len};
	/* The shadow first: it checks the record as a successor's loader
	 * would, so the log never holds one the loader refuses (issue
	 * "survive 2"). The seq is the one the append gives (the lock is
	 * held; a checkpoint keeps the numbering). A checkpoint meanwhile
	 * dumps the shadow with this record in it: the append adds it again,
	 * and a record is the whole present state of its thing. */
	uint64_t seq = vy_state_log_last_seq(p->st) + 1;
	vy_err rc = vy_shadow_apply(&p->shadow, type, payload, len, seq, &e);
	if (rc == VY_OK)
		rc = vy_state_append(p->st, &r, &seq, &e);
	if (rc == VY_ENOSPC && (rc = checkpoint(p, &e)) == VY_OK)
		rc = vy_state_append(p->st, &r, &seq, &e);
	if (rc != VY_OK) {
		vy_persist_lose(p, &e);
		return;
	}
	p->counts.records++;
	if (vy_state_log_wants_checkpoint(p->st) && checkpoint(p, &e) != VY_OK)
		vy_persist_lose(p, &e);
}

void vy_persist_no_memory(vy_persist *p)
{
	vy_error e;
	vy_fail(&e, VY_ENOMEM, "free host memory", "no memory to keep a request's changes");
	vy_persist_lose(p, &e);
}

/* A request's inode to read a record from when its group is kept. */
static void add_live(vy_persist *p, uint16_t type, vy_inode *in)
{
	if (vy_group_add_live(type, in))
		return;
	pthread_mutex_lock(&p->lock);
	vy_persist_no_memory(p);
	pthread_mutex_unlock(&p->lock);
}

/* Append one record, or keep it with the request this thread serves. */
static void append(vy_persist *p, uint16_t type, const void *payload, uint32_t len)
{
	if (!vy_group_on(p))
		vy_persist_commit(p, type, payload, len);
	else if (!vy_group_add(type, payload, len))
		vy_persist_no_memory(p);
}

static vy_persist *writer_of(struct vy_fs *fs)
{
	return fs->persist;
}

/* Whether an inode is the namespace's to keep: .vyre/ and its files are
 * made anew by every daemon. */
static bool kept(const vy_inode *in)
{
	if (in->fixed)
		return in->ino == VY_NS_ROOT;
	return in->kind == VY_DIR || in->kind == VY_FILE || in->kind == VY_SYMLINK || in->kind == VY_SPECIAL;
}

/* Whether the kernel's references to an inode and handles on it are kept:
 * the kept inodes', .vyre's fixed files (every daemon makes them with the
 * same numbers), and module files and their logs (a successor makes those
 * that loaded again with their numbers; a handle on any other it drops). */
static bool counted(const vy_inode *in)
{
	return in->fixed || kept(in) || in->kind == VY_MODULE || (in->kind == VY_VIRTUAL && in->virt == VY_V_MODLOG);
}

void vy_persist_handle(struct vy_fs *fs, uint64_t id, struct vy_inode *in, unsigned kind, uint64_t limit)
{
	vy_persist *p = writer_of(fs);
	if (!p || (in && !counted(in)))
		return;
	pthread_mutex_lock(&p->lock);
	/* A release of a handle never kept has nothing to undo (one this
	 * request opened is not in the shadow yet). */
	if (in || vy_group_on(p) || vy_u64map_get(&p->shadow.handles, id)) {
		vy_p_handle r = {.id = id, .ino = in ? in->ino : 0, .limit = limit, .kind = kind};
		append(p, VY_P_HANDLE, &r, sizeof(r));
	}
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_lookup(struct vy_fs *fs, struct vy_inode *in)
{
	vy_persist *p = writer_of(fs);
	if (!p || !counted(in))
		return;
	if (vy_group_on(p)) { /* counted as it is when the group is kept */
		add_live(p, VY_P_LOOKUP, in);
		return;
	}
	pthread_mutex_lock(&p->lock);
	uint8_t r[sizeof(vy_p_lookup)];
	vy_persist_lookup_record(in, r);
	vy_persist_commit(p, VY_P_LOOKUP, r, sizeof(r));
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_ctl(struct vy_fs *fs, const struct vy_open *h, uint64_t running, uint64_t seq, uint32_t pending)
{
	vy_persist *p = writer_of(fs);
	if (!p || !h->fh)
		return;
	struct {
		vy_p_ctl r;
		char reply[VY_P_CTL_REPLY_MAX];
	} rec; /* only its first `len` bytes are kept: the reply's rest is not zeroed (twice a control write) */
	rec.r = (vy_p_ctl){.id = h->fh, .running = running, .seq = seq, .next_line = h->next_line};
	size_t left = h->reply && h->reply_pos < h->reply_len ? h->reply_len - h->reply_pos : 0;
	rec.r.reply_len = (uint32_t)(left < VY_P_CTL_REPLY_MAX ? left : VY_P_CTL_REPLY_MAX);
	memcpy(rec.reply, h->reply ? h->reply + h->reply_pos : "", rec.r.reply_len);
	rec.r.pending = pending;
	uint32_t len = (uint32_t)(sizeof(rec.r) + rec.r.reply_len);
	pthread_mutex_lock(&p->lock);
	if (vy_u64map_get(&p->shadow.handles, h->fh)) { /* a handle kept (its open answered) */
		if (running)
			vy_persist_commit(p, VY_P_CTL, &rec, len); /* before the sequence runs: a resend must see it */
		else
			append(p, VY_P_CTL, &rec, len);
	}
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_mapconn(struct vy_fs *fs, const void *rec, uint32_t len)
{
	vy_persist *p = writer_of(fs);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	vy_persist_commit(p, VY_P_MAPCONN, rec, len); /* never a FUSE request's: no group holds it */
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_wbehind(struct vy_fs *fs, const vy_p_wbehind *r)
{
	vy_persist *p = writer_of(fs);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	vy_persist_commit(p, VY_P_WBEHIND, r, sizeof(*r)); /* no request's: no group holds it */
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_tier(struct vy_fs *fs, const void *rec, uint32_t len)
{
	vy_persist *p = writer_of(fs);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	if (len > SCRATCH_BYTES || len > vy_state_record_max(p->st) / 2) {
		vy_error e;
		vy_fail(&e, VY_EOVERFLOW, "write the file in fewer, longer runs, or mount with survive=off",
			"a backing directory's file has too many runs of units to keep (%u bytes)", len);
		vy_persist_lose(p, &e);
	} else {
		vy_persist_commit(p, VY_P_TIER, rec, len); /* never a request's: its change is kept before it is answered */
	}
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_lookup_record(const vy_inode *in, uint8_t *out)
{
	vy_p_lookup r = {.ino = in->ino, .nlookup = __atomic_load_n(&in->nlookup, __ATOMIC_RELAXED)};
	memcpy(out, &r, sizeof(r));
}

uint32_t vy_persist_inode_record(vy_inode *in, uint8_t *out)
{
	vy_p_inode *r = (void *)out;
	memset(r, 0, sizeof(*r));
	/* Fields other locks guard are read whole (never torn): a change
	 * racing this one records itself after it, under the writer's lock. */
	r->ino = in->ino;
	r->size = __atomic_load_n(&in->size, __ATOMIC_RELAXED);
	r->parent = __atomic_load_n(&in->parent, __ATOMIC_RELAXED);
	r->kind = in->kind;
	r->nlink = atomic_load(&in->nlink);
	r->dev = __atomic_load_n(&in->dev, __ATOMIC_RELAXED);
	r->place = __atomic_load_n(&in->place, __ATOMIC_RELAXED);
	r->linkable = __atomic_load_n(&in->linkable, __ATOMIC_RELAXED);
	r->rdev = in->rdev;
	pthread_mutex_lock(&in->meta);
	r->mode = in->mode;
	r->uid = in->uid;
	r->gid = in->gid;
	r->atime = vy_p_time_of(in->atime);
	r->mtime = vy_p_time_of(in->mtime);
	r->ctime = vy_p_time_of(in->ctime);
	r->btime = vy_p_time_of(in->btime);
	r->attr_flags = in->attr_flags;
	pthread_mutex_unlock(&in->meta);
	size_t tl = in->kind == VY_SYMLINK && in->target ? strlen(in->target) : 0;
	r->target_len = (uint32_t)tl;
	if (tl) /* no target (NULL) but a symlink's: memcpy's source may not be NULL, even for 0 bytes */
		memcpy(out + sizeof(*r), in->target, tl);
	return (uint32_t)(sizeof(*r) + tl);
}

/* A module record of `in` at `where` with its attributes now, and `name`
 * (lock held). */
static void commit_module(vy_persist *p, vy_inode *in, const vy_p_module *where, const char *name)
{
	vy_p_inode a; /* its attributes as an inode record reads them (no target: not a symlink) */
	vy_persist_inode_record(in, (uint8_t *)&a);
	vy_p_module *r = (void *)p->scratch;
	*r = *where;
	size_t nl = r->slot ? strlen(name) : 0;
	r->ino = in->ino;
	r->name_len = (uint32_t)nl;
	r->zero = 0;
	r->mode = a.mode;
	r->uid = a.uid;
	r->gid = a.gid;
	r->atime = a.atime;
	r->mtime = a.mtime;
	r->ctime = a.ctime;
	r->btime = a.btime;
	memcpy(p->scratch + sizeof(*r), name, nl);
	vy_persist_commit(p, VY_P_MODULE, r, (uint32_t)(sizeof(*r) + nl));
}

void vy_persist_module(struct vy_fs *fs, struct vy_inode *in, const struct vy_p_module *where, const char *name)
{
	vy_persist *p = writer_of(fs);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	commit_module(p, in, where, name);
	pthread_mutex_unlock(&p->lock);
}

/* A kept module's new attributes (chmod, chown, utimes): its record again. */
static void module_attrs(vy_persist *p, vy_inode *in)
{
	pthread_mutex_lock(&p->lock);
	const vy_p_module *r = vy_u64map_get(&p->shadow.modules, in->ino);
	if (r) {
		char name[256];
		memcpy(name, r + 1, r->name_len); /* at most 255: the shadow checked it */
		name[r->name_len] = 0;
		vy_p_module where = *r;
		commit_module(p, in, &where, name);
	}
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_inode(struct vy_fs *fs, struct vy_inode *in)
{
	vy_persist *p = writer_of(fs);
	if (p && in->kind == VY_MODULE)
		module_attrs(p, in);
	if (!p || !kept(in))
		return;
	if (vy_group_on(p)) { /* read as it is when the group is kept */
		add_live(p, VY_P_INODE, in);
		return;
	}
	pthread_mutex_lock(&p->lock);
	uint32_t len = vy_persist_inode_record(in, p->scratch);
	vy_persist_commit(p, VY_P_INODE, p->scratch, len);
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_name(struct vy_fs *fs, struct vy_inode *dir, const char *name)
{
	vy_persist *p = writer_of(fs);
	if (!p || !kept(dir) || dir->kind != VY_DIR)
		return;
	const vy_dirent *d = vy_dir_find(&dir->dir, name);
	size_t nl = strlen(name);
	pthread_mutex_lock(&p->lock);
	vy_p_name *r = (void *)p->scratch;
	*r = (vy_p_name){.parent = dir->ino, .ino = d ? d->ino : 0, .cookie = d ? d->cookie : 0, .name_len = (uint32_t)nl};
	memcpy(p->scratch + sizeof(*r), name, nl);
	append(p, VY_P_NAME, r, (uint32_t)(sizeof(*r) + nl));
	pthread_mutex_unlock(&p->lock);
}

static void commit_xattrs(vy_persist *p, vy_inode *in);

void vy_persist_adopted(struct vy_fs *fs, struct vy_inode *dir, const char *name, struct vy_inode *in)
{
	vy_persist *p = writer_of(fs);
	if (!p || !kept(dir) || !kept(in) || dir->kind != VY_DIR)
		return;
	const vy_dirent *d = vy_dir_find(&dir->dir, name);
	size_t nl = strlen(name);
	if (!d || nl > 255)
		return;
	pthread_mutex_lock(&p->lock);
	uint32_t len = vy_persist_inode_record(in, p->scratch);
	vy_persist_commit(p, VY_P_INODE, p->scratch, len);
	if (in->xattrs.n)
		commit_xattrs(p, in);
	vy_p_name *r = (void *)p->scratch;
	*r = (vy_p_name){.parent = dir->ino, .ino = d->ino, .cookie = d->cookie, .name_len = (uint32_t)nl};
	memcpy(p->scratch + sizeof(*r), name, nl);
	vy_persist_commit(p, VY_P_NAME, r, (uint32_t)(sizeof(*r) + nl));
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_lost(struct vy_fs *fs, struct vy_inode *dir, const char *name, struct vy_inode *in)
{
	vy_persist *p = writer_of(fs);
	size_t nl = strlen(name);
	if (!p || !kept(dir) || dir->kind != VY_DIR || nl > 255)
		return;
	pthread_mutex_lock(&p->lock);
	vy_p_name *r = (void *)p->scratch;
	*r = (vy_p_name){.parent = dir->ino, .name_len = (uint32_t)nl}; /* ino 0: gone */
	memcpy(p->scratch + sizeof(*r), name, nl);
	vy_persist_commit(p, VY_P_NAME, r, (uint32_t)(sizeof(*r) + nl));
	uint32_t len = vy_persist_inode_record(dir, p->scratch);
	vy_persist_commit(p, VY_P_INODE, p->scratch, len);
	if (kept(in)) {
		len = vy_persist_inode_record(in, p->scratch);
		vy_persist_commit(p, VY_P_INODE, p->scratch, len);
	}
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_gone(struct vy_fs *fs, uint64_t ino)
{
	vy_persist *p = writer_of(fs);
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	if (vy_group_on(p)) {
		if (!vy_group_gone(ino)) /* and what the group would read of it goes */
			vy_persist_no_memory(p);
	} else if (vy_u64map_get(&p->shadow.nodes, ino)) { /* never kept: nothing to forget */
		vy_p_gone r = {.ino = ino};
		vy_persist_commit(p, VY_P_GONE, &r, sizeof(r));
	}
	pthread_mutex_unlock(&p->lock);
}

/* What a request's group holds beside an inode's xattrs: its header, its
 * reply, the inode's record with a symlink's target, a lookup count, and
 * each record's head. */
#define GROUP_ROOM (8u << 10)

bool vy_persist_xattr_fits(struct vy_fs *fs, const struct vy_inode *in, const char *name, size_t size)
{
	vy_persist *p = writer_of(fs);
	if (!p || !kept(in))
		return true;
	/* The record (vy_persist_xattrs): each entry its name and value and
	 * 8 bytes, where the inode's total counts a NUL. */
	const vy_xattrs *x = &in->xattrs;
	const vy_xattr *old = vy_xattrs_get(x, name);
	uint64_t nl = strlen(name), now = sizeof(vy_p_xattrs) + x->bytes + 7 * (uint64_t)x->n;
	uint64_t bytes = now - (old ? 8 + nl + old->size : 0) + 8 + nl + size;
	uint64_t max = vy_state_record_max(p->st);
	max = max > GROUP_ROOM ? max - GROUP_ROOM : 0;
	max = max < SCRATCH_BYTES ? max : SCRATCH_BYTES;
	max = max < CHUNK_BYTES - sizeof(vy_p_head) ? max : CHUNK_BYTES - sizeof(vy_p_head);
	if (!strcmp(name, VY_ACL_DEFAULT) && sizeof(vy_p_xattrs) + 2 * (8 + sizeof(VY_ACL_DEFAULT) + size) > max)
		return false;
	return bytes <= max;
}

/* Every xattr of `in` as one record: kept with the request (`grouped`)
 * or at once. Lock held. */
static void xattrs_record(vy_persist *p, vy_inode *in, bool grouped)
{
	vy_p_xattrs *r = (void *)p->scratch;
	*r = (vy_p_xattrs){.ino = in->ino, .n = (uint32_t)in->xattrs.n};
	size_t at = sizeof(*r);
	for (size_t i = 0; i < in->xattrs.n; i++) {
		const vy_xattr *x = &in->xattrs.v[i];
		uint32_t nl = (uint32_t)strlen(x->name), vl = (uint32_t)x->size;
		if (at + 8 + (size_t)nl + vl > SCRATCH_BYTES) { /* past vy_persist_xattr_fits: cannot be */
			vy_error e;
			vy_fail(&e, VY_EINVAL, "report this bug", "inode %llu's xattrs exceed their total",
				(unsigned long long)in->ino);
			vy_persist_lose(p, &e);
			return;
		}
		memcpy(p->scratch + at, &nl, 4);
		memcpy(p->scratch + at + 4, &vl, 4);
		memcpy(p->scratch + at + 8, x->name, nl);
		memcpy(p->scratch + at + 8 + nl, x->value, vl);
		at += 8 + (size_t)nl + vl;
	}
	if (grouped)
		append(p, VY_P_XATTRS, r, (uint32_t)at);
	else
		vy_persist_commit(p, VY_P_XATTRS, r, (uint32_t)at);
}

static void commit_xattrs(vy_persist *p, vy_inode *in)
{
	xattrs_record(p, in, false);
}

void vy_persist_xattrs(struct vy_fs *fs, struct vy_inode *in)
{
	vy_persist *p = writer_of(fs);
	if (!p || !kept(in))
		return;
	pthread_mutex_lock(&p->lock);
	xattrs_record(p, in, true);
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_layout(struct vy_fs *fs, struct vy_inode *in)
{
	vy_persist *p = writer_of(fs);
	if (!p || in->kind != VY_FILE)
		return;
	vy_keep_layout *l = malloc(sizeof(*l));
	vy_error e;
	vy_err rc = !l ? vy_fail(&e, VY_ENOMEM, "free host memory", "no memory for a file's layout")
		    : in->buf ? vy_store_keep_layout(vy_fs_core(fs, in)->store, in->buf, l, &e)
			      : VY_OK;
	pthread_mutex_lock(&p->lock);
	if (rc == VY_ENOTSUP && !p->said_lost) {
		p->said_lost = true; /* once a mount: the rest of the namespace survives */
		vy_log(LOG_WARNING, "inode %llu: %s; its bytes (and those of files like it) will not survive this daemon's "
				    "death", (unsigned long long)in->ino, e.msg);
	}
	if (rc != VY_OK && rc != VY_ENOTSUP) {
		vy_persist_lose(p, &e);
	} else {
		vy_p_layout *r = (void *)p->scratch;
		bool lost = rc == VY_ENOTSUP;
		uint32_t n = in->buf && !lost ? l->n : 0;
		*r = (vy_p_layout){.ino = in->ino, .cap = in->buf ? in->cap : 0, .holes = in->buf ? in->holes : 0,
				   .dev = in->dev, .lost = lost, .n = n, .lead = in->buf ? in->lead : 0};
		memcpy(p->scratch + sizeof(*r), l->piece, n * sizeof(vy_keep_piece));
		/* Never held for a request: the memory a layout drops is dropped
		 * from the keeper now, so no older layout may outlive it. */
		vy_persist_commit(p, VY_P_LAYOUT, r, (uint32_t)(sizeof(*r) + n * sizeof(vy_keep_piece)));
	}
	pthread_mutex_unlock(&p->lock);
	free(l);
}

vy_err vy_persist_start(struct vy_fs *fs, struct vy_state *st, struct vy_shadow *from, vy_error *e)
{
	vy_persist *p = calloc(1, sizeof(*p));
	uint8_t *scratch = malloc(SCRATCH_BYTES);
	if (!p || !scratch || pthread_mutex_init(&p->lock, NULL) != 0) {
		free(p);
		free(scratch);
		return vy_fail(e, VY_ENOMEM, "free host memory, or mount with survive=off", "no memory for the kept state");
	}
	p->st = st;
	p->scratch = scratch;
	p->takeover = (uint32_t)fs->takeovers;
	if (from) {
		p->shadow = *from; /* taken */
		memset(from, 0, sizeof(*from));
		vy_answers_prune(&p->shadow.answers, p->takeover);
	} else {
		vy_shadow_init(&p->shadow);
	}
	fs->persist = p;
	if (!from) {
		pthread_mutex_lock(&p->lock);
		vy_p_ns ns = {.next_ino = fs->next_ino, .generation = fs->generation, .sequences = p->shadow.sequences};
		vy_persist_commit(p, VY_P_NS, &ns, sizeof(ns));
		pthread_mutex_unlock(&p->lock);
		vy_inode *root = vy_fs_inode(fs, VY_NS_ROOT);
		vy_persist_inode(fs, root);
		pthread_rwlock_rdlock(&root->lock);
		vy_persist_xattrs(fs, root);
		pthread_rwlock_unlock(&root->lock);
		if (__atomic_load_n(&p->broken, __ATOMIC_ACQUIRE))
			return vy_fail(e, VY_EINTERNAL, "mount with survive=off", "cannot start the kept state");
	}
	return VY_OK;
}

void vy_persist_stop(struct vy_fs *fs)
{
	vy_persist *p = writer_of(fs);
	if (!p)
		return;
	fs->persist = NULL;
	vy_shadow_destroy(&p->shadow);
	pthread_mutex_destroy(&p->lock);
	free(p->scratch);
	free(p);
}

void vy_persist_counts_get(struct vy_fs *fs, vy_persist_counts *out)
{
	vy_persist *p = writer_of(fs);
	memset(out, 0, sizeof(*out));
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	*out = p->counts;
	out->failures = __atomic_load_n(&p->counts.failures, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&p->lock);
}

void vy_persist_memory_lost(struct vy_fs *fs, const char *why)
{
	vy_persist *p = writer_of(fs);
	if (!p)
		return;
	vy_error e;
	vy_fail(&e, VY_EMFILE, "umount and mount again; keep fewer, larger files, or raise the open-file limit (ulimit -n)",
		"file memory could not be handed to the keeper: %s", why);
	vy_persist_lose(p, &e);
}
