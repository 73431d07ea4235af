/* The local runner: modules loaded into one device context, and sequences
 * run over device pointers on one stream with one synchronization, timed by
 * a pair of events. The launcher process runs every sequence through it. */
#include "ctl/runner.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct kernel {
	char *name;
	vy_function *f;
	vy_function_info info;
	struct kernel *next;
} kernel;

typedef struct module {
	char *name;
	vy_module *mod;
	kernel *kernels;
	struct module *next;
} module;

typedef struct local_runner {
	vy_runner base;
	pthread_mutex_t lock; /* one sequence or module change at a time */
	vy_device *dev;
	module *modules;
	vy_stream *stream;
	vy_event *start, *end;
} local_runner;

#define LOG_MAX 16384

static local_runner *local_of(vy_runner *r)
{
	return (local_runner *)r;
}

static module *find(local_runner *l, const char *name, module ***link)
{
	module **p = &l->modules;
	while (*p && strcmp((*p)->name, name) != 0)
		p = &(*p)->next;
	if (link)
		*link = p;
	return *p;
}

static void drop(local_runner *l, module *m)
{
	for (kernel *k = m->kernels, *next; k; k = next) {
		next = k->next;
		free(k->name);
		free(k);
	}
	if (m->mod)
		l->dev->ops->module_unload(l->dev, m->mod, NULL);
	free(m->name);
	free(m);
}

static vy_err local_load(vy_runner *r, const char *name, const void *image, size_t len, char **log, vy_error *e)
{
	local_runner *l = local_of(r);
	*log = malloc(LOG_MAX);
	if (!*log)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate a JIT log");
	(*log)[0] = '\0';
	module *m = calloc(1, sizeof(*m));
	if (!m || !(m->name = strdup(name))) {
		free(m);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot record module '%s'", name);
	}
	pthread_mutex_lock(&l->lock);
	vy_err rc = l->dev->ops->module_load(l->dev, image, len, &m->mod, *log, LOG_MAX, e);
	module **link, *old = find(l, name, &link);
	if (rc == VY_OK) {
		if (old) {
			*link = old->next;
			drop(l, old);
		}
		m->next = l->modules;
		l->modules = m;
	} else {
		if (old) { /* a failed load replaces the module with nothing */
			*link = old->next;
			drop(l, old);
		}
		m->mod = NULL;
		drop(l, m);
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

static vy_err local_unload(vy_runner *r, const char *name, vy_error *e)
{
	(void)e;
	local_runner *l = local_of(r);
	pthread_mutex_lock(&l->lock);
	module **link, *m = find(l, name, &link);
	if (m) {
		*link = m->next;
		drop(l, m);
	}
	pthread_mutex_unlock(&l->lock);
	return VY_OK;
}

/* A kernel of a loaded module, cached. Lock held. */
static vy_err get_kernel(local_runner *l, const char *mname, const char *entry, kernel **out, vy_error *e)
{
	module *m = find(l, mname, NULL);
	if (!m)
		return vy_fail(e, VY_ENOENT, "copy the module into .vyre/modules/ first, e.g. cp saxpy.ptx .vyre/modules/",
			       "no module '%s'", mname);
	kernel *k = m->kernels;
	while (k && strcmp(k->name, entry) != 0)
		k = k->next;
	if (!k) {
		kernel *n = calloc(1, sizeof(*n));
		if (!n || !(n->name = strdup(entry))) {
			free(n);
			return vy_fail(e, VY_ENOMEM, "free host memory", "cannot record kernel '%s'", entry);
		}
		vy_err rc = l->dev->ops->function_get(l->dev, m->mod, entry, &n->f, e);
		if (rc == VY_OK)
			rc = l->dev->ops->function_info(l->dev, n->f, &n->info, e);
		if (rc != VY_OK) {
			free(n->name);
			free(n);
			return rc;
		}
		n->next = m->kernels;
		m->kernels = k = n;
	}
	*out = k;
	return VY_OK;
}

static vy_err local_kernel(vy_runner *r, const char *mname, const char *entry, vy_function_info *info, vy_error *e)
{
	local_runner *l = local_of(r);
	pthread_mutex_lock(&l->lock);
	kernel *k;
	vy_err rc = get_kernel(l, mname, entry, &k, e);
	if (rc == VY_OK)
		*info = k->info;
	pthread_mutex_unlock(&l->lock);
	return rc;
}

/* The stream and the timing events, made once. Lock held. */
static vy_err ready(local_runner *l, vy_error *e)
{
	vy_device *d = l->dev;
	vy_err rc = VY_OK;
	if (!l->stream)
		rc = d->ops->stream_create(d, &l->stream, e);
	if (rc == VY_OK && !l->start)
		rc = d->ops->event_create(d, &l->start, e);
	if (rc == VY_OK && !l->end)
		rc = d->ops->event_create(d, &l->end, e);
	return rc;
}

/* Queue one step. */
static vy_err enqueue(local_runner *l, const vy_seq *seq, uint32_t i, const vy_dptr *ptrs, vy_function **fns,
		      void **argp, vy_run_result *res, vy_error *e)
{
	vy_device *d = l->dev;
	const vy_wire_step *st = &seq->steps[i];
	if (st->kind == VY_WIRE_FILL) {
		if (!st->length)
			return VY_OK;
		res->memset_ops++;
		res->memset_bytes += st->length;
		return d->ops->memset8(d, l->stream, ptrs[st->a] + st->off_a, (uint8_t)st->byte, st->length, e);
	}
	if (st->kind == VY_WIRE_COPY) {
		if (!st->length)
			return VY_OK;
		res->d2d_ops++;
		res->d2d_bytes += st->length;
		return d->ops->copy_dtod(d, l->stream, ptrs[st->b] + st->off_b, ptrs[st->a] + st->off_a, st->length, e);
	}
	res->launches++;
	return d->ops->launch(d, l->stream, fns[st->kernel], st->grid, st->block, st->shared, argp + st->first_arg, e);
}

static vy_err run_locked(local_runner *l, const vy_seq *seq, const vy_dptr *ptrs, const _Atomic uint32_t *stop,
			 vy_run_result *res, vy_error *e)
{
	vy_device *d = l->dev;
	vy_function **fns = calloc(seq->nkernels + 1, sizeof(*fns));
	unsigned char (*vals)[8] = calloc(seq->nargs + 1, sizeof(*vals));
	void **argp = calloc(seq->nargs + 1, sizeof(*argp));
	vy_err rc = fns && vals && argp ? VY_OK : vy_fail(e, VY_ENOMEM, "free host memory", "cannot hold the sequence");
	for (uint32_t k = 0; rc == VY_OK && k < seq->nkernels; k++) {
		kernel *kn;
		rc = get_kernel(l, vy_seq_module(seq, k), vy_seq_entry(seq, k), &kn, e);
		if (rc == VY_OK)
			fns[k] = kn->f;
	}
	/* Argument bytes: buffers take their address in this process. */
	for (uint32_t a = 0; rc == VY_OK && a < seq->nargs; a++) {
		const vy_wire_arg *arg = &seq->args[a];
		uint64_t v = arg->kind == VY_WIRE_ARG_BUFFER ? ptrs[arg->buf] + arg->value : arg->value;
		memcpy(vals[a], &v, 8); /* little-endian: the first `size` bytes are the value */
		argp[a] = vals[a];
	}
	if (rc == VY_OK)
		rc = ready(l, e);
	bool queued = false;
	if (rc == VY_OK) {
		rc = d->ops->event_record(d, l->start, l->stream, e);
		queued = true;
	}
	for (uint32_t g = 0; rc == VY_OK && g < seq->ngroups; g++) {
		const vy_wire_group *grp = &seq->groups[g];
		for (uint64_t n = 0; rc == VY_OK && n < grp->times; n++)
			for (uint32_t i = grp->first; rc == VY_OK && i < grp->first + grp->count; i++) {
				if (stop && atomic_load_explicit(stop, memory_order_relaxed)) {
					rc = vy_fail(e, VY_EINTR, "run it again, or a shorter sequence",
						     "the sequence was stopped after %llu steps", (unsigned long long)res->steps);
					res->failed_step = (int)i;
					break;
				}
				rc = enqueue(l, seq, i, ptrs, fns, argp, res, e);
				if (rc != VY_OK)
					res->failed_step = (int)i;
				res->steps++;
			}
	}
	if (rc == VY_OK)
		rc = d->ops->event_record(d, l->end, l->stream, e);
	if (queued) {
		/* One synchronization, also after a failure: queued work may
		 * still use the buffers. */
		vy_error err;
		vy_err sync = d->ops->stream_sync(d, l->stream, &err);
		res->syncs++;
		vy_error_keep_first(&rc, sync, e, &err);
	}
	if (rc == VY_OK)
		rc = d->ops->event_elapsed_us(d, l->start, l->end, &res->device_us, e);
	free(fns);
	free(vals);
	free(argp);
	return rc;
}

vy_err vy_runner_local_run_ptrs(vy_runner *r, const vy_seq *seq, const vy_dptr *ptrs, const _Atomic uint32_t *stop,
				vy_run_result *res, vy_error *e)
{
	local_runner *l = local_of(r);
	memset(res, 0, sizeof(*res));
	res->failed_step = -1;
	pthread_mutex_lock(&l->lock);
	vy_err rc = run_locked(l, seq, ptrs, stop, res, e);
	pthread_mutex_unlock(&l->lock);
	return rc;
}

static vy_err local_run(vy_runner *r, const vy_seq *seq, const vy_buffer_view *views, const _Atomic uint32_t *stop,
			vy_run_result *res, vy_error *e)
{
	vy_dptr *ptrs = malloc((seq->nbuffers + 1) * sizeof(*ptrs));
	if (!ptrs)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot hold the sequence");
	for (uint32_t i = 0; i < seq->nbuffers; i++)
		ptrs[i] = views[i].ptr;
	vy_err rc = vy_runner_local_run_ptrs(r, seq, ptrs, stop, res, e);
	free(ptrs);
	return rc;
}

static void local_sweep(vy_runner *r)
{
	(void)r; /* it maps nothing of its own */
}

static void local_close(vy_runner *r)
{
	local_runner *l = local_of(r);
	vy_device *d = l->dev;
	while (l->modules) {
		module *m = l->modules;
		l->modules = m->next;
		drop(l, m);
	}
	if (l->start)
		d->ops->event_destroy(d, l->start, NULL);
	if (l->end)
		d->ops->event_destroy(d, l->end, NULL);
	if (l->stream)
		d->ops->stream_destroy(d, l->stream, NULL);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

static const vy_runner_ops local_ops = {
	.load = local_load,
	.unload = local_unload,
	.kernel = local_kernel,
	.run = local_run,
	.sweep = local_sweep,
	.close = local_close,
};

vy_err vy_runner_local_open(vy_device *dev, vy_runner **out, vy_error *e)
{
	local_runner *l = calloc(1, sizeof(*l));
	if (!l || pthread_mutex_init(&l->lock, NULL) != 0) {
		free(l);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate a runner");
	}
	l->base.ops = &local_ops;
	l->dev = dev;
	*out = &l->base;
	return VY_OK;
}
