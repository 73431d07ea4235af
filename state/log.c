/* The redo log's append and scan (state/log.h, state/README.md). */
#include "state/log.h"

#include <stdio.h>
#include <xxhash.h>

#define HDR ((uint64_t)sizeof(vy_state_rec_hdr))
#define SUMB ((uint64_t)sizeof(uint64_t)) /* the sum, first: the rest is hashed in one piece */

static uint64_t stride_of(uint64_t len)
{
	return (len + 7) & ~(uint64_t)7;
}

static uint64_t rec_sum(const uint8_t *at, uint64_t len);

/* A record's bytes after its sum, then the sum over them as they lie in
 * the ring (one contiguous hash, of bytes still in cache). A PAD (r NULL)
 * is its header alone. */
static void put_record(vy_state *s, uint8_t *at, const vy_state_rec_hdr *h, const vy_state_rec *r)
{
	vy_state_put(s, at + SUMB, (const uint8_t *)h + SUMB, HDR - SUMB);
	if (r && r->payload_len)
		vy_state_put(s, at + HDR, r->payload, r->payload_len);
	if (r && r->reply_len)
		vy_state_put(s, at + HDR + r->payload_len, r->reply, r->reply_len);
	uint64_t sum = rec_sum(at, r ? h->len : HDR);
	vy_state_put(s, at, &sum, SUMB);
}

/* The checksum of a record in the ring: bytes [8, len) (for a PAD, its
 * header only: the rest of its lap is garbage by design). */
static uint64_t rec_sum(const uint8_t *at, uint64_t len)
{
	return XXH3_64bits(at + SUMB, len - SUMB);
}

vy_err vy_state_append(vy_state *s, const vy_state_rec *r, uint64_t *seq, vy_error *e)
{
	uint64_t len = HDR + r->payload_len + (uint64_t)r->reply_len;
	if (len > s->cap / 2 || r->type == VY_STATE_REC_PAD)
		return vy_fail(e, VY_EINVAL, "log a smaller change, or make the state log larger",
			       "a state log record of %llu bytes, type %u (at most %llu bytes, type below %u)",
			       (unsigned long long)len, r->type, (unsigned long long)(s->cap / 2), VY_STATE_REC_PAD);
	uint64_t stride = stride_of(len), off = s->tail & s->mask;
	uint64_t gap = s->cap - off < stride ? s->cap - off : 0; /* to the lap's end */
	if (s->tail - s->head + gap + stride > s->cap)
		return vy_fail(e, VY_ENOSPC, "write a checkpoint (vy_state_image_*), then append again",
			       "the state log is full: %llu of %llu bytes", (unsigned long long)(s->tail - s->head),
			       (unsigned long long)s->cap);
	uint64_t pos = s->tail;
	if (gap >= HDR)
		put_record(s, s->ring + off, &(vy_state_rec_hdr){.len = (uint32_t)gap, .type = VY_STATE_REC_PAD,
								  .seq = s->next_seq},
			   NULL);
	pos += gap;
	vy_state_rec_hdr h = {.len = (uint32_t)len, .type = r->type, .flags = r->flags, .seq = s->next_seq,
			      .unique = r->unique, .reply_len = r->reply_len};
	put_record(s, s->ring + (pos & s->mask), &h, r);
	s->tail = pos + stride;
	vy_state_store(s, &s->hdr->log_tail, s->tail); /* the commit */
	*seq = s->next_seq++;
	return VY_OK;
}

uint64_t vy_state_record_max(const vy_state *s)
{
	return s->cap / 2 - HDR;
}

bool vy_state_log_wants_checkpoint(const vy_state *s)
{
	return s->tail - s->head >= s->cap / 2;
}

uint64_t vy_state_log_used(const vy_state *s)
{
	return s->tail - s->head;
}

uint64_t vy_state_log_last_seq(const vy_state *s)
{
	return s->next_seq - 1;
}

void vy_state_log_trim(vy_state *s)
{
	s->head = s->tail;
	vy_state_store(s, &s->hdr->log_head, s->head);
}

/* Stop the scan at `pos`: what follows is not there. */
static void stop(vy_state_scan *out, const char *fmt, unsigned long long pos, unsigned long long a)
{
	out->stopped = true;
	snprintf(out->why, sizeof(out->why), fmt, pos, a);
}

vy_err vy_state_log_scan(const vy_state *s, uint64_t root_seq, uint64_t after, vy_state_rec_fn fn, void *ctx,
			 vy_state_scan *out, vy_error *e)
{
	*out = (vy_state_scan){0};
	/* Each read once; region_open checked the same bounds. */
	uint64_t head = vy_state_load_u64(&s->hdr->log_head), tail = vy_state_load_u64(&s->hdr->log_tail);
	if (head > tail || tail - head > s->cap || head % 8 || tail % 8) {
		out->end = head;
		stop(out, "state log head %llu and tail %llu out of bounds", head, tail);
		return VY_OK;
	}
	uint64_t pos = head, want = 0; /* 0: the first record names it */
	out->end = head;
	out->last_seq = root_seq;
	while (pos < tail) {
		uint64_t off = pos & s->mask, room = s->cap - off;
		if (room < HDR) { /* a lap's end too short for a header: skipped */
			pos += room;
			continue;
		}
		vy_state_rec_hdr h;
		memcpy(&h, s->ring + off, HDR);
		uint64_t len = h.len, stride = stride_of(len);
		if (len < HDR || len > room || stride > tail - pos) {
			stop(out, "state log record at %llu: length %llu does not fit", pos, len);
			break;
		}
		bool first = want == 0;
		if (first ? h.seq == 0 || h.seq > root_seq + 1 : h.seq != want) {
			stop(out, "state log record at %llu: seq %llu out of order", pos, h.seq);
			break;
		}
		bool pad = h.type == VY_STATE_REC_PAD;
		uint32_t rlen = h.reply_len;
		if (pad ? len != room : rlen > len - HDR) {
			stop(out, "state log record at %llu: reply of %llu bytes does not fit", pos, rlen);
			break;
		}
		const uint8_t *body = s->ring + off + HDR;
		uint32_t plen = pad ? 0 : (uint32_t)(len - HDR - rlen);
		if (rec_sum(s->ring + off, pad ? HDR : len) != h.sum) {
			stop(out, "state log record at %llu (seq %llu): checksum mismatch", pos, h.seq);
			break;
		}
		pos += stride;
		if (pad) { /* names the next record's seq, takes none */
			want = h.seq;
			continue;
		}
		want = h.seq + 1;
		out->records++;
		out->last_seq = h.seq;
		out->end = pos;
		if (h.seq <= after || !fn)
			continue;
		vy_state_rec r = {.type = h.type, .flags = h.flags, .seq = h.seq, .unique = h.unique,
				  .payload = body, .payload_len = plen, .reply = body + plen, .reply_len = rlen};
		vy_err rc = fn(ctx, &r, e);
		if (rc)
			return rc;
		out->delivered++;
	}
	return VY_OK;
}
