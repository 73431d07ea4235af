/* A buffer's view: pieces and holes in one reserved range (see view.h). */
#include "core/view.h"

#include <stdlib.h>
#include <string.h>

/* Holes over [off, off + n) of the range at `base` (whole granules), and
 * back; `maps` counts the granules, so the store knows when the granule
 * of zeros is needed no more. */
static vy_err map_zeros(vy_device *d, vy_zeros *z, vy_dptr base, uint64_t off, uint64_t n, vy_error *e)
{
	if (n == 0)
		return VY_OK;
	vy_err rc = d->share->map_zeros(d, z->p, base + off, n, e);
	if (rc == VY_OK)
		z->maps += n / z->g;
	return rc;
}

static vy_err unmap_zeros(vy_device *d, vy_zeros *z, vy_dptr base, uint64_t off, uint64_t n, vy_error *e)
{
	if (n == 0)
		return VY_OK;
	vy_err rc = d->share->unmap_zeros(d, z->p, base + off, n, e);
	z->maps -= n / z->g; /* what would not unmap is address space only */
	return rc;
}

/* The end of the last piece (0 with none). */
static uint64_t pieces_end(const vy_view *v)
{
	return v->n ? v->piece[v->n - 1].off + v->piece[v->n - 1].bytes : 0;
}

/* Map every piece and hole of v at `base`; on a failure, undo exactly
 * what went in. */
static vy_err map_all(vy_device *d, const vy_view *v, vy_zeros *z, vy_dptr base, vy_error *e)
{
	uint64_t at = 0;
	uint32_t done = 0; /* pieces mapped, with the holes before each */
	vy_err rc = VY_OK;
	for (; done < v->n; done++) {
		const vy_piece *pc = &v->piece[done];
		rc = map_zeros(d, z, base, at, pc->off - at, e);
		if (rc != VY_OK)
			break;
		rc = d->share->map_own(d, pc->p, pc->bytes, base + pc->off, e);
		if (rc != VY_OK) {
			unmap_zeros(d, z, base, at, pc->off - at, NULL);
			break;
		}
		at = pc->off + pc->bytes;
	}
	if (rc == VY_OK)
		rc = map_zeros(d, z, base, at, v->len - at, e);
	if (rc != VY_OK) {
		uint64_t from = 0;
		for (uint32_t k = 0; k < done; k++) {
			unmap_zeros(d, z, base, from, v->piece[k].off - from, NULL);
			d->share->unmap(d, base + v->piece[k].off, v->piece[k].bytes, NULL);
			from = v->piece[k].off + v->piece[k].bytes;
		}
	}
	return rc;
}

static vy_err unmap_all(vy_device *d, const vy_view *v, vy_zeros *z, vy_dptr base, vy_error *e)
{
	vy_err first = VY_OK, rc;
	uint64_t at = 0;
	for (uint32_t i = 0; i < v->n; i++) {
		const vy_piece *pc = &v->piece[i];
		rc = unmap_zeros(d, z, base, at, pc->off - at, first == VY_OK ? e : NULL);
		if (first == VY_OK)
			first = rc;
		rc = d->share->unmap(d, base + pc->off, pc->bytes, first == VY_OK ? e : NULL);
		if (first == VY_OK)
			first = rc;
		at = pc->off + pc->bytes;
	}
	rc = unmap_zeros(d, z, base, at, v->len - at, first == VY_OK ? e : NULL);
	return first == VY_OK ? rc : first;
}

vy_err vy_view_move(vy_device *d, vy_view *v, vy_zeros *z, uint64_t reserved, vy_error *e)
{
	vy_dptr base;
	vy_err rc = d->share->reserve(d, reserved, &base, e);
	if (rc != VY_OK)
		return rc;
	rc = map_all(d, v, z, base, e);
	if (rc != VY_OK) {
		d->share->unreserve(d, base, reserved, NULL);
		return rc;
	}
	/* The old range goes; were that to fail, only address space is lost. */
	if (v->ptr) {
		d->ops->synchronize(d, NULL);
		unmap_all(d, v, z, v->ptr, NULL);
		d->share->unreserve(d, v->ptr, v->reserved, NULL);
	}
	v->ptr = base;
	v->reserved = reserved;
	return VY_OK;
}

vy_err vy_view_drop(vy_device *d, vy_view *v, vy_zeros *z, vy_error *e)
{
	if (!v->ptr)
		return VY_OK;
	vy_err rc = d->ops->synchronize(d, e);
	vy_err rc2 = unmap_all(d, v, z, v->ptr, rc == VY_OK ? e : NULL);
	if (rc == VY_OK)
		rc = rc2;
	rc2 = d->share->unreserve(d, v->ptr, v->reserved, rc == VY_OK ? e : NULL);
	if (rc == VY_OK)
		rc = rc2;
	v->ptr = 0;
	v->reserved = 0;
	return rc;
}

vy_err vy_view_extend(vy_device *d, vy_view *v, vy_zeros *z, uint64_t len, vy_error *e)
{
	if (len <= v->len)
		return VY_OK;
	if (len > v->reserved || len % z->g)
		return vy_fail(e, VY_EINTERNAL, "report this bug", "a view of %llu bytes cannot hold %llu",
			       (unsigned long long)v->reserved, (unsigned long long)len);
	vy_err rc = map_zeros(d, z, v->ptr, v->len, len - v->len, e);
	if (rc == VY_OK) {
		v->holes += len - v->len;
		v->len = len;
	}
	return rc;
}

vy_err vy_view_add(vy_device *d, vy_view *v, vy_zeros *z, vy_piece pc, vy_error *e)
{
	uint64_t end = pc.off + pc.bytes;
	if (v->n >= VY_CHUNKS_MAX || pc.off % z->g || pc.bytes % z->g || end > v->reserved || end < pc.off)
		return vy_fail(e, VY_EINTERNAL, "report this bug", "a piece of %llu bytes at %llu does not fit its view",
			       (unsigned long long)pc.bytes, (unsigned long long)pc.off);
	/* Where it goes: after the pieces before it, over holes only. */
	uint32_t at = v->n;
	while (at > 0 && v->piece[at - 1].off >= end)
		at--;
	if ((at > 0 && v->piece[at - 1].off + v->piece[at - 1].bytes > pc.off) ||
	    (at < v->n && v->piece[at].off < end))
		return vy_fail(e, VY_EINTERNAL, "report this bug", "a piece at %llu overlaps another",
			       (unsigned long long)pc.off);
	vy_err rc = VY_OK;
	uint64_t inside = end < v->len ? end : v->len; /* the holes it replaces */
	if (pc.off < inside) {
		/* Nothing of ours may read those zeros while they go. */
		rc = d->ops->synchronize(d, e);
		if (rc == VY_OK)
			rc = unmap_zeros(d, z, v->ptr, pc.off, inside - pc.off, e);
		if (rc != VY_OK)
			return rc;
	} else if (pc.off > v->len) {
		rc = vy_view_extend(d, v, z, pc.off, e);
		if (rc != VY_OK)
			return rc;
		inside = pc.off;
	}
	rc = d->share->map_own(d, pc.p, pc.bytes, v->ptr + pc.off, e);
	if (rc != VY_OK) {
		if (pc.off < inside)
			map_zeros(d, z, v->ptr, pc.off, inside - pc.off, NULL);
		return rc;
	}
	if (pc.off < inside)
		v->holes -= inside - pc.off;
	if (end > v->len)
		v->len = end;
	memmove(&v->piece[at + 1], &v->piece[at], (v->n - at) * sizeof(*v->piece));
	v->piece[at] = pc;
	v->n++;
	return VY_OK;
}

vy_err vy_view_remove(vy_device *d, vy_view *v, vy_zeros *z, uint32_t i, bool shorten, uint64_t keep, vy_error *e)
{
	if (i >= v->n)
		return vy_fail(e, VY_EINTERNAL, "report this bug", "no piece %u in a view of %u", i, v->n);
	vy_piece pc = v->piece[i];
	bool cut = shorten && i + 1 == v->n; /* the last piece, and the view ends before it */
	vy_err rc = d->ops->synchronize(d, e);
	if (rc == VY_OK && !cut && !z->p)
		rc = vy_fail(e, VY_EINTERNAL, "report this bug", "a hole with no zeros to map");
	if (rc == VY_OK)
		rc = d->share->unmap(d, v->ptr + pc.off, pc.bytes, e);
	if (rc != VY_OK)
		return rc;
	memmove(&v->piece[i], &v->piece[i + 1], (v->n - i - 1) * sizeof(*v->piece));
	v->n--;
	if (cut) {
		/* The view ends at `keep` (never inside the piece), or where
		 * the pieces before it do: the holes past that go too. */
		uint64_t base = pieces_end(v), after = pc.off + pc.bytes;
		if (base < keep)
			base = keep < pc.off ? keep : pc.off;
		unmap_zeros(d, z, v->ptr, base, pc.off - base, NULL);
		unmap_zeros(d, z, v->ptr, after, v->len - after, NULL);
		v->holes -= (pc.off - base) + (v->len - after);
		v->len = base;
		return VY_OK;
	}
	rc = map_zeros(d, z, v->ptr, pc.off, pc.bytes, e);
	if (rc == VY_OK)
		v->holes += pc.bytes;
	return rc;
}

vy_err vy_view_shorten(vy_device *d, vy_view *v, vy_zeros *z, uint64_t len, vy_error *e)
{
	uint64_t keep = pieces_end(v);
	if (keep < len)
		keep = len;
	if (keep >= v->len)
		return VY_OK;
	vy_err rc = d->ops->synchronize(d, e);
	if (rc == VY_OK)
		rc = unmap_zeros(d, z, v->ptr, keep, v->len - keep, e);
	/* What did not unmap is address space only; the view ends anyway. */
	v->holes -= v->len - keep;
	v->len = keep;
	return rc;
}

bool vy_view_backed(const vy_view *v, uint64_t off, uint64_t len)
{
	return len == 0 || vy_view_next_hole(v, off) >= off + len;
}

uint64_t vy_view_next_hole(const vy_view *v, uint64_t off)
{
	uint64_t x = off;
	for (uint32_t i = 0; i < v->n; i++) {
		const vy_piece *pc = &v->piece[i];
		if (pc->off + pc->bytes <= x)
			continue;
		if (pc->off > x)
			return x;
		x = pc->off + pc->bytes;
	}
	return x < v->len ? x : (off > v->len ? off : v->len);
}

uint64_t vy_view_next_data(const vy_view *v, uint64_t off)
{
	for (uint32_t i = 0; i < v->n; i++) {
		const vy_piece *pc = &v->piece[i];
		if (off < pc->off + pc->bytes)
			return off > pc->off ? off : pc->off;
	}
	return UINT64_MAX;
}
