/* Running a sequence: bind files, validate, pin, hand it to the runner. */
#include "ctl/exec.h"
#include "ctl/dims.h"
#include "core/checked.h"
#include "core/grow.h"
#include "core/peer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A file the sequence uses. */
typedef struct bound {
	void *file;
	uint64_t ino;
	vy_handle handle;
	uint64_t size;
	vy_buffer_view view;
	uint32_t buf; /* its index in its part's buffers (with a handle) */
	unsigned dev; /* the device that holds it */
	bool written, locked, pinned;
} bound;

/* A stretch of steps on one device, run as one sequence by its runner;
 * or one copy between two devices (cross), run here. */
typedef struct part {
	unsigned dev;
	bool cross;
	size_t first, count; /* groups[first .. first+count) of run.pg */
} part;

typedef struct run {
	const vy_ctl_devices *devs;
	const vy_ctl_files *files;
	const vy_ctl_plan *plan;
	bound *b;
	size_t nb, capb;
	size_t *ref;   /* per step: index of its first bound reference in refs */
	size_t *refs;  /* bound indices, in the order steps name paths */
	size_t nrefs, caprefs;
	bool *held;    /* per step: its module is held in use (on sdev's) */
	unsigned *sdev; /* per step: the device it runs on */
	bool *cross;   /* per step: a copy between two devices */
	part *parts;
	size_t nparts, cap_parts;
	vy_wire_group *pg; /* the parts' groups, over plan step indices */
	size_t npg, cap_pg;
	uint32_t *origin; /* per step of the part being run: its plan step */
	unsigned (*dims)[2][3]; /* per launch step: its grid and block, checked */
	vy_ctl_error *err;
	vy_seq seq;    /* what the runner gets */
	size_t cap_args, cap_strings;
} run;

static vy_err oom(run *r)
{
	return vy_fail(&r->err->e, VY_ENOMEM, "free host memory", "cannot hold the sequence");
}

/* Look a path up and note which bound file it is. */
static vy_err bind_path(run *r, const char *path)
{
	void *file;
	uint64_t ino;
	vy_err rc = r->files->lookup(r->files->ctx, path, &file, &ino, &r->err->e);
	if (rc != VY_OK)
		return rc;
	size_t i = 0;
	while (i < r->nb && r->b[i].ino != ino)
		i++;
	if (i < r->nb) {
		r->files->release(r->files->ctx, file); /* already bound */
	} else {
		if (!vy_grow((void **)&r->b, &r->capb, r->nb, sizeof(*r->b))) {
			r->files->release(r->files->ctx, file);
			return oom(r);
		}
		r->b[r->nb++] = (bound){.file = file, .ino = ino};
	}
	if (!vy_grow((void **)&r->refs, &r->caprefs, r->nrefs, sizeof(*r->refs)))
		return oom(r);
	r->refs[r->nrefs++] = i;
	return VY_OK;
}

static vy_err bind_all(run *r)
{
	const vy_ctl_plan *p = r->plan;
	r->ref = calloc(p->nsteps + 1, sizeof(*r->ref));
	r->held = calloc(p->nsteps + 1, sizeof(*r->held));
	r->dims = calloc(p->nsteps + 1, sizeof(*r->dims));
	r->sdev = calloc(p->nsteps + 1, sizeof(*r->sdev));
	r->cross = calloc(p->nsteps + 1, sizeof(*r->cross));
	if (!r->ref || !r->held || !r->dims || !r->sdev || !r->cross)
		return oom(r);
	for (size_t s = 0; s < p->nsteps; s++) {
		const vy_ctl_step *st = &p->steps[s];
		r->err->line = st->line;
		r->ref[s] = r->nrefs;
		vy_err rc = VY_OK;
		if (st->kind == VY_STEP_LAUNCH) {
			for (size_t a = 0; a < st->nargs && rc == VY_OK; a++)
				if (st->args[a].kind != VY_ARG_SCALAR)
					rc = bind_path(r, st->args[a].path);
		} else {
			rc = bind_path(r, st->path);
			if (rc == VY_OK && st->kind == VY_STEP_COPY)
				rc = bind_path(r, st->path2);
		}
		if (rc != VY_OK)
			return rc;
	}
	return VY_OK;
}

static int by_ino(const void *a, const void *b)
{
	const bound *x = a, *y = b;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static void unlock_all(run *r)
{
	for (size_t i = 0; i < r->nb; i++)
		if (r->b[i].locked) {
			r->files->unlock(r->files->ctx, r->b[i].file);
			r->b[i].locked = false;
		}
}

/* Lock in ino order (the fs's lock order), then read each file's state.
 * Sorting moves files, so the references are rebuilt through inos. */
static vy_err lock_all(run *r, vy_error *e)
{
	uint64_t *inos = malloc((r->nrefs ? r->nrefs : 1) * sizeof(*inos));
	if (!inos)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the sequence's file list");
	for (size_t i = 0; i < r->nrefs; i++)
		inos[i] = r->b[r->refs[i]].ino;
	qsort(r->b, r->nb, sizeof(*r->b), by_ino);
	for (size_t i = 0; i < r->nrefs; i++)
		for (size_t k = 0; k < r->nb; k++)
			if (r->b[k].ino == inos[i])
				r->refs[i] = k;
	free(inos);
	vy_err rc = VY_OK;
	for (size_t i = 0; i < r->nb; i++) {
		r->files->lock(r->files->ctx, r->b[i].file);
		r->b[i].locked = true;
		vy_error why;
		vy_err st = r->files->state(r->files->ctx, r->b[i].file, &r->b[i].handle, &r->b[i].size, &r->b[i].dev, &why);
		if (st == VY_OK && r->b[i].dev >= r->devs->n)
			st = vy_fail(&why, VY_EINTERNAL, "report this bug", "a file on device %u of %u", r->b[i].dev,
				     r->devs->n);
		vy_error_keep_first(&rc, st, e, &why);
	}
	return rc;
}

/* Locked, with every buffer shareable when the runner is another process:
 * each file is made shareable under its own write lock first; a writer
 * that gave one a new buffer in between makes us go round again. */
static vy_err lock_shared(run *r, vy_error *e)
{
	bool shares = r->devs->dev[0].runner->shares; /* every device's runner is alike */
	for (int round = 0;; round++) {
		for (size_t i = 0; i < r->nb; i++) {
			vy_err rc = r->files->ready ? r->files->ready(r->files->ctx, r->b[i].file, e) : VY_OK;
			if (rc == VY_OK && shares)
				rc = r->files->share(r->files->ctx, r->b[i].file, e);
			if (rc != VY_OK)
				return rc;
		}
		vy_err rc = lock_all(r, e);
		if (rc != VY_OK || !shares)
			return rc;
		bool all = true;
		for (size_t i = 0; i < r->nb && all; i++)
			all = !r->b[i].handle || vy_store_shareable(r->devs->dev[r->b[i].dev].core->store, r->b[i].handle);
		if (all)
			return VY_OK;
		unlock_all(r);
		if (round == 3)
			return vy_fail(e, VY_EBUSY, "write the sequence again once the files stop changing",
				       "the sequence's files kept changing while it was prepared");
	}
}

static bound *ref(run *r, size_t step, size_t k)
{
	return &r->b[r->refs[r->ref[step] + k]];
}

static vy_err need_buffer(run *r, const bound *b, const char *path)
{
	if (b->handle)
		return VY_OK;
	return vy_fail(&r->err->e, VY_EINVAL, "give it bytes first, e.g. truncate -s SIZE FILE",
		       "'%s' is empty: it has no device buffer", path);
}

static vy_err check_range(run *r, const bound *b, const char *path, uint64_t off, uint64_t len)
{
	if (vy_range_within(off, len, b->size))
		return VY_OK;
	return vy_fail(&r->err->e, VY_ERANGE, "keep offset + length within the file's size (stat -c %s FILE)",
		       "%llu bytes at offset %llu do not fit '%s' of %llu bytes", (unsigned long long)len,
		       (unsigned long long)off, path, (unsigned long long)b->size);
}

/* ---- the sequence the runner gets --------------------------------------- */

static vy_err add_string(run *r, const char *s, uint32_t *off)
{
	size_t n = strlen(s) + 1;
	if (r->seq.strings_len + n > UINT32_MAX)
		return oom(r);
	while (r->cap_strings < r->seq.strings_len + n)
		if (!vy_grow((void **)&r->seq.strings, &r->cap_strings, r->cap_strings + 1, 1))
			return oom(r);
	memcpy(r->seq.strings + r->seq.strings_len, s, n);
	*off = r->seq.strings_len;
	r->seq.strings_len += (uint32_t)n;
	return VY_OK;
}

/* The kernel table's index of MODULE.ENTRY, added once. */
static vy_err kernel_index(run *r, const vy_ctl_step *st, uint32_t *out)
{
	vy_seq *q = &r->seq;
	for (uint32_t k = 0; k < q->nkernels; k++)
		if (!strcmp(vy_seq_module(q, k), st->module) && !strcmp(vy_seq_entry(q, k), st->entry)) {
			*out = k;
			return VY_OK;
		}
	vy_wire_kernel kn;
	if (add_string(r, st->module, &kn.module) != VY_OK || add_string(r, st->entry, &kn.entry) != VY_OK)
		return oom(r);
	/* At most one kernel per step: the table has room (see build_seq). */
	q->kernels[q->nkernels] = kn;
	*out = q->nkernels++;
	return VY_OK;
}

static vy_err add_arg(run *r, vy_wire_arg a)
{
	if (!vy_grow((void **)&r->seq.args, &r->cap_args, r->seq.nargs, sizeof(*r->seq.args)))
		return oom(r);
	r->seq.args[r->seq.nargs++] = a;
	return VY_OK;
}

/* A file the sequence may write: the fs refuses some (append-only, immutable). */
static vy_err may_write(run *r, bound *b, const char *path)
{
	b->written = true;
	return r->files->writable ? r->files->writable(r->files->ctx, b->file, path, &r->err->e) : VY_OK;
}

/* A launch runs where its buffers are: all on one device, or refused
 * before anything runs. A launch with scalars only runs on device 0. */
static vy_err launch_device(run *r, size_t s, unsigned *dev)
{
	const vy_ctl_step *st = &r->plan->steps[s];
	const char *first = NULL;
	size_t k = 0;
	*dev = 0;
	for (size_t a = 0; a < st->nargs; a++) {
		const vy_ctl_arg *arg = &st->args[a];
		if (arg->kind == VY_ARG_SCALAR)
			continue;
		bound *b = ref(r, s, k++);
		if (arg->kind != VY_ARG_BUFFER)
			continue;
		if (!first) {
			first = arg->path;
			*dev = b->dev;
		} else if (b->dev != *dev) {
			char fix[300];
			snprintf(fix, sizeof(fix), "move them to one device first, e.g. %s %d %s",
				 r->devs->move_hint ? r->devs->move_hint : "move",
				 r->devs->dev[*dev].core->dev->info.ordinal, arg->path);
			return vy_fail(&r->err->e, VY_EINVAL, fix,
				       "launch %s.%s names buffers on two devices: '%s' is on device %d, '%s' on device %d",
				       st->module, st->entry, first, r->devs->dev[*dev].core->dev->info.ordinal, arg->path,
				       r->devs->dev[b->dev].core->dev->info.ordinal);
		}
	}
	return VY_OK;
}

static vy_err check_launch(run *r, size_t s)
{
	const vy_ctl_step *st = &r->plan->steps[s];
	vy_error *e = &r->err->e;
	vy_err rc = launch_device(r, s, &r->sdev[s]);
	if (rc != VY_OK)
		return rc;
	const vy_ctl_device *dv = &r->devs->dev[r->sdev[s]];
	const vy_device_info *d = &dv->core->dev->info;
	vy_function_info info;
	rc = vy_modules_get(dv->mods, st->module, st->entry, &info, e);
	if (rc != VY_OK)
		return rc;
	r->held[s] = true;
	if (info.nparams != st->nargs)
		return vy_fail(e, VY_EINVAL, "pass one argument per kernel parameter",
			       "kernel %s.%s takes %zu argument(s), the line gives %zu", st->module, st->entry, info.nparams,
			       st->nargs);
	rc = vy_launch_dims(st, &info, d, r->dims[s][0], r->dims[s][1], e);
	if (rc != VY_OK)
		return rc;
	size_t k = 0;
	for (size_t a = 0; a < st->nargs; a++) {
		const vy_ctl_arg *arg = &st->args[a];
		if (info.param_size[a] != arg->size)
			return vy_fail(e, VY_EINVAL, "match the parameter's width: u32/i32/f32 are 4 bytes; u64/i64/f64, size: and buffers 8",
				       "argument %zu (%s) is %zu bytes, but parameter %zu of %s.%s is %zu", a + 1, arg->type,
				       arg->size, a + 1, st->module, st->entry, info.param_size[a]);
		if (arg->kind == VY_ARG_SCALAR)
			continue;
		bound *b = ref(r, s, k++);
		if (arg->kind == VY_ARG_BUFFER) {
			rc = need_buffer(r, b, arg->path);
			if (rc == VY_OK && arg->offset > b->size)
				rc = vy_fail(e, VY_ERANGE, "keep the offset within the file's size",
					     "offset %llu is past the end of '%s' (%llu bytes)", (unsigned long long)arg->offset,
					     arg->path, (unsigned long long)b->size);
			if (rc == VY_OK)
				rc = may_write(r, b, arg->path); /* a kernel may write any buffer it gets */
			if (rc != VY_OK)
				return rc;
		}
	}
	return VY_OK;
}

/* Everything checked before anything runs. */
static vy_err validate(run *r)
{
	const vy_ctl_plan *p = r->plan;
	for (size_t s = 0; s < p->nsteps; s++) {
		const vy_ctl_step *st = &p->steps[s];
		r->err->line = st->line;
		vy_err rc = VY_OK;
		if (st->kind == VY_STEP_FILL) {
			bound *b = ref(r, s, 0);
			uint64_t off = st->has_offset ? st->offset : 0;
			uint64_t len = st->has_length ? st->length : (b->size > off ? b->size - off : 0);
			rc = need_buffer(r, b, st->path);
			if (rc == VY_OK)
				rc = check_range(r, b, st->path, off, len);
			if (rc == VY_OK)
				rc = may_write(r, b, st->path);
			r->sdev[s] = b->dev;
		} else if (st->kind == VY_STEP_COPY) {
			bound *src = ref(r, s, 0), *dst = ref(r, s, 1);
			uint64_t len = st->has_length ? st->length : src->size;
			uint64_t so = st->has_offset ? st->offset : 0, dof = st->has_offset ? st->offset2 : 0;
			rc = need_buffer(r, src, st->path);
			if (rc == VY_OK)
				rc = need_buffer(r, dst, st->path2);
			if (rc == VY_OK)
				rc = check_range(r, src, st->path, so, len);
			if (rc == VY_OK)
				rc = check_range(r, dst, st->path2, dof, len);
			if (rc == VY_OK && src == dst && len && (so < dof ? dof - so < len : so - dof < len))
				rc = vy_fail(&r->err->e, VY_EINVAL, "copy through a second file",
					     "the ranges overlap within '%s'", st->path);
			if (rc == VY_OK)
				rc = may_write(r, dst, st->path2);
			r->sdev[s] = dst->dev;
			r->cross[s] = src->dev != dst->dev;
		} else {
			rc = check_launch(r, s);
		}
		if (rc != VY_OK)
			return rc;
	}
	return VY_OK;
}

static vy_err pin_all(run *r)
{
	for (size_t i = 0; i < r->nb; i++) {
		if (!r->b[i].handle)
			continue;
		vy_err rc = vy_store_pin_many(r->devs->dev[r->b[i].dev].core->store, &r->b[i].handle, 1, &r->b[i].view,
					      &r->err->e);
		if (rc != VY_OK)
			return rc;
		r->b[i].pinned = true;
	}
	return VY_OK;
}

/* Plan step s as a wire step of the part being built. */
static vy_err encode_step(run *r, size_t s, vy_wire_step *w)
{
	const vy_ctl_step *st = &r->plan->steps[s];
	vy_seq *q = &r->seq;
	w->line = st->line;
	if (st->kind == VY_STEP_FILL) {
		bound *b = ref(r, s, 0);
		w->kind = VY_WIRE_FILL;
		w->a = b->buf;
		w->off_a = st->has_offset ? st->offset : 0;
		w->length = st->has_length ? st->length : b->size - w->off_a;
		w->byte = st->byte;
		return VY_OK;
	}
	if (st->kind == VY_STEP_COPY) {
		bound *src = ref(r, s, 0), *dst = ref(r, s, 1);
		w->kind = VY_WIRE_COPY;
		w->a = src->buf;
		w->b = dst->buf;
		w->off_a = st->has_offset ? st->offset : 0;
		w->off_b = st->has_offset ? st->offset2 : 0;
		w->length = st->has_length ? st->length : src->size;
		return VY_OK;
	}
	w->kind = VY_WIRE_LAUNCH;
	if (kernel_index(r, st, &w->kernel) != VY_OK)
		return oom(r);
	memcpy(w->grid, r->dims[s][0], sizeof(w->grid));
	memcpy(w->block, r->dims[s][1], sizeof(w->block));
	w->shared = st->shared;
	w->first_arg = q->nargs;
	w->nargs = (uint32_t)st->nargs;
	size_t k = 0;
	for (size_t a = 0; a < st->nargs; a++) {
		const vy_ctl_arg *arg = &st->args[a];
		vy_wire_arg wa = {.kind = VY_WIRE_ARG_BYTES, .size = (uint32_t)arg->size};
		if (arg->kind == VY_ARG_SCALAR) {
			memcpy(&wa.value, arg->value, arg->size);
		} else {
			bound *b = ref(r, s, k++);
			if (arg->kind == VY_ARG_SIZE) {
				wa.value = b->size;
			} else {
				wa.kind = VY_WIRE_ARG_BUFFER;
				wa.buf = b->buf;
				wa.value = arg->offset;
			}
		}
		if (add_arg(r, wa) != VY_OK)
			return oom(r);
	}
	return VY_OK;
}

static void free_seq(vy_seq *q);

/* One part as flat arrays for its device's runner: that device's buffers
 * named by (handle, gen), the part's groups and their steps. */
static vy_err build_seq(run *r, const part *pt, vy_buffer_view **views)
{
	vy_seq *q = &r->seq;
	free_seq(q);
	memset(q, 0, sizeof(*q));
	r->cap_args = r->cap_strings = 0;
	free(r->origin);
	size_t nsteps = 0;
	for (size_t g = 0; g < pt->count; g++)
		nsteps += r->pg[pt->first + g].count;
	q->buffers = calloc(r->nb + 1, sizeof(*q->buffers));
	*views = calloc(r->nb + 1, sizeof(**views));
	q->kernels = calloc(nsteps + 1, sizeof(*q->kernels));
	q->steps = calloc(nsteps + 1, sizeof(*q->steps));
	q->groups = calloc(pt->count + 1, sizeof(*q->groups));
	r->origin = calloc(nsteps + 1, sizeof(*r->origin));
	if (!q->buffers || !*views || !q->kernels || !q->steps || !q->groups || !r->origin || nsteps > UINT32_MAX)
		return oom(r);
	for (size_t i = 0; i < r->nb; i++) {
		bound *b = &r->b[i];
		if (!b->handle || b->dev != pt->dev)
			continue;
		b->buf = q->nbuffers;
		(*views)[q->nbuffers] = b->view;
		q->buffers[q->nbuffers++] = (vy_wire_buffer){.handle = b->handle, .gen = b->view.gen, .len = b->size};
	}
	uint32_t ns = 0;
	for (size_t g = 0; g < pt->count; g++) {
		const vy_wire_group *pg = &r->pg[pt->first + g];
		q->groups[g] = (vy_wire_group){.times = pg->times, .first = ns, .count = pg->count};
		for (uint32_t k = 0; k < pg->count; k++, ns++) {
			r->origin[ns] = pg->first + k;
			vy_err rc = encode_step(r, pg->first + k, &q->steps[ns]);
			if (rc != VY_OK)
				return rc;
		}
	}
	q->nsteps = ns;
	q->ngroups = (uint32_t)pt->count;
	return VY_OK;
}

/* ---- parts: the sequence cut where its device changes ------------------- */

static vy_err add_pg(run *r, uint64_t times, size_t first, size_t count)
{
	if (!vy_grow((void **)&r->pg, &r->cap_pg, r->npg, sizeof(*r->pg)))
		return oom(r);
	r->pg[r->npg++] = (vy_wire_group){.times = times, .first = (uint32_t)first, .count = (uint32_t)count};
	return VY_OK;
}

static vy_err add_part(run *r, unsigned dev, bool cross, uint64_t times, size_t first, size_t count)
{
	part *last = r->nparts ? &r->parts[r->nparts - 1] : NULL;
	if (!cross && last && !last->cross && last->dev == dev) {
		last->count++;
		return add_pg(r, times, first, count);
	}
	if (r->nparts == VY_CTL_MAX_PARTS)
		return vy_fail(&r->err->e, VY_EINVAL, "keep each repeat's steps on one device, or split the sequence",
			       "the sequence changes device more than %u times", VY_CTL_MAX_PARTS);
	if (!vy_grow((void **)&r->parts, &r->cap_parts, r->nparts, sizeof(*r->parts)))
		return oom(r);
	r->parts[r->nparts++] = (part){.dev = dev, .cross = cross, .first = r->npg, .count = 1};
	return add_pg(r, times, first, count);
}

/* A group whose steps share a device stays whole (its repeat runs in the
 * launcher); one that changes device is unrolled, a part per stretch. */
static vy_err plan_parts(run *r)
{
	const vy_ctl_plan *p = r->plan;
	vy_err rc = VY_OK;
	for (size_t g = 0; g < p->ngroups && rc == VY_OK; g++) {
		const vy_ctl_group *gr = &p->groups[g];
		size_t end = gr->first + gr->count;
		bool uniform = true;
		for (size_t s = gr->first; s < end && uniform; s++)
			uniform = !r->cross[s] && r->sdev[s] == r->sdev[gr->first];
		if (uniform) {
			if (gr->count)
				rc = add_part(r, r->sdev[gr->first], false, gr->times, gr->first, gr->count);
			continue;
		}
		r->err->line = gr->line;
		for (uint64_t t = 0; t < gr->times && rc == VY_OK; t++)
			for (size_t s = gr->first, j; s < end && rc == VY_OK; s = j) {
				j = s + 1;
				if (!r->cross[s])
					while (j < end && !r->cross[j] && r->sdev[j] == r->sdev[s])
						j++;
				rc = add_part(r, r->sdev[s], r->cross[s], 1, s, j - s);
			}
	}
	return rc;
}

static void free_seq(vy_seq *q)
{
	free(q->buffers);
	free(q->kernels);
	free(q->steps);
	free(q->args);
	free(q->groups);
	free(q->strings);
}

/* What a failure on the device cost: the files the sequence could write,
 * and where it failed. Keeps the runner's Fix. */
static void name_the_damage(run *r, const vy_run_result *res)
{
	vy_error *e = &r->err->e;
	char what[VY_ERROR_MSG_MAX], fix[VY_ERROR_MSG_MAX] = "see the log";
	snprintf(what, sizeof(what), "%s", e->msg);
	char *f = strstr(what, " (Fix: ");
	if (f) {
		size_t n = strlen(f + 7);
		snprintf(fix, sizeof(fix), "%.*s", n ? (int)n - 1 : 0, f + 7);
		*f = '\0';
	}
	/* A device failure in the launcher broke its context, not ours: the
	 * kernel is what to fix, nothing needs a remount. */
	if (e->code == VY_EDEVICE && res->process_lost && res->failed_step < 0)
		snprintf(fix, sizeof(fix), "fix the kernel (compute-sanitizer shows where it fails); the mount goes on");
	char files[256] = "";
	size_t at = 0;
	unsigned named = 0, more = 0;
	for (size_t i = 0; i < r->nb; i++) {
		if (!r->b[i].written)
			continue;
		const char *path = NULL; /* the first path the plan used for it */
		for (size_t s = 0; s < r->plan->nsteps && !path; s++) {
			const vy_ctl_step *st = &r->plan->steps[s];
			size_t k = 0;
			if (st->kind == VY_STEP_LAUNCH) {
				for (size_t a = 0; a < st->nargs && !path; a++)
					if (st->args[a].kind != VY_ARG_SCALAR && ref(r, s, k++) == &r->b[i])
						path = st->args[a].path;
			} else if (ref(r, s, 0) == &r->b[i]) {
				path = st->path;
			} else if (st->kind == VY_STEP_COPY && ref(r, s, 1) == &r->b[i]) {
				path = st->path2;
			}
		}
		if (!path)
			continue;
		int n = snprintf(files + at, sizeof(files) - at, "%s'%s'", named ? ", " : "", path);
		if (n < 0 || (size_t)n >= sizeof(files) - at) {
			files[at] = '\0';
			more++;
			continue;
		}
		at += (size_t)n;
		named++;
	}
	const char *where = "";
	char step[160] = "";
	if (res->failed_step >= 0 && (size_t)res->failed_step < r->plan->nsteps) {
		const vy_ctl_step *st = &r->plan->steps[res->failed_step];
		r->err->line = st->line;
		if (st->kind == VY_STEP_LAUNCH)
			snprintf(step, sizeof(step), " at launch %s.%s", st->module, st->entry);
		where = step;
	} else {
		/* A kernel's fault shows at the synchronization: name the
		 * sequence's kernels. */
		size_t nl = 0;
		for (size_t s = 0; s < r->plan->nsteps; s++)
			if (r->plan->steps[s].kind == VY_STEP_LAUNCH) {
				const vy_ctl_step *st = &r->plan->steps[s];
				if (nl == 0)
					r->err->line = st->line;
				int n = snprintf(step + strlen(step), sizeof(step) - strlen(step), "%s%s.%s (line %d)",
						 nl ? ", " : "; it ran ", st->module, st->entry, st->line);
				if (n < 0)
					break;
				nl++;
			}
		where = step;
	}
	char damage[400];
	if (named)
		snprintf(damage, sizeof(damage), "%s%s may hold partial results; every other file is intact", files,
			 more ? " and more" : "");
	else
		snprintf(damage, sizeof(damage), "every file is intact");
	vy_fail(e, e->code, fix, "%.200s%s; %s%s", what, where, damage,
		res->process_lost ? "; a new launcher runs the next sequence" : "");
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void count_run(vy_telemetry *t, const vy_run_result *out, vy_err rc)
{
	vy_telemetry_add(t, memset_ops, out->memset_ops);
	vy_telemetry_add(t, memset_bytes, out->memset_bytes);
	vy_telemetry_add(t, d2d_ops, out->d2d_ops);
	vy_telemetry_add(t, d2d_bytes, out->d2d_bytes);
	vy_telemetry_add(t, launches, out->launches);
	vy_telemetry_add(t, syncs, out->syncs);
	vy_telemetry_add(t, steps, out->steps);
	if (rc == VY_OK)
		vy_telemetry_add(t, device_time_us, (uint64_t)out->device_us);
}

/* A copy between two devices: here, by the cores (core/peer.h). */
static vy_err run_cross(run *r, size_t s, vy_run_result *out)
{
	const vy_ctl_step *st = &r->plan->steps[s];
	bound *src = ref(r, s, 0), *dst = ref(r, s, 1);
	uint64_t len = st->has_length ? st->length : src->size;
	const vy_ctl_devices *d = r->devs;
	bool direct = d->direct && d->direct[dst->dev * d->n + src->dev];
	vy_err rc = vy_peer_copy(d->dev[dst->dev].core, dst->handle, st->has_offset ? st->offset2 : 0,
				 d->dev[src->dev].core, src->handle, st->has_offset ? st->offset : 0, len, direct,
				 &r->err->e);
	if (rc != VY_OK) {
		out->failed_step = (int)s;
		return rc;
	}
	out->steps++;
	out->syncs++;
	vy_telemetry_add(d->dev[dst->dev].core->tel, steps, 1);
	return VY_OK;
}

static vy_err execute(run *r, vy_ctl_result *res)
{
	vy_run_result out = {.failed_step = -1};
	vy_err rc = VY_OK;
	for (size_t i = 0; i < r->nparts && rc == VY_OK; i++) {
		const part *pt = &r->parts[i];
		if (i > 0 && r->files->stop && atomic_load(r->files->stop)) {
			rc = vy_fail(&r->err->e, VY_EINTR, "write the sequence again to run the rest",
				     "the sequence was stopped between devices");
			break;
		}
		if (pt->cross) {
			rc = run_cross(r, r->pg[pt->first].first, &out);
			continue;
		}
		vy_buffer_view *views = NULL;
		vy_run_result o = {.failed_step = -1};
		const vy_ctl_device *dv = &r->devs->dev[pt->dev];
		rc = build_seq(r, pt, &views);
		if (rc == VY_OK)
			rc = dv->runner->ops->run(dv->runner, &r->seq, views, r->files->stop, &o, &r->err->e);
		free(views);
		count_run(dv->core->tel, &o, rc);
		out.steps += o.steps;
		out.launches += o.launches;
		out.memset_ops += o.memset_ops;
		out.memset_bytes += o.memset_bytes;
		out.d2d_ops += o.d2d_ops;
		out.d2d_bytes += o.d2d_bytes;
		out.syncs += o.syncs;
		out.device_us += o.device_us;
		out.process_lost = out.process_lost || o.process_lost;
		if (o.failed_step >= 0 && (size_t)o.failed_step < r->seq.nsteps)
			out.failed_step = (int)r->origin[o.failed_step];
	}
	if (rc == VY_EDEVICE || rc == VY_ETIMEDOUT || rc == VY_EINTR)
		name_the_damage(r, &out);
	else if (rc != VY_OK && out.failed_step >= 0 && (size_t)out.failed_step < r->plan->nsteps)
		r->err->line = r->plan->steps[out.failed_step].line;
	res->steps = out.steps;
	res->device_us = out.device_us;
	return rc;
}

/* Unpin, unlock, then tell the fs what the device may have written (with no
 * lock held: the kernel drops cached pages), and let the files go. */
static void cleanup(run *r, bool ran)
{
	const vy_ctl_plan *p = r->plan;
	for (size_t s = 0; r->held && s < p->nsteps; s++)
		if (r->held[s])
			vy_modules_put(r->devs->dev[r->sdev[s]].mods, p->steps[s].module);
	for (size_t i = 0; i < r->nb; i++) {
		bound *b = &r->b[i];
		if (b->pinned)
			vy_store_unpin_many(r->devs->dev[b->dev].core->store, &b->handle, 1, NULL);
	}
	unlock_all(r);
	for (size_t i = 0; i < r->nb; i++) {
		if (ran && r->b[i].written)
			r->files->written(r->files->ctx, r->b[i].file, r->b[i].ino);
		r->files->release(r->files->ctx, r->b[i].file);
	}
	free_seq(&r->seq);
	free(r->held);
	free(r->sdev);
	free(r->cross);
	free(r->parts);
	free(r->pg);
	free(r->origin);
	free(r->dims);
	free(r->ref);
	free(r->refs);
	free(r->b);
}

vy_err vy_ctl_run(const vy_ctl_devices *devs, const vy_ctl_files *files, const vy_ctl_plan *plan,
		  vy_ctl_result *res, vy_ctl_error *err)
{
	double t0 = now_us();
	memset(res, 0, sizeof(*res));
	vy_error_clear(&err->e);
	run r = {.devs = devs, .files = files, .plan = plan, .err = err};
	uint64_t total = vy_ctl_plan_steps(plan);
	vy_err rc = VY_OK;
	if (total > VY_CTL_MAX_STEPS) {
		err->line = plan->ngroups ? plan->groups[0].line : 0;
		for (size_t g = 0; g < plan->ngroups; g++)
			if (plan->groups[g].times > 1)
				err->line = plan->groups[g].line;
		rc = vy_fail(&err->e, VY_EINVAL, "run at most 10000000 steps a sequence (split the repeat)",
			     "the sequence would run %llu steps", (unsigned long long)total);
	}
	if (rc == VY_OK)
		rc = bind_all(&r);
	if (rc == VY_OK) {
		rc = lock_shared(&r, &err->e);
		if (rc == VY_OK)
			rc = validate(&r);
	}
	if (rc == VY_OK)
		rc = pin_all(&r);
	if (rc == VY_OK)
		rc = plan_parts(&r); /* too many parts: refused before anything runs */
	bool ran = rc == VY_OK && total > 0;
	if (ran)
		rc = execute(&r, res);
	vy_telemetry_add(devs->dev[r.nparts ? r.parts[0].dev : 0].core->tel, sequences, 1);
	cleanup(&r, ran);
	res->wall_us = now_us() - t0;
	return rc;
}
