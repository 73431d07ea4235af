/* Sequences on the wire: one body, checked before anything points into it. */
#include "proto/seq.h"
#include "core/checked.h"

#include <stdlib.h>
#include <string.h>

/* The bytes of each array, in wire order. */
static bool sizes_of(const vy_run_in *h, uint64_t part[6], uint64_t *total)
{
	uint64_t sz[6] = {sizeof(vy_wire_buffer), sizeof(vy_wire_kernel), sizeof(vy_wire_step),
			  sizeof(vy_wire_arg), sizeof(vy_wire_group), 1};
	uint64_t n[6] = {h->nbuffers, h->nkernels, h->nsteps, h->nargs, h->ngroups, h->strings_len};
	uint64_t sum = sizeof(*h);
	for (int i = 0; i < 6; i++)
		if (!vy_mul_u64(n[i], sz[i], &part[i]) || !vy_add_u64(sum, part[i], &sum))
			return false;
	*total = sum;
	return true;
}

vy_err vy_seq_encode(const vy_seq *s, void **body, size_t *len, vy_error *e)
{
	vy_run_in h = {s->nbuffers, s->nkernels, s->nsteps, s->nargs, s->ngroups, s->strings_len};
	uint64_t part[6], total;
	if (!sizes_of(&h, part, &total) || total > VY_PROTO_MSG_MAX - sizeof(vy_msg_header))
		return vy_fail(e, VY_EINVAL, "split the sequence into several writes",
			       "the sequence is too large to hand to the launcher");
	char *out = malloc(total);
	if (!out)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot encode the sequence");
	const void *src[6] = {s->buffers, s->kernels, s->steps, s->args, s->groups, s->strings};
	memcpy(out, &h, sizeof(h));
	size_t at = sizeof(h);
	for (int i = 0; i < 6; i++) {
		if (part[i])
			memcpy(out + at, src[i], part[i]);
		at += part[i];
	}
	*body = out;
	*len = total;
	return VY_OK;
}

static vy_err bad(vy_error *e, const char *what)
{
	return vy_fail(e, VY_EINVAL, "report this bug: the daemon and its launcher disagree",
		       "a RUN message is malformed: %s", what);
}

static bool name_ok(const vy_seq *s, uint32_t off)
{
	return off < s->strings_len && memchr(s->strings + off, '\0', s->strings_len - off);
}

vy_err vy_seq_decode(void *body, size_t len, vy_seq *s, vy_error *e)
{
	vy_run_in h;
	if (len < sizeof(h))
		return bad(e, "shorter than its header");
	memcpy(&h, body, sizeof(h));
	uint64_t part[6], total;
	if (!sizes_of(&h, part, &total) || total != len)
		return bad(e, "its length does not match its counts");
	char *at = (char *)body + sizeof(h);
	void **dst[6] = {(void **)&s->buffers, (void **)&s->kernels, (void **)&s->steps,
			 (void **)&s->args,    (void **)&s->groups,  (void **)&s->strings};
	for (int i = 0; i < 6; i++) {
		*dst[i] = part[i] ? at : NULL;
		at += part[i];
	}
	s->nbuffers = h.nbuffers;
	s->nkernels = h.nkernels;
	s->nsteps = h.nsteps;
	s->nargs = h.nargs;
	s->ngroups = h.ngroups;
	s->strings_len = h.strings_len;
	/* The arrays sit at multiples of 8 after a 24-byte header, so the
	 * structs are aligned; check what points where. */
	for (uint32_t k = 0; k < s->nkernels; k++)
		if (!name_ok(s, s->kernels[k].module) || !name_ok(s, s->kernels[k].entry))
			return bad(e, "a kernel name is out of range");
	for (uint32_t i = 0; i < s->nsteps; i++) {
		const vy_wire_step *st = &s->steps[i];
		uint64_t end;
		switch (st->kind) {
		case VY_WIRE_FILL:
			if (st->a >= s->nbuffers || st->byte > 255)
				return bad(e, "a fill names no buffer");
			break;
		case VY_WIRE_COPY:
			if (st->a >= s->nbuffers || st->b >= s->nbuffers)
				return bad(e, "a copy names no buffer");
			break;
		case VY_WIRE_LAUNCH:
			if (st->kernel >= s->nkernels || !vy_add_u64(st->first_arg, st->nargs, &end) || end > s->nargs ||
			    st->nargs > VY_PROTO_PARAMS_MAX)
				return bad(e, "a launch names no kernel or arguments");
			break;
		default:
			return bad(e, "a step of unknown kind");
		}
	}
	for (uint32_t i = 0; i < s->nargs; i++) {
		const vy_wire_arg *a = &s->args[i];
		if (a->size > 8 || (a->kind == VY_WIRE_ARG_BUFFER && (a->buf >= s->nbuffers || a->size != 8)) ||
		    a->kind > VY_WIRE_ARG_BUFFER)
			return bad(e, "an argument is out of range");
	}
	for (uint32_t g = 0; g < s->ngroups; g++) {
		uint64_t end;
		if (!vy_add_u64(s->groups[g].first, s->groups[g].count, &end) || end > s->nsteps)
			return bad(e, "a group is out of range");
	}
	return VY_OK;
}

const char *vy_seq_module(const vy_seq *s, uint32_t k)
{
	return s->strings + s->kernels[k].module;
}

const char *vy_seq_entry(const vy_seq *s, uint32_t k)
{
	return s->strings + s->kernels[k].entry;
}
