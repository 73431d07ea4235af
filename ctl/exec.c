/* Running a sequence: bind files, validate, enqueue, one sync. */
#include "ctl/exec.h"
#include "core/checked.h"
#include "core/grow.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A file the sequence uses. */
typedef struct bound {
	void *file;
	uint64_t ino;
	vy_handle handle;
	uint64_t size;
	vy_dptr ptr;
	bool written, locked, pinned;
} bound;

/* A launch made ready: its kernel and its argument bytes. */
typedef struct ready_launch {
	vy_function *f;
	unsigned char (*vals)[8];
	void **args;
	bool held; /* its module is held in use */
} ready_launch;

typedef struct run {
	vy_core *core;
	vy_modules *mods;
	const vy_ctl_files *files;
	const vy_ctl_plan *plan;
	bound *b;
	size_t nb, capb;
	size_t *ref;   /* per step: index of its first bound reference in refs */
	size_t *refs;  /* bound indices, in the order steps name paths */
	size_t nrefs, caprefs;
	ready_launch *launches; /* per step */
	vy_ctl_error *err;
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
	r->launches = calloc(p->nsteps + 1, sizeof(*r->launches));
	if (!r->ref || !r->launches)
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
		vy_err st = r->files->state(r->files->ctx, r->b[i].file, &r->b[i].handle, &r->b[i].size, &why);
		vy_error_keep_first(&rc, st, e, &why);
	}
	return rc;
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

static vy_err check_launch(run *r, size_t s)
{
	const vy_ctl_step *st = &r->plan->steps[s];
	vy_error *e = &r->err->e;
	const vy_device_info *d = &r->core->dev->info;
	vy_function_info info;
	ready_launch *L = &r->launches[s];
	vy_err rc = vy_modules_get(r->mods, st->module, st->entry, &L->f, &info, e);
	if (rc != VY_OK)
		return rc;
	L->held = true;
	if (info.nparams != st->nargs)
		return vy_fail(e, VY_EINVAL, "pass one argument per kernel parameter",
			       "kernel %s.%s takes %zu argument(s), the line gives %zu", st->module, st->entry, info.nparams,
			       st->nargs);
	for (int k = 0; k < 3; k++) {
		if (st->grid[k] > (unsigned)d->max_grid[k])
			return vy_fail(e, VY_EINVAL, "split the work into more blocks or launches",
				       "grid dimension %c=%u is over the device's %d", "xyz"[k], st->grid[k], d->max_grid[k]);
		if (st->block[k] > (unsigned)d->max_block[k])
			return vy_fail(e, VY_EINVAL, "use a smaller block", "block dimension %c=%u is over the device's %d",
				       "xyz"[k], st->block[k], d->max_block[k]);
	}
	uint64_t threads = (uint64_t)st->block[0] * st->block[1] * st->block[2];
	if (threads > (uint64_t)info.max_threads)
		return vy_fail(e, VY_EINVAL, "use fewer threads per block",
			       "a block of %llu threads is over this kernel's %d", (unsigned long long)threads,
			       info.max_threads);
	if (st->shared > (uint32_t)info.max_dynamic_shared)
		return vy_fail(e, VY_EINVAL, "ask for less shared memory", "shared=%u is over this kernel's %d bytes",
			       st->shared, info.max_dynamic_shared);
	L->vals = calloc(st->nargs + 1, sizeof(*L->vals));
	L->args = calloc(st->nargs + 1, sizeof(*L->args));
	if (!L->vals || !L->args)
		return oom(r);
	size_t k = 0;
	for (size_t a = 0; a < st->nargs; a++) {
		const vy_ctl_arg *arg = &st->args[a];
		if (info.param_size[a] != arg->size)
			return vy_fail(e, VY_EINVAL, "match the parameter's width: u32/i32/f32 are 4 bytes; u64/i64/f64, size: and buffers 8",
				       "argument %zu (%s) is %zu bytes, but parameter %zu of %s.%s is %zu", a + 1, arg->type,
				       arg->size, a + 1, st->module, st->entry, info.param_size[a]);
		if (arg->kind == VY_ARG_SCALAR) {
			memcpy(L->vals[a], arg->value, arg->size);
		} else {
			bound *b = ref(r, s, k++);
			if (arg->kind == VY_ARG_SIZE) {
				memcpy(L->vals[a], &b->size, 8);
			} else {
				rc = need_buffer(r, b, arg->path);
				if (rc == VY_OK && arg->offset > b->size)
					rc = vy_fail(e, VY_ERANGE, "keep the offset within the file's size",
						     "offset %llu is past the end of '%s' (%llu bytes)",
						     (unsigned long long)arg->offset, arg->path, (unsigned long long)b->size);
				if (rc != VY_OK)
					return rc;
				b->written = true; /* a kernel may write any buffer it gets */
			}
		}
		L->args[a] = L->vals[a];
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
			b->written = true;
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
			dst->written = true;
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
		vy_buffer_view v;
		vy_err rc = vy_store_pin_many(r->core->store, &r->b[i].handle, 1, &v, &r->err->e);
		if (rc != VY_OK)
			return rc;
		r->b[i].pinned = true;
		r->b[i].ptr = v.ptr;
	}
	return VY_OK;
}

/* Queue one step on the stream. */
static vy_err enqueue(run *r, vy_stream *s, size_t i)
{
	const vy_ctl_step *st = &r->plan->steps[i];
	vy_device *d = r->core->dev;
	vy_telemetry *t = &r->core->tel;
	vy_error *e = &r->err->e;
	if (st->kind == VY_STEP_FILL) {
		bound *b = ref(r, i, 0);
		uint64_t off = st->has_offset ? st->offset : 0;
		uint64_t len = st->has_length ? st->length : b->size - off;
		if (!len)
			return VY_OK;
		vy_telemetry_add(t, memset_ops, 1);
		vy_telemetry_add(t, memset_bytes, len);
		return d->ops->memset8(d, s, b->ptr + off, st->byte, len, e);
	}
	if (st->kind == VY_STEP_COPY) {
		bound *src = ref(r, i, 0), *dst = ref(r, i, 1);
		uint64_t len = st->has_length ? st->length : src->size;
		uint64_t so = st->has_offset ? st->offset : 0, dof = st->has_offset ? st->offset2 : 0;
		if (!len)
			return VY_OK;
		vy_telemetry_add(t, d2d_ops, 1);
		vy_telemetry_add(t, d2d_bytes, len);
		return d->ops->copy_dtod(d, s, dst->ptr + dof, src->ptr + so, len, e);
	}
	/* Buffer arguments take their device address now that it is pinned. */
	ready_launch *L = &r->launches[i];
	size_t k = 0;
	for (size_t a = 0; a < st->nargs; a++) {
		if (st->args[a].kind == VY_ARG_SCALAR)
			continue;
		bound *b = ref(r, i, k++);
		if (st->args[a].kind == VY_ARG_BUFFER) {
			uint64_t addr = b->ptr + st->args[a].offset;
			memcpy(L->vals[a], &addr, 8);
		}
	}
	vy_telemetry_add(t, launches, 1);
	return d->ops->launch(d, s, L->f, st->grid, st->block, st->shared, L->args, e);
}

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static vy_err execute(run *r, vy_ctl_result *res)
{
	vy_core *c = r->core;
	vy_device *d = c->dev;
	vy_error *e = &r->err->e;
	vy_stream *s = NULL;
	vy_timer *tm = NULL;
	vy_err rc = vy_streams_acquire(&c->streams, &s, e);
	if (rc == VY_OK)
		rc = vy_timers_acquire(&c->timers, &tm, e);
	if (rc == VY_OK)
		rc = d->ops->event_record(d, tm->start, s, e);
	uint64_t ran = 0;
	for (size_t g = 0; rc == VY_OK && g < r->plan->ngroups; g++) {
		const vy_ctl_group *grp = &r->plan->groups[g];
		for (uint64_t n = 0; rc == VY_OK && n < grp->times; n++)
			for (size_t i = grp->first; rc == VY_OK && i < grp->first + grp->count; i++) {
				r->err->line = r->plan->steps[i].line;
				rc = enqueue(r, s, i);
				ran++;
			}
	}
	if (rc == VY_OK)
		rc = d->ops->event_record(d, tm->end, s, e);
	vy_err sync = VY_OK;
	if (s) {
		/* One synchronization, also after a failure: queued work may
		 * still use the pinned buffers. */
		vy_error err;
		sync = vy_core_sync(c, s, &err);
		vy_error_keep_first(&rc, sync, e, &err);
		if (sync == VY_OK)
			vy_streams_release(&c->streams, s);
	}
	if (rc == VY_OK && d->ops->event_elapsed_us(d, tm->start, tm->end, &res->device_us, e) == VY_OK)
		vy_telemetry_add(&c->tel, device_time_us, (uint64_t)res->device_us);
	if (tm && sync == VY_OK)
		vy_timers_release(&c->timers, tm);
	else if (tm)
		vy_timers_discard(&c->timers, tm); /* its events may be pending */
	res->steps = ran;
	vy_telemetry_add(&c->tel, steps, ran);
	return rc;
}

/* Unpin, unlock, then tell the fs what the device may have written (with no
 * lock held: the kernel drops cached pages), and let the files go. */
static void cleanup(run *r, bool ran)
{
	const vy_ctl_plan *p = r->plan;
	for (size_t s = 0; r->launches && s < p->nsteps; s++) {
		if (r->launches[s].held)
			vy_modules_put(r->mods, p->steps[s].module);
		free(r->launches[s].vals);
		free(r->launches[s].args);
	}
	for (size_t i = 0; i < r->nb; i++) {
		bound *b = &r->b[i];
		if (b->pinned)
			vy_store_unpin_many(r->core->store, &b->handle, 1, NULL);
		if (b->locked)
			r->files->unlock(r->files->ctx, b->file);
	}
	for (size_t i = 0; i < r->nb; i++) {
		if (ran && r->b[i].written)
			r->files->written(r->files->ctx, r->b[i].file, r->b[i].ino);
		r->files->release(r->files->ctx, r->b[i].file);
	}
	free(r->launches);
	free(r->ref);
	free(r->refs);
	free(r->b);
}

vy_err vy_ctl_run(vy_core *core, vy_modules *mods, const vy_ctl_files *files, const vy_ctl_plan *plan,
		  vy_ctl_result *res, vy_ctl_error *err)
{
	double t0 = now_us();
	memset(res, 0, sizeof(*res));
	vy_error_clear(&err->e);
	run r = {.core = core, .mods = mods, .files = files, .plan = plan, .err = err};
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
		rc = lock_all(&r, &err->e);
		if (rc == VY_OK)
			rc = validate(&r);
	}
	if (rc == VY_OK)
		rc = pin_all(&r);
	bool ran = rc == VY_OK && total > 0;
	if (ran)
		rc = execute(&r, res);
	vy_telemetry_add(&core->tel, sequences, 1);
	cleanup(&r, ran);
	res->wall_us = now_us() - t0;
	return rc;
}
