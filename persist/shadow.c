/* The kept namespace (shadow.h). */
#include "persist/shadow.h"
#include "core/checked.h"
#include "persist/answers.h"
#include "persist/format.h"
#include "ns/ns.h"

#include <stdlib.h>
#include <string.h>

#define NAME_MAX_BYTES 255u
#define TARGET_MAX_BYTES 4096u

void vy_shadow_init(vy_shadow *s)
{
	memset(s, 0, sizeof(*s));
	vy_u64map_init(&s->nodes);
	vy_u64map_init(&s->handles);
	vy_u64map_init(&s->ctls);
	vy_u64map_init(&s->mapconns);
	vy_u64map_init(&s->modules);
	vy_u64map_init(&s->answers);
	s->next_ino = VY_NS_ROOT + 1;
}

static void node_free(vy_shadow_node *n)
{
	free(n->inode);
	free(n->xattrs);
	free(n->layout);
	free(n->tier);
	if (n->has_names)
		vy_dir_destroy(&n->names);
	free(n);
}

void vy_shadow_destroy(vy_shadow *s)
{
	uint64_t k;
	void *v;
	for (size_t i = 0; vy_u64map_next(&s->nodes, &i, &k, &v);)
		node_free(v);
	vy_u64map_destroy(&s->nodes);
	for (size_t i = 0; vy_u64map_next(&s->handles, &i, &k, &v);)
		free(v);
	vy_u64map_destroy(&s->handles);
	for (size_t i = 0; vy_u64map_next(&s->ctls, &i, &k, &v);)
		free(v);
	vy_u64map_destroy(&s->ctls);
	for (size_t i = 0; vy_u64map_next(&s->mapconns, &i, &k, &v);)
		free(v);
	vy_u64map_destroy(&s->mapconns);
	for (size_t i = 0; vy_u64map_next(&s->modules, &i, &k, &v);)
		free(v);
	vy_u64map_destroy(&s->modules);
	vy_answers_destroy(&s->answers);
}

void vy_shadow_forget_mapconn(vy_shadow *s, uint64_t slot)
{
	free(vy_u64map_remove(&s->mapconns, slot));
}

void vy_shadow_forget_module(vy_shadow *s, uint64_t ino)
{
	free(vy_u64map_remove(&s->modules, ino));
}

static uint32_t mapconn_bytes(const vy_p_mapconn *r)
{
	return (uint32_t)(sizeof(*r) + r->n * sizeof(vy_p_mapping));
}

/* A copy of the record `len` bytes at r, kept under `key` in place of
 * the one there; false (the old one kept) without memory. */
static bool keep_copy(vy_u64map *m, uint64_t key, const void *r, uint32_t len)
{
	void *c = malloc(len), *old = vy_u64map_get(m, key);
	if (!c || !vy_u64map_put(m, key, c)) {
		free(c);
		return false;
	}
	memcpy(c, r, len);
	free(old);
	return true;
}

static vy_err apply_mapconn(vy_shadow *s, const vy_p_mapconn *r, uint32_t len, vy_error *e);
static vy_err apply_module(vy_shadow *s, const vy_p_module *r, uint32_t len, vy_error *e);
static vy_err apply_tier(vy_shadow *s, const vy_p_tier *r, uint32_t len, vy_error *e);

void vy_shadow_forget_handle(vy_shadow *s, uint64_t id)
{
	free(vy_u64map_remove(&s->handles, id));
	free(vy_u64map_remove(&s->ctls, id));
}

void vy_shadow_forget(vy_shadow *s, uint64_t ino)
{
	vy_shadow_node *n = vy_u64map_remove(&s->nodes, ino);
	if (n)
		node_free(n);
}

static vy_err bad(vy_error *e, uint16_t type, const char *what)
{
	return vy_fail(e, VY_EINVAL, "umount and mount again: the kept state is damaged",
		       "kept state: a record of type %u %s", type, what);
}

static vy_shadow_node *node_of(vy_shadow *s, uint64_t ino)
{
	vy_shadow_node *n = vy_u64map_get(&s->nodes, ino);
	if (n)
		return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->ino = ino;
	if (!vy_u64map_put(&s->nodes, ino, n)) {
		free(n);
		return NULL;
	}
	return n;
}

/* Replace *slot with a copy of p. */
static bool keep(uint8_t **slot, uint32_t *slot_len, const void *p, uint32_t len)
{
	if (*slot && *slot_len == len && len) { /* the same shape again (a write's size and times): in place */
		memcpy(*slot, p, len);
		return true;
	}
	uint8_t *c = malloc(len ? len : 1);
	if (!c)
		return false;
	memcpy(c, p, len);
	free(*slot);
	*slot = c;
	*slot_len = len;
	return true;
}

static bool good_name(const char *name, uint32_t len)
{
	if (len == 0 || len > NAME_MAX_BYTES || memchr(name, '/', len) || memchr(name, 0, len))
		return false;
	return !(len == 1 && name[0] == '.') && !(len == 2 && name[0] == '.' && name[1] == '.');
}

static bool good_xattrs(const uint8_t *p, uint32_t len)
{
	const vy_p_xattrs *x = (const void *)p;
	uint64_t at = sizeof(*x);
	for (uint32_t i = 0; i < x->n; i++) {
		uint32_t nl, vl;
		if (len - at < 8)
			return false;
		memcpy(&nl, p + at, 4);
		memcpy(&vl, p + at + 4, 4);
		at += 8;
		if (nl == 0 || nl > NAME_MAX_BYTES || (uint64_t)nl + vl > len - at || memchr(p + at, 0, nl))
			return false;
		at += (uint64_t)nl + vl;
	}
	return at == len;
}

static vy_err apply_name(vy_shadow *s, const vy_p_name *r, const char *raw, vy_error *e)
{
	char name[NAME_MAX_BYTES + 1];
	memcpy(name, raw, r->name_len);
	name[r->name_len] = 0;
	vy_shadow_node *p = node_of(s, r->parent);
	if (!p)
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a directory");
	if (!p->has_names) {
		vy_dir_init(&p->names);
		p->has_names = true;
	}
	vy_dirent *d = vy_dir_find(&p->names, name);
	if (d && r->ino && d->cookie == r->cookie) {
		d->ino = r->ino; /* as a rename over a name does: its place stays */
		return VY_OK;
	}
	if (d)
		vy_dir_remove(&p->names, name);
	if (!r->ino)
		return VY_OK;
	const vy_dirent *at = vy_dir_next(&p->names, r->cookie - 1);
	if (at && at->cookie == r->cookie)
		return bad(e, VY_P_NAME, "takes the place of another name");
	if (!vy_dir_add_at(&p->names, name, r->ino, r->cookie))
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a name");
	return VY_OK;
}

static vy_err apply_group(vy_shadow *s, const uint8_t *p, uint32_t len, uint64_t seq, vy_error *e);

vy_err vy_shadow_apply(vy_shadow *s, uint16_t type, const void *p, uint32_t len, uint64_t seq, vy_error *e)
{
	switch (type) {
	case VY_P_GROUP:
		return apply_group(s, p, len, seq, e);
	case VY_P_NS: {
		if (len != sizeof(vy_p_ns) && len != VY_P_NS_V3_BYTES)
			return bad(e, type, "has the wrong length");
		vy_p_ns r0 = {0}, *r = &r0;
		memcpy(r, p, len);
		if (r->next_ino > s->next_ino)
			s->next_ino = r->next_ino;
		if (r->sequences > s->sequences)
			s->sequences = r->sequences;
		s->generation = r->generation;
		s->has_ns = true;
		return VY_OK;
	}
	case VY_P_INODE: {
		const vy_p_inode *r = p;
		if (len < sizeof(*r) || len - sizeof(*r) != r->target_len || r->ino == 0 || r->ino == UINT64_MAX)
			return bad(e, type, "has the wrong length or no inode number");
		if (r->kind != VY_DIR && r->kind != VY_FILE && r->kind != VY_SYMLINK && r->kind != VY_SPECIAL)
			return bad(e, type, "names a kind of inode that is not kept");
		if ((r->kind == VY_SYMLINK) != (r->target_len > 0) || r->target_len > TARGET_MAX_BYTES ||
		    memchr((const uint8_t *)p + sizeof(*r), 0, r->target_len))
			return bad(e, type, "has a symlink target that is not one");
		vy_shadow_node *n = node_of(s, r->ino);
		if (!n || !keep(&n->inode, &n->inode_len, p, len))
			return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for an inode");
		if (r->ino >= s->next_ino)
			s->next_ino = r->ino + 1;
		return VY_OK;
	}
	case VY_P_NAME: {
		const vy_p_name *r = p;
		if (len < sizeof(*r) || len - sizeof(*r) != r->name_len || r->parent == 0 ||
		    (r->ino && (r->cookie == 0 || r->cookie == UINT64_MAX)) || !good_name((const char *)p + sizeof(*r), r->name_len))
			return bad(e, type, "is not a name");
		return apply_name(s, r, (const char *)p + sizeof(*r), e);
	}
	case VY_P_GONE: {
		if (len != sizeof(vy_p_gone))
			return bad(e, type, "has the wrong length");
		vy_shadow_node *n = vy_u64map_remove(&s->nodes, ((const vy_p_gone *)p)->ino);
		if (n)
			node_free(n);
		vy_shadow_forget_module(s, ((const vy_p_gone *)p)->ino);
		return VY_OK;
	}
	case VY_P_XATTRS: {
		const vy_p_xattrs *r = p;
		if (len < sizeof(*r) || r->ino == 0 || !good_xattrs(p, len))
			return bad(e, type, "is not a list of xattrs");
		vy_shadow_node *n = node_of(s, r->ino);
		if (!n || !keep(&n->xattrs, &n->xattrs_len, p, len))
			return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for xattrs");
		return VY_OK;
	}
	case VY_P_LAYOUT: {
		/* Format 7's ends before the lead: kept as format 8's, lead 0.
		 * The two differ in length by 8, pieces by 32: never confused. */
		bool v7 = len % sizeof(vy_keep_piece) == VY_P_LAYOUT_V7_BYTES % sizeof(vy_keep_piece);
		uint32_t head = v7 ? VY_P_LAYOUT_V7_BYTES : sizeof(vy_p_layout);
		vy_p_layout r = {0};
		if (len < head)
			return bad(e, type, "is not a layout");
		memcpy(&r, p, head);
		if (r.n > VY_CHUNKS_MAX || len - head != (uint64_t)r.n * sizeof(vy_keep_piece) || r.ino == 0 ||
		    r.holes > r.cap || r.lost > 1 || (r.lost && r.n) || r.lead > VY_STORE_LEAD_MAX || r.zero ||
		    (r.lead && r.cap == 0) || r.cap > UINT64_MAX - r.lead)
			return bad(e, type, "is not a layout");
		vy_shadow_node *n = node_of(s, r.ino);
		bool kept = n && !v7 && keep(&n->layout, &n->layout_len, p, len);
		uint8_t *c = n && v7 ? malloc(sizeof(r) + (size_t)r.n * sizeof(vy_keep_piece)) : NULL;
		if (c) {
			memcpy(c, &r, sizeof(r));
			memcpy(c + sizeof(r), (const uint8_t *)p + head, (size_t)r.n * sizeof(vy_keep_piece));
			free(n->layout);
			n->layout = c;
			n->layout_len = (uint32_t)(sizeof(r) + r.n * sizeof(vy_keep_piece));
			kept = true;
		}
		if (!kept)
			return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a layout");
		n->layout_seq = seq;
		return VY_OK;
	}
	case VY_P_HANDLE: {
		const vy_p_handle *r = p;
		/* Its index below the table's cap: a live table gives out
		 * one past it only with the cap's ids live and a slot retired
		 * (ns/handles.c), and a successor takes an id back by making
		 * every slot below it (an index near 2^32 asked for 160 GiB). */
		if (len != sizeof(*r) || (uint32_t)(r->id >> 32) == 0 || (uint32_t)r->id >= VY_NS_HANDLES_MAX ||
		    (r->kind != VY_HANDLE_FILE && r->kind != VY_HANDLE_DIR))
			return bad(e, type, "is not a handle");
		if (r->ino == 0) {
			vy_shadow_forget_handle(s, r->id);
			return VY_OK;
		}
		vy_p_handle *c = vy_u64map_get(&s->handles, r->id);
		if (!c && (c = malloc(sizeof(*c))) && !vy_u64map_put(&s->handles, r->id, c)) {
			free(c);
			c = NULL;
		}
		if (!c)
			return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a handle");
		*c = *r;
		return VY_OK;
	}
	case VY_P_CTL: {
		const vy_p_ctl *r = p;
		if (len < sizeof(*r) || len - sizeof(*r) != r->reply_len || r->reply_len > VY_P_CTL_REPLY_MAX ||
		    (r->running >> 63) || r->next_line < 1)
			return bad(e, type, "is not a control file's state");
		if (!vy_u64map_get(&s->handles, r->id))
			return bad(e, type, "names no open handle");
		if (r->seq > s->sequences)
			s->sequences = r->seq;
		if (!keep_copy(&s->ctls, r->id, p, len))
			return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a control file");
		return VY_OK;
	}
	case VY_P_MAPCONN:
		return apply_mapconn(s, p, len, e);
	case VY_P_MODULE:
		return apply_module(s, p, len, e);
	case VY_P_TIER:
		return apply_tier(s, p, len, e);
	case VY_P_WBEHIND: {
		const vy_p_wbehind *r = p;
		uint64_t need;
		if (len != sizeof(*r) || (r->slot && (r->slots == 0 || r->slots > VY_P_WBEHIND_SLOTS_MAX || r->slot_bytes == 0 ||
						      r->slot_bytes > VY_P_WBEHIND_SLOT_MAX || r->slot_bytes % 4096 ||
						      !vy_mul_u64(r->slots, r->slot_bytes, &need) || r->bytes < need)))
			return bad(e, type, "is not a write-behind region");
		s->wbehind = *r;
		return VY_OK;
	}
	case VY_P_LOOKUP: {
		const vy_p_lookup *r = p;
		if (len != sizeof(*r) || r->ino == 0)
			return bad(e, type, "is not a lookup count");
		vy_shadow_node *n = vy_u64map_get(&s->nodes, r->ino);
		if (!n && r->nlookup && !(n = node_of(s, r->ino)))
			return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for an inode");
		if (n)
			n->nlookup = r->nlookup;
		return VY_OK;
	}
	default:
		return bad(e, type, "is of a type this vyrefs does not know");
	}
}

static vy_err apply_mapconn(vy_shadow *s, const vy_p_mapconn *r, uint32_t len, vy_error *e)
{
	if (len < sizeof(*r) || r->n > VY_P_MAPCONN_MAPS_MAX || len != mapconn_bytes(r) || r->slot == 0 ||
	    r->open > 1 || r->phase > 2 || (r->unique >> 63))
		return bad(e, VY_P_MAPCONN, "is not a client connection");
	if (!r->open) {
		vy_shadow_forget_mapconn(s, r->slot);
		return VY_OK;
	}
	if (!keep_copy(&s->mapconns, r->slot, r, len))
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a client connection");
	return VY_OK;
}

static bool module_name(const char *name, uint32_t len)
{
	static const char *const ext[] = {".ptx", ".cubin", ".fatbin", ".cu"};
	if (!good_name(name, len))
		return false;
	for (size_t i = 0; i < sizeof(ext) / sizeof(ext[0]); i++) {
		size_t el = strlen(ext[i]);
		if (len > el && !memcmp(name + len - el, ext[i], el) && memchr(name, '.', len) == name + len - el)
			return true;
	}
	return false;
}

static vy_err apply_module(vy_shadow *s, const vy_p_module *r, uint32_t len, vy_error *e)
{
	if (len < sizeof(*r) || len - sizeof(*r) != r->name_len || r->ino == 0 || r->ino == UINT64_MAX ||
	    r->log_ino == UINT64_MAX || (r->slot && (r->cookie == 0 || r->cookie == UINT64_MAX || r->bytes == 0 ||
						     r->bytes > VY_P_MODULE_MAX_BYTES || (r->log_ino && !r->log_cookie) ||
						     !module_name((const char *)(r + 1), r->name_len))))
		return bad(e, VY_P_MODULE, "is not a module file");
	if (!r->slot) {
		vy_shadow_forget_module(s, r->ino);
		return VY_OK;
	}
	if (!keep_copy(&s->modules, r->ino, r, len))
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a module");
	uint64_t top = r->log_ino > r->ino ? r->log_ino : r->ino;
	if (top >= s->next_ino)
		s->next_ino = top + 1;
	return VY_OK;
}

/* `n` runs at r: each of one unit or more, in order, apart, and within
 * a file's units (a byte offset fits 63 bits). */
static bool good_runs(const vy_p_run *r, uint32_t n)
{
	const uint64_t units_max = (UINT64_MAX >> 1) / (2u << 20);
	for (uint32_t i = 0; i < n; i++) {
		if (r[i].count == 0 || r[i].first > units_max || r[i].count > units_max - r[i].first)
			return false;
		if (i && r[i].first <= r[i - 1].first + r[i - 1].count)
			return false;
	}
	return true;
}

/* Whether every dirty run lies within a present run: a unit DIR lacks is
 * on the device. */
static bool dirty_present(const vy_p_run *present, uint32_t np, const vy_p_run *dirty, uint32_t nd)
{
	uint32_t j = 0;
	for (uint32_t i = 0; i < nd; i++) {
		while (j < np && present[j].first + present[j].count <= dirty[i].first)
			j++;
		if (j == np || present[j].first > dirty[i].first ||
		    dirty[i].first + dirty[i].count > present[j].first + present[j].count)
			return false;
	}
	return true;
}

static vy_err apply_tier(vy_shadow *s, const vy_p_tier *r, uint32_t len, vy_error *e)
{
	if (len < sizeof(*r) || r->ino == 0 || r->ino == UINT64_MAX || r->present > VY_P_TIER_RUNS_MAX ||
	    r->dirty > VY_P_TIER_RUNS_MAX || len - sizeof(*r) != (uint64_t)(r->present + r->dirty) * sizeof(vy_p_run) ||
	    (r->flags & ~VY_P_TIER_PINNED) || r->zero || r->src > (UINT64_MAX >> 1) || r->size > (UINT64_MAX >> 1))
		return bad(e, VY_P_TIER, "is not a backing directory's file");
	const vy_p_run *present = (const void *)(r + 1), *dirty = present + r->present;
	if (!good_runs(present, r->present) || !good_runs(dirty, r->dirty) ||
	    !dirty_present(present, r->present, dirty, r->dirty))
		return bad(e, VY_P_TIER, "has units that are not a file's");
	vy_shadow_node *n = node_of(s, r->ino);
	if (!n || !keep(&n->tier, &n->tier_len, r, len))
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for a backing directory's file");
	return VY_OK;
}

/* A reply starts with the kernel's 16-byte fuse_out_header. */
#define REPLY_HEADER_BYTES 16u

static uint64_t pad8(uint64_t n)
{
	return (n + 7) & ~7ull;
}

/* Every record of a group in place, before any is applied: a group is
 * applied whole or refused whole. */
static bool group_framed(const uint8_t *p, uint32_t len, const vy_p_group *g)
{
	/* The reply is padded to 8 when records follow it. */
	uint64_t at = sizeof(*g) + (g->records ? pad8(g->reply_len) : g->reply_len);
	for (uint32_t i = 0; i < g->records; i++) {
		vy_p_head h;
		if (at > len || len - at < sizeof(h))
			return false;
		memcpy(&h, p + at, sizeof(h));
		if (h.type == VY_P_GROUP || sizeof(h) + pad8(h.len) > len - at)
			return false;
		at += sizeof(h) + pad8(h.len);
	}
	return at == len;
}

static vy_err apply_group(vy_shadow *s, const uint8_t *p, uint32_t len, uint64_t seq, vy_error *e)
{
	vy_p_group g;
	if (len < sizeof(g))
		return bad(e, VY_P_GROUP, "has the wrong length");
	memcpy(&g, p, sizeof(g));
	if (g.unique == 0 || (g.unique >> 63) || g.thread == 0 || g.reply_len > VY_P_REPLY_MAX ||
	    (g.reply_len && g.reply_len < REPLY_HEADER_BYTES) || !group_framed(p, len, &g))
		return bad(e, VY_P_GROUP, "is not a request's group");
	uint64_t at = sizeof(g) + pad8(g.reply_len);
	for (uint32_t i = 0; i < g.records; i++) {
		vy_p_head h;
		memcpy(&h, p + at, sizeof(h));
		vy_err rc = vy_shadow_apply(s, h.type, p + at + sizeof(h), h.len, seq, e);
		if (rc != VY_OK)
			return rc;
		at += sizeof(h) + pad8(h.len);
	}
	if (!vy_answers_set(&s->answers, &g, p + sizeof(g)))
		return vy_fail(e, VY_ENOMEM, "free host memory", "kept state: no memory for an answer");
	return VY_OK;
}

static int node_order(const void *a, const void *b)
{
	const vy_shadow_node *x = *(vy_shadow_node *const *)a, *y = *(vy_shadow_node *const *)b;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

vy_err vy_shadow_by_ino(const vy_shadow *s, vy_shadow_node ***out, size_t *count, vy_error *e)
{
	size_t n = s->nodes.count, got = 0;
	*out = NULL;
	*count = 0;
	if (n == 0)
		return VY_OK;
	vy_shadow_node **a = malloc(n * sizeof(*a));
	if (!a)
		return vy_fail(e, VY_ENOMEM, "free host memory", "no memory to order %zu inodes", n);
	uint64_t k, lo = UINT64_MAX, hi = 0;
	void *v;
	for (size_t i = 0; vy_u64map_next(&s->nodes, &i, &k, &v);) {
		lo = k < lo ? k : lo;
		hi = k > hi ? k : hi;
	}
	/* Numbers are given out in turn: most often a few holes, placed in
	 * one pass by the map's keys (no node read: each would be a cache
	 * miss); a sparse set is sorted. */
	vy_shadow_node **slot = hi - lo < 4 * (uint64_t)n ? calloc(hi - lo + 1, sizeof(*slot)) : NULL;
	if (slot) {
		for (size_t i = 0; vy_u64map_next(&s->nodes, &i, &k, &v);)
			slot[k - lo] = v;
		for (uint64_t i = 0; i <= hi - lo && got < n; i++)
			if (slot[i])
				a[got++] = slot[i];
		free(slot);
	} else {
		for (size_t i = 0; got < n && vy_u64map_next(&s->nodes, &i, &k, &v);)
			a[got++] = v;
		qsort(a, got, sizeof(*a), node_order);
	}
	*out = a;
	*count = got;
	return VY_OK;
}

vy_err vy_shadow_dump(const vy_shadow *s, vy_shadow_emit_fn emit, void *ctx, vy_error *e)
{
	vy_p_ns ns = {.next_ino = s->next_ino, .generation = s->generation, .sequences = s->sequences};
	vy_shadow_node **order = NULL;
	size_t nodes = 0;
	vy_err rc = emit(ctx, VY_P_NS, &ns, sizeof(ns), e);
	if (rc == VY_OK) /* in number order: a load makes the nodes in it */
		rc = vy_shadow_by_ino(s, &order, &nodes, e);
	uint64_t k;
	void *v;
	for (size_t i = 0; rc == VY_OK && i < nodes; i++) {
		const vy_shadow_node *n = order[i];
		if (n->inode)
			rc = emit(ctx, VY_P_INODE, n->inode, n->inode_len, e);
		if (rc == VY_OK && n->xattrs)
			rc = emit(ctx, VY_P_XATTRS, n->xattrs, n->xattrs_len, e);
		if (rc == VY_OK && n->layout)
			rc = emit(ctx, VY_P_LAYOUT, n->layout, n->layout_len, e);
		if (rc == VY_OK && n->tier)
			rc = emit(ctx, VY_P_TIER, n->tier, n->tier_len, e);
		if (rc == VY_OK && n->nlookup) {
			vy_p_lookup l = {.ino = n->ino, .nlookup = n->nlookup};
			rc = emit(ctx, VY_P_LOOKUP, &l, sizeof(l), e);
		}
	}
	struct {
		vy_p_name h;
		char name[NAME_MAX_BYTES];
	} rec;
	for (size_t i = 0; rc == VY_OK && i < nodes; i++) {
		const vy_shadow_node *n = order[i];
		if (!n->has_names)
			continue;
		for (const vy_dirent *d = vy_dir_next(&n->names, 0); rc == VY_OK && d; d = vy_dir_next(&n->names, d->cookie)) {
			size_t nl = strlen(d->name);
			rec.h = (vy_p_name){.parent = n->ino, .ino = d->ino, .cookie = d->cookie, .name_len = (uint32_t)nl};
			memcpy(rec.name, d->name, nl);
			rc = emit(ctx, VY_P_NAME, &rec, (uint32_t)(sizeof(rec.h) + nl), e);
		}
	}
	for (size_t i = 0; rc == VY_OK && vy_u64map_next(&s->handles, &i, &k, &v);)
		rc = emit(ctx, VY_P_HANDLE, v, sizeof(vy_p_handle), e);
	for (size_t i = 0; rc == VY_OK && vy_u64map_next(&s->ctls, &i, &k, &v);)
		rc = emit(ctx, VY_P_CTL, v, (uint32_t)(sizeof(vy_p_ctl) + ((const vy_p_ctl *)v)->reply_len), e);
	for (size_t i = 0; rc == VY_OK && vy_u64map_next(&s->mapconns, &i, &k, &v);)
		rc = emit(ctx, VY_P_MAPCONN, v, mapconn_bytes(v), e);
	for (size_t i = 0; rc == VY_OK && vy_u64map_next(&s->modules, &i, &k, &v);)
		rc = emit(ctx, VY_P_MODULE, v, (uint32_t)(sizeof(vy_p_module) + ((const vy_p_module *)v)->name_len), e);
	if (rc == VY_OK && s->wbehind.slot)
		rc = emit(ctx, VY_P_WBEHIND, &s->wbehind, sizeof(s->wbehind), e);
	for (size_t i = 0; rc == VY_OK && vy_u64map_next(&s->answers, &i, &k, &v);)
		if (vy_answer_held(v))
			rc = emit(ctx, VY_P_GROUP, v, (uint32_t)vy_answer_bytes(v), e);
	free(order);
	return rc;
}
