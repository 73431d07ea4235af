/* The kept namespace's request groups (persist/shadow.c, persist/answers.c):
 * a group's records applied whole or refused whole, its answer kept by
 * thread and replaced by the thread's next, forgotten when sent, pruned
 * after VY_ANSWERS_TAKEOVERS takeovers, and carried through a dump. A
 * client connection's record: replaced whole, forgotten when it ends,
 * refused when malformed, carried through a dump. A loaded module's the
 * same, forgotten too when its inode goes. A handle's id past the handle
 * table's cap is refused. A backing mount's file: its runs checked (in
 * order, apart, dirty within present), carried through a dump, gone with
 * its inode. */
#include "ns/ns.h"
#include "persist/answers.h"
#include "persist/format.h"
#include "persist/shadow.h"
#include "tests/unit/support.h"

#include <string.h>

typedef struct built {
	uint8_t b[1024];
	uint32_t len;
} built;

static void put(built *g, const void *p, size_t n)
{
	memcpy(g->b + g->len, p, n);
	g->len += (uint32_t)((n + 7) & ~(size_t)7);
}

/* A group for request `unique` of `thread`, with a reply of `reply_len`
 * bytes (byte i is `fill`), then an inode record and a lookup count for
 * inode `ino`. */
static built group(uint64_t unique, uint32_t thread, uint32_t takeover, uint32_t reply_len, uint8_t fill, uint64_t ino)
{
	built g = {0};
	vy_p_group h = {.unique = unique, .thread = thread, .takeover = takeover, .reply_len = reply_len, .records = 2};
	put(&g, &h, sizeof(h));
	uint8_t reply[64];
	memset(reply, fill, sizeof(reply));
	put(&g, reply, reply_len);
	vy_p_inode in = {.ino = ino, .kind = VY_FILE, .mode = 0100640, .nlink = 1};
	vy_p_head rh = {.len = sizeof(in), .type = VY_P_INODE};
	put(&g, &rh, sizeof(rh));
	put(&g, &in, sizeof(in));
	vy_p_lookup l = {.ino = ino, .nlookup = 2};
	rh = (vy_p_head){.len = sizeof(l), .type = VY_P_LOOKUP};
	put(&g, &rh, sizeof(rh));
	put(&g, &l, sizeof(l));
	return g;
}

static vy_err apply(vy_shadow *s, const built *g)
{
	vy_error e;
	return vy_shadow_apply(s, VY_P_GROUP, g->b, g->len, 9, &e);
}

static void group_applies_whole_with_its_answer(void)
{
	vy_shadow s;
	vy_shadow_init(&s);
	built g = group(7, 100, 0, 32, 0xab, 5);
	CHECK_EQ(apply(&s, &g), VY_OK);
	vy_shadow_node *n = vy_u64map_get(&s.nodes, 5);
	CHECK(n && n->inode && n->nlookup == 2);
	const vy_p_group *a = vy_answers_find(&s.answers, 7);
	CHECK(a && a->reply_len == 32 && a->records == 0 && ((const uint8_t *)(a + 1))[31] == 0xab);
	CHECK(vy_answers_find(&s.answers, 8) == NULL);
	vy_shadow_destroy(&s);
}

static void bad_group_refused_whole(void)
{
	vy_shadow s;
	vy_shadow_init(&s);
	built g = group(7, 100, 0, 32, 0xab, 5);
	vy_p_head rh;
	uint32_t second = (uint32_t)(sizeof(vy_p_group) + 32 + sizeof(rh) + sizeof(vy_p_inode));
	memcpy(&rh, g.b + second, sizeof(rh));
	rh.len = 4096; /* past the group's end */
	memcpy(g.b + second, &rh, sizeof(rh));
	CHECK_EQ(apply(&s, &g), VY_EINVAL);
	CHECK(vy_u64map_get(&s.nodes, 5) == NULL); /* the first record was not applied either */
	CHECK(vy_answers_find(&s.answers, 7) == NULL);
	built nested = group(7, 100, 0, 32, 0xab, 5);
	rh = (vy_p_head){.len = sizeof(vy_p_inode), .type = VY_P_GROUP};
	memcpy(nested.b + sizeof(vy_p_group) + 32, &rh, sizeof(rh));
	CHECK_EQ(apply(&s, &nested), VY_EINVAL);
	built resent = group(7ull | 1ull << 63, 100, 0, 32, 0xab, 5); /* the kernel's resend bit is never kept */
	CHECK_EQ(apply(&s, &resent), VY_EINVAL);
	built shortreply = group(7, 100, 0, 8, 0xab, 5); /* less than a fuse_out_header */
	CHECK_EQ(apply(&s, &shortreply), VY_EINVAL);
	CHECK_EQ(s.nodes.count, 0u);
	vy_shadow_destroy(&s);
}

static void answers_by_thread_sent_and_pruned(void)
{
	vy_shadow s;
	vy_shadow_init(&s);
	built a = group(7, 100, 0, 16, 1, 5), b = group(8, 100, 0, 16, 2, 6), c = group(9, 200, 1, 16, 3, 7);
	CHECK_EQ(apply(&s, &a), VY_OK);
	CHECK_EQ(apply(&s, &b), VY_OK); /* thread 100's next answer: 7's was sent */
	CHECK_EQ(apply(&s, &c), VY_OK);
	CHECK(vy_answers_find(&s.answers, 7) == NULL);
	CHECK(vy_answers_find(&s.answers, 8) != NULL);
	CHECK_EQ(s.answers.count, 2u);
	vy_answers_sent(&s.answers, 0, 200, 8); /* another thread's: stays */
	CHECK(vy_answers_find(&s.answers, 8) != NULL);
	vy_answers_sent(&s.answers, 0, 100, 8);
	CHECK(vy_answers_find(&s.answers, 8) == NULL);
	vy_answers_forget(&s.answers, 9);
	CHECK(vy_answers_find(&s.answers, 9) == NULL);
	built d = group(10, 200, 1, 16, 4, 8);
	CHECK_EQ(apply(&s, &d), VY_OK); /* thread 200's entry holds an answer again */
	vy_answers_prune(&s.answers, 1 + VY_ANSWERS_TAKEOVERS); /* takeover 1 is kept that long */
	CHECK(vy_answers_find(&s.answers, 10) != NULL);
	vy_answers_prune(&s.answers, 2 + VY_ANSWERS_TAKEOVERS);
	CHECK_EQ(s.answers.count, 0u);
	vy_shadow_destroy(&s);
}

typedef struct dumped {
	vy_shadow *to;
	unsigned groups;
} dumped;

static vy_err reapply(void *ctx, uint16_t type, const void *p, uint32_t len, vy_error *e)
{
	dumped *d = ctx;
	d->groups += type == VY_P_GROUP;
	return vy_shadow_apply(d->to, type, p, len, 0, e);
}

static void answers_carried_through_a_dump(void)
{
	vy_shadow s, t;
	vy_shadow_init(&s);
	vy_shadow_init(&t);
	built g = group(7, 100, 0, 20, 0x5a, 5); /* a reply not a multiple of 8 */
	CHECK_EQ(apply(&s, &g), VY_OK);
	dumped d = {.to = &t};
	vy_error e;
	CHECK_EQ(vy_shadow_dump(&s, reapply, &d, &e), VY_OK);
	CHECK_EQ(d.groups, 1u);
	const vy_p_group *a = vy_answers_find(&t.answers, 7);
	CHECK(a && a->reply_len == 20 && ((const uint8_t *)(a + 1))[19] == 0x5a && a->thread == 100);
	vy_shadow_node *n = vy_u64map_get(&t.nodes, 5);
	CHECK(n && n->nlookup == 2);
	vy_shadow_destroy(&s);
	vy_shadow_destroy(&t);
}

/* Connection `slot`'s record with `n` mappings of inodes 10, 11, ... */
static built mapconn(uint32_t slot, uint32_t open, uint32_t n)
{
	built g = {0};
	vy_p_mapconn r = {.slot = slot, .open = open, .uid = 1000, .next_id = n, .unique = 4, .ref = n, .opcode = 3,
			  .phase = 2, .n = n};
	put(&g, &r, sizeof(r));
	for (uint32_t i = 0; i < n; i++) {
		vy_p_mapping m = {.id = i + 1, .ino = 10 + i, .bytes = 2u << 20};
		put(&g, &m, sizeof(m));
	}
	return g;
}

static vy_err apply_conn(vy_shadow *s, const built *g)
{
	vy_error e;
	return vy_shadow_apply(s, VY_P_MAPCONN, g->b, g->len, 9, &e);
}

static void client_connections_kept_whole(void)
{
	vy_shadow s, t;
	vy_shadow_init(&s);
	vy_shadow_init(&t);
	built one = mapconn(6, 1, 1), two = mapconn(6, 1, 2), other = mapconn(9, 1, 1);
	CHECK_EQ(apply_conn(&s, &one), VY_OK);
	CHECK_EQ(apply_conn(&s, &two), VY_OK); /* the same slot: replaced */
	CHECK_EQ(apply_conn(&s, &other), VY_OK);
	CHECK_EQ(s.mapconns.count, 2u);
	const vy_p_mapconn *r = vy_u64map_get(&s.mapconns, 6);
	CHECK(r && r->n == 2 && ((const vy_p_mapping *)(r + 1))[1].ino == 11);
	built bad = mapconn(6, 1, 2);
	bad.len -= 8; /* a mapping cut short */
	CHECK_EQ(apply_conn(&s, &bad), VY_EINVAL);
	built noslot = mapconn(0, 1, 1);
	CHECK_EQ(apply_conn(&s, &noslot), VY_EINVAL);
	CHECK_EQ(((const vy_p_mapconn *)vy_u64map_get(&s.mapconns, 6))->n, 2u); /* untouched */
	dumped d = {.to = &t};
	vy_error e;
	CHECK_EQ(vy_shadow_dump(&s, reapply, &d, &e), VY_OK);
	CHECK_EQ(t.mapconns.count, 2u);
	r = vy_u64map_get(&t.mapconns, 6);
	CHECK(r && r->n == 2 && r->phase == 2 && r->unique == 4 && ((const vy_p_mapping *)(r + 1))[0].id == 1);
	built ended = mapconn(6, 0, 0);
	CHECK_EQ(apply_conn(&s, &ended), VY_OK);
	CHECK(vy_u64map_get(&s.mapconns, 6) == NULL);
	CHECK_EQ(s.mapconns.count, 1u);
	vy_shadow_destroy(&s);
	vy_shadow_destroy(&t);
}

/* Module file `ino` named `name`, its image in keeper slot `slot`. */
static built module(uint64_t ino, uint32_t slot, const char *name)
{
	built g = {0};
	vy_p_module r = {.ino = ino, .cookie = 3, .log_ino = ino + 1, .log_cookie = 4, .bytes = 3193, .slot = slot,
			 .mode = 0100600, .name_len = (uint32_t)strlen(name)};
	memcpy(g.b, &r, sizeof(r));
	memcpy(g.b + sizeof(r), name, r.name_len);
	g.len = (uint32_t)sizeof(r) + r.name_len;
	return g;
}

static vy_err apply_module(vy_shadow *s, const built *g)
{
	vy_error e;
	return vy_shadow_apply(s, VY_P_MODULE, g->b, g->len, 9, &e);
}

static void modules_kept_whole(void)
{
	vy_shadow s, t;
	vy_shadow_init(&s);
	vy_shadow_init(&t);
	built k = module(40, 7, "k.ptx"), k2 = module(40, 8, "k.ptx"), p = module(50, 9, "p.cu");
	CHECK_EQ(apply_module(&s, &k), VY_OK);
	CHECK_EQ(apply_module(&s, &k2), VY_OK); /* loaded again: replaced */
	CHECK_EQ(apply_module(&s, &p), VY_OK);
	CHECK_EQ(s.modules.count, 2u);
	const vy_p_module *r = vy_u64map_get(&s.modules, 40);
	CHECK(r && r->slot == 8 && r->name_len == 5 && !memcmp(r + 1, "k.ptx", 5));
	CHECK_EQ(s.next_ino, 52u); /* past the log's number too */
	static const char *const bad_names[] = {"k.txt", "a.b.ptx", "k/x.ptx", ".ptx", ""};
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		built bad = module(40, 8, bad_names[i]);
		CHECK_EQ(apply_module(&s, &bad), VY_EINVAL);
	}
	built cut = module(40, 8, "k.ptx");
	cut.len -= 1; /* its name cut short */
	CHECK_EQ(apply_module(&s, &cut), VY_EINVAL);
	built huge = module(40, 8, "k.ptx");
	((vy_p_module *)huge.b)->bytes = VY_P_MODULE_MAX_BYTES + 1;
	CHECK_EQ(apply_module(&s, &huge), VY_EINVAL);
	CHECK_EQ(((const vy_p_module *)vy_u64map_get(&s.modules, 40))->slot, 8u); /* untouched */
	dumped d = {.to = &t};
	vy_error e;
	CHECK_EQ(vy_shadow_dump(&s, reapply, &d, &e), VY_OK);
	CHECK_EQ(t.modules.count, 2u);
	r = vy_u64map_get(&t.modules, 50);
	CHECK(r && r->slot == 9 && r->mode == 0100600 && r->name_len == 4 && !memcmp(r + 1, "p.cu", 4));
	built gone = module(40, 0, "");
	CHECK_EQ(apply_module(&s, &gone), VY_OK);
	CHECK(vy_u64map_get(&s.modules, 40) == NULL);
	vy_p_gone freed = {.ino = 50};
	CHECK_EQ(vy_shadow_apply(&s, VY_P_GONE, &freed, sizeof(freed), 9, &e), VY_OK);
	CHECK_EQ(s.modules.count, 0u);
	vy_shadow_destroy(&s);
	vy_shadow_destroy(&t);
}

/* The write-behind region's record: the last one wins, a bad shape is
 * refused and changes nothing, slot 0 forgets it, and a dump carries it. */
static void write_behind_region_kept_last(void)
{
	vy_shadow s, t;
	vy_shadow_init(&s);
	vy_shadow_init(&t);
	vy_error e;
	vy_p_wbehind r = {.slot = 7, .slots = 32, .slot_bytes = 4u << 20, .bytes = (128u << 20) + 4096};
	CHECK_EQ(vy_shadow_apply(&s, VY_P_WBEHIND, &r, sizeof(r), 9, &e), VY_OK);
	vy_p_wbehind bad[] = {
		{.slot = 8, .slots = 0, .slot_bytes = 4096, .bytes = 8192},
		{.slot = 8, .slots = VY_P_WBEHIND_SLOTS_MAX + 1, .slot_bytes = 4096, .bytes = UINT64_MAX},
		{.slot = 8, .slots = 2, .slot_bytes = 4097, .bytes = 1u << 20},
		{.slot = 8, .slots = 2, .slot_bytes = VY_P_WBEHIND_SLOT_MAX + 4096, .bytes = UINT64_MAX},
		{.slot = 8, .slots = 2, .slot_bytes = 4096, .bytes = 8191}, /* smaller than its slots */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(vy_shadow_apply(&s, VY_P_WBEHIND, &bad[i], sizeof(bad[i]), 9, &e), VY_EINVAL);
	CHECK_EQ(vy_shadow_apply(&s, VY_P_WBEHIND, &r, sizeof(r) - 1, 9, &e), VY_EINVAL);
	CHECK_EQ(s.wbehind.slot, 7u); /* untouched */
	dumped d = {.to = &t};
	CHECK_EQ(vy_shadow_dump(&s, reapply, &d, &e), VY_OK);
	CHECK(t.wbehind.slot == 7 && t.wbehind.bytes == r.bytes && t.wbehind.slot_bytes == r.slot_bytes);
	vy_p_wbehind none = {0};
	CHECK_EQ(vy_shadow_apply(&t, VY_P_WBEHIND, &none, sizeof(none), 9, &e), VY_OK);
	CHECK_EQ(t.wbehind.slot, 0u);
	vy_shadow_destroy(&s);
	vy_shadow_destroy(&t);
}

/* A file's layout: format 8's carries its lead; format 7's (32 bytes, no
 * lead) is kept as format 8's with lead 0; a lead past the store's most,
 * a lead on no buffer, or a length of neither shape is refused. */
static void layouts_of_both_formats(void)
{
	vy_shadow s;
	vy_shadow_init(&s);
	vy_error e;
	struct {
		vy_p_layout l;
		vy_keep_piece pc;
	} r = {.l = {.ino = 60, .cap = 6u << 20, .n = 1, .lead = 3688},
	       .pc = {.off = 0, .bytes = 8u << 20, .slot = 9}};
	CHECK_EQ(vy_shadow_apply(&s, VY_P_LAYOUT, &r, sizeof(r), 9, &e), VY_OK);
	vy_shadow_node *n = vy_u64map_get(&s.nodes, 60);
	CHECK(n && n->layout_len == sizeof(r) && ((vy_p_layout *)(void *)n->layout)->lead == 3688);
	/* Format 7's: the first 32 bytes of the record, then its pieces. */
	uint8_t v7[VY_P_LAYOUT_V7_BYTES + sizeof(vy_keep_piece)];
	r.l.ino = 61;
	memcpy(v7, &r.l, VY_P_LAYOUT_V7_BYTES);
	memcpy(v7 + VY_P_LAYOUT_V7_BYTES, &r.pc, sizeof(r.pc));
	CHECK_EQ(vy_shadow_apply(&s, VY_P_LAYOUT, v7, sizeof(v7), 9, &e), VY_OK);
	n = vy_u64map_get(&s.nodes, 61);
	CHECK(n && n->layout_len == sizeof(r));
	const vy_p_layout *k = (const void *)n->layout;
	CHECK(k->lead == 0 && k->n == 1 && k->cap == 6u << 20 && ((const vy_keep_piece *)(k + 1))->slot == 9);
	r.l.lead = VY_STORE_LEAD_MAX + 1;
	CHECK_EQ(vy_shadow_apply(&s, VY_P_LAYOUT, &r, sizeof(r), 9, &e), VY_EINVAL);
	r.l = (vy_p_layout){.ino = 62, .lead = 8};
	CHECK_EQ(vy_shadow_apply(&s, VY_P_LAYOUT, &r.l, sizeof(r.l), 9, &e), VY_EINVAL); /* no buffer, a lead */
	CHECK_EQ(vy_shadow_apply(&s, VY_P_LAYOUT, &r, sizeof(r) - 4, 9, &e), VY_EINVAL);
	CHECK(vy_u64map_get(&s.nodes, 62) == NULL || ((vy_shadow_node *)vy_u64map_get(&s.nodes, 62))->layout == NULL);
	vy_shadow_destroy(&s);
}

/* A handle's id: a generation and an index below the handle table's
 * cap, of a file or a directory; any other is refused (a successor would
 * make every slot below its index), changing nothing. */
static void handles_only_of_the_table(void)
{
	vy_shadow s;
	vy_shadow_init(&s);
	vy_error e;
	vy_p_handle ok = {.id = 1ull << 32 | (VY_NS_HANDLES_MAX - 1), .ino = 5, .kind = VY_HANDLE_FILE};
	CHECK_EQ(vy_shadow_apply(&s, VY_P_HANDLE, &ok, sizeof(ok), 9, &e), VY_OK);
	vy_p_handle bad[] = {
		{.id = 1ull << 32 | VY_NS_HANDLES_MAX, .ino = 5, .kind = VY_HANDLE_FILE},
		{.id = 0x9b9b9b9bull << 32 | 0x9b9b9b9b, .ino = 5, .kind = VY_HANDLE_DIR}, /* the fuzzer's */
		{.id = 1ull << 32 | UINT32_MAX, .ino = 5, .kind = VY_HANDLE_FILE},
		{.id = 7, .ino = 5, .kind = VY_HANDLE_FILE}, /* no generation */
		{.id = 1ull << 32 | 7, .ino = 5, .kind = 9},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(vy_shadow_apply(&s, VY_P_HANDLE, &bad[i], sizeof(bad[i]), 9, &e), VY_EINVAL);
	CHECK_EQ(s.handles.count, 1u);
	vy_shadow_destroy(&s);
}

/* A backing mount's file (vy_p_tier) with present runs p[0..np) and
 * dirty runs d[0..nd). */
typedef struct tier_rec {
	vy_p_tier t;
	vy_p_run r[4];
} tier_rec;

static uint32_t tier_of(tier_rec *x, uint64_t ino, const vy_p_run *p, uint32_t np, const vy_p_run *d, uint32_t nd)
{
	memset(x, 0, sizeof(*x));
	x->t = (vy_p_tier){.ino = ino, .dev = 2049, .dir_ino = 77, .size = 9u << 20, .src = 9u << 20, .present = np,
			   .dirty = nd, .flags = VY_P_TIER_PINNED};
	memcpy(x->r, p, np * sizeof(*p));
	memcpy(x->r + np, d, nd * sizeof(*d));
	return (uint32_t)(sizeof(x->t) + (np + nd) * sizeof(vy_p_run));
}

static void backing_files_checked_and_kept(void)
{
	vy_shadow s, t;
	vy_shadow_init(&s);
	vy_shadow_init(&t);
	vy_error e;
	tier_rec x;
	const vy_p_run p[] = {{0, 3}, {5, 2}}, d[] = {{1, 1}, {5, 1}};
	uint32_t len = tier_of(&x, 70, p, 2, d, 2);
	CHECK_EQ(vy_shadow_apply(&s, VY_P_TIER, &x, len, 9, &e), VY_OK);
	struct {
		vy_p_run p[2], d[2];
	} bad[] = {
		{{{0, 3}, {3, 2}}, {{1, 1}, {5, 1}}}, /* present runs touching */
		{{{5, 2}, {0, 3}}, {{1, 1}, {5, 1}}}, /* out of order */
		{{{0, 3}, {5, 0}}, {{1, 1}, {5, 1}}}, /* empty */
		{{{0, 3}, {5, 2}}, {{1, 1}, {4, 1}}}, /* dirty where not present */
		{{{0, 3}, {5, 2}}, {{2, 2}, {5, 1}}}, /* dirty past its present run */
		{{{0, 3}, {5, UINT64_MAX}}, {{1, 1}, {5, 1}}}, /* past any file */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tier_rec y;
		uint32_t n = tier_of(&y, 70, bad[i].p, 2, bad[i].d, 2);
		CHECK_EQ(vy_shadow_apply(&s, VY_P_TIER, &y, n, 9, &e), VY_EINVAL);
	}
	CHECK_EQ(vy_shadow_apply(&s, VY_P_TIER, &x, len - 8, 9, &e), VY_EINVAL); /* a run cut short */
	tier_rec z;
	uint32_t zl = tier_of(&z, 70, p, 2, d, 2);
	z.t.flags = 2; /* a flag this vyrefs does not know */
	CHECK_EQ(vy_shadow_apply(&s, VY_P_TIER, &z, zl, 9, &e), VY_EINVAL);
	vy_shadow_node *n = vy_u64map_get(&s.nodes, 70);
	CHECK(n && n->tier_len == len && !memcmp(n->tier, &x, len)); /* untouched */
	dumped dd = {.to = &t};
	CHECK_EQ(vy_shadow_dump(&s, reapply, &dd, &e), VY_OK);
	n = vy_u64map_get(&t.nodes, 70);
	CHECK(n && n->tier_len == len && !memcmp(n->tier, &x, len));
	vy_p_gone freed = {.ino = 70};
	CHECK_EQ(vy_shadow_apply(&t, VY_P_GONE, &freed, sizeof(freed), 9, &e), VY_OK);
	CHECK(vy_u64map_get(&t.nodes, 70) == NULL);
	vy_shadow_destroy(&s);
	vy_shadow_destroy(&t);
}

int main(void)
{
	static const vy_test_case cases[] = {
		TEST_CASE(group_applies_whole_with_its_answer),
		TEST_CASE(bad_group_refused_whole),
		TEST_CASE(answers_by_thread_sent_and_pruned),
		TEST_CASE(answers_carried_through_a_dump),
		TEST_CASE(client_connections_kept_whole),
		TEST_CASE(modules_kept_whole),
		TEST_CASE(write_behind_region_kept_last),
		TEST_CASE(layouts_of_both_formats),
		TEST_CASE(handles_only_of_the_table),
		TEST_CASE(backing_files_checked_and_kept),
	};
	return vy_test_main("shadow", cases, sizeof(cases) / sizeof(cases[0]));
}
