/* Image sections and log records into a shadow (load.h). */
#include "persist/load.h"
#include "persist/format.h"

#include <string.h>

vy_err vy_load_section(void *ctx, uint32_t type, const void *p, uint64_t len, vy_error *e)
{
	vy_load_ctx *c = ctx;
	if (type != VY_P_SECTION_RECORDS)
		return vy_fail(e, VY_EINVAL, "umount and mount again", "kept state: an image section of type %u", type);
	const uint8_t *b = p;
	for (uint64_t at = 0; at < len;) {
		vy_p_head h;
		if (len - at < sizeof(h))
			return vy_fail(e, VY_EINVAL, "umount and mount again", "kept state: a torn image section");
		memcpy(&h, b + at, sizeof(h));
		uint64_t need = sizeof(h) + (((uint64_t)h.len + 7) & ~7ull);
		if (need > len - at)
			return vy_fail(e, VY_EINVAL, "umount and mount again", "kept state: a record past its section");
		vy_err rc = vy_shadow_apply(c->shadow, h.type, b + at + sizeof(h), h.len, 0, e);
		if (rc != VY_OK)
			return rc;
		c->records++;
		at += need;
	}
	return VY_OK;
}

vy_err vy_load_record(void *ctx, const vy_state_rec *r, vy_error *e)
{
	vy_load_ctx *c = ctx;
	c->records++;
	return vy_shadow_apply(c->shadow, r->type, r->payload, r->payload_len, r->seq, e);
}
