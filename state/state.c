/* Making and adopting a state region: the region, then the log's end. */
#include "state/state.h"

#include <stdlib.h>

static vy_err alloc_state(vy_state **out, vy_error *e)
{
	*out = malloc(sizeof(**out));
	if (!*out)
		return vy_fail(e, VY_ENOMEM, "free memory", "allocating the state region's handle");
	return VY_OK;
}

vy_err vy_state_create(uint64_t log_bytes, vy_state **out, vy_error *e)
{
	vy_err rc = alloc_state(out, e);
	if (rc)
		return rc;
	rc = vy_state_region_create(log_bytes, *out, e);
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

vy_err vy_state_adopt(const vy_state_fds *fds, vy_state **out, vy_state_scan *found, vy_error *e)
{
	vy_state *s;
	vy_err rc = alloc_state(&s, e);
	if (rc)
		return rc;
	rc = vy_state_region_open(fds, s, e);
	if (rc) {
		free(s);
		return rc;
	}
	vy_state_root root = vy_state_root_get(s);
	vy_state_scan scan;
	rc = vy_state_log_scan(s, root.set ? root.seq : 0, UINT64_MAX, NULL, NULL, &scan, e);
	if (rc) { /* cannot fail without a callback; kept for the contract */
		free(s);
		return rc;
	}
	if (root.set && scan.last_seq < root.seq) {
		/* A bad record below the image's seq: the image holds all of it,
		 * so the log starts afresh after it (head first: never past tail). */
		vy_state_store(s, &s->hdr->log_head, scan.end);
		vy_state_store(s, &s->hdr->log_tail, scan.end);
		s->head = scan.end;
		scan.last_seq = root.seq;
	}
	s->tail = scan.end;
	s->next_seq = scan.last_seq + 1;
	vy_state_region_claim(s);
	if (found)
		*found = scan;
	*out = s;
	return VY_OK;
}

void vy_state_close(vy_state *s)
{
	if (!s)
		return;
	vy_state_region_close(s);
	free(s);
}
