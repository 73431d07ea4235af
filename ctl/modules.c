/* Module registry: name -> load outcome, JIT log, kernel shapes, uses. */
#include "ctl/modules.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct kernel {
	char *name;
	vy_function_info info;
	struct kernel *next;
} kernel;

typedef struct module {
	char *name;
	bool loaded;   /* false: the last load failed (the log says why) */
	char *log;
	unsigned busy; /* sequences using it now */
	kernel *kernels;
	struct module *next;
} module;

struct vy_modules {
	pthread_mutex_t lock;
	vy_runner *runner;
	module *list;
	pthread_mutex_t make_lock; /* one built-in made at a time, once */
	vy_modules_maker maker;
	void *maker_ctx;
};

vy_err vy_modules_open(vy_runner *runner, vy_modules **out, vy_error *e)
{
	vy_modules *m = calloc(1, sizeof(*m));
	if (!m || pthread_mutex_init(&m->lock, NULL) != 0) {
		free(m);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the module registry");
	}
	if (pthread_mutex_init(&m->make_lock, NULL) != 0) {
		pthread_mutex_destroy(&m->lock);
		free(m);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the module registry");
	}
	m->runner = runner;
	*out = m;
	return VY_OK;
}

static void drop_kernels(module *mod)
{
	for (kernel *k = mod->kernels, *next; k; k = next) {
		next = k->next;
		free(k->name);
		free(k);
	}
	mod->kernels = NULL;
}

static void drop(module *mod)
{
	drop_kernels(mod);
	free(mod->name);
	free(mod->log);
	free(mod);
}

void vy_modules_close(vy_modules *m)
{
	if (!m)
		return;
	for (module *mod = m->list, *next; mod; mod = next) {
		next = mod->next;
		drop(mod);
	}
	pthread_mutex_destroy(&m->lock);
	pthread_mutex_destroy(&m->make_lock);
	free(m);
}

void vy_modules_set_maker(vy_modules *m, vy_modules_maker fn, void *ctx)
{
	m->maker = fn;
	m->maker_ctx = ctx;
}

static module *find(vy_modules *m, const char *name)
{
	for (module *mod = m->list; mod; mod = mod->next)
		if (!strcmp(mod->name, name))
			return mod;
	return NULL;
}

static vy_err busy(const char *name, vy_error *e)
{
	return vy_fail(e, VY_EBUSY, "wait for the running sequence to finish",
		       "module '%s' is in use by a running sequence", name);
}

vy_err vy_modules_load(vy_modules *m, const char *name, const void *image, size_t len, vy_error *e)
{
	pthread_mutex_lock(&m->lock);
	module *mod = find(m, name);
	vy_err rc = VY_OK;
	if (mod && mod->busy) {
		rc = busy(name, e);
		goto out;
	}
	if (!mod) {
		mod = calloc(1, sizeof(*mod));
		if (!mod || !(mod->name = strdup(name))) {
			free(mod);
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot record module '%s'", name);
			goto out;
		}
		mod->next = m->list;
		m->list = mod;
	}
	drop_kernels(mod);
	char *log = NULL;
	rc = m->runner->ops->load(m->runner, name, image, len, &log, e);
	mod->loaded = rc == VY_OK;
	free(mod->log);
	mod->log = log;
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

vy_err vy_modules_failed(vy_modules *m, const char *name, const char *log, vy_error *e)
{
	vy_err rc = vy_modules_unload(m, name, e);
	if (rc != VY_OK)
		return rc;
	module *mod = calloc(1, sizeof(*mod));
	if (!mod || !(mod->name = strdup(name)) || !(mod->log = strdup(log ? log : ""))) {
		if (mod)
			free(mod->name);
		free(mod);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot record module '%s'", name);
	}
	pthread_mutex_lock(&m->lock);
	mod->next = m->list;
	m->list = mod;
	pthread_mutex_unlock(&m->lock);
	return VY_OK;
}

vy_err vy_modules_unload(vy_modules *m, const char *name, vy_error *e)
{
	pthread_mutex_lock(&m->lock);
	vy_err rc = VY_OK;
	module **p = &m->list;
	while (*p && strcmp((*p)->name, name) != 0)
		p = &(*p)->next;
	module *mod = *p;
	if (mod && mod->busy) {
		rc = busy(name, e);
	} else if (mod) {
		*p = mod->next;
		rc = m->runner->ops->unload(m->runner, name, e);
		drop(mod);
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

char *vy_modules_log(vy_modules *m, const char *name)
{
	pthread_mutex_lock(&m->lock);
	module *mod = find(m, name);
	char *log = mod && mod->log ? strdup(mod->log) : NULL;
	pthread_mutex_unlock(&m->lock);
	return log;
}

bool vy_modules_loaded(vy_modules *m, const char *name)
{
	pthread_mutex_lock(&m->lock);
	module *mod = find(m, name);
	bool loaded = mod && mod->loaded;
	pthread_mutex_unlock(&m->lock);
	return loaded;
}

/* A built-in module named by a sequence and not there: made and loaded.
 * VY_ENOENT when there is no such built-in. Neither lock held. */
static vy_err make(vy_modules *m, const char *name, vy_error *e)
{
	pthread_mutex_lock(&m->make_lock);
	pthread_mutex_lock(&m->lock);
	bool there = find(m, name) != NULL; /* made meanwhile, or copied in */
	pthread_mutex_unlock(&m->lock);
	vy_err rc = VY_OK;
	if (!there) {
		void *image = NULL;
		size_t len = 0;
		char *log = NULL;
		rc = m->maker(m->maker_ctx, name, &image, &len, &log, e);
		if (rc == VY_OK)
			rc = vy_modules_load(m, name, image, len, e);
		else if (rc != VY_ENOENT)
			vy_error_prefix(e, "the built-in module '%s': ", name);
		free(image);
		free(log);
	}
	pthread_mutex_unlock(&m->make_lock);
	return rc;
}

vy_err vy_modules_get(vy_modules *m, const char *module_name, const char *entry, vy_function_info *info, vy_error *e)
{
	pthread_mutex_lock(&m->lock);
	vy_err rc = VY_OK;
	module *mod = find(m, module_name);
	if (!mod && m->maker) {
		pthread_mutex_unlock(&m->lock);
		rc = make(m, module_name, e);
		pthread_mutex_lock(&m->lock);
		if (rc != VY_OK && rc != VY_ENOENT)
			goto out;
		rc = VY_OK;
		mod = find(m, module_name);
	}
	if (!mod || !mod->loaded) {
		rc = vy_fail(e, VY_ENOENT,
			     mod ? "fix the module and copy it again (modules/NAME.log has the JIT log)"
				 : "copy the module into .vyre/modules/ first, e.g. cp saxpy.ptx .vyre/modules/",
			     mod ? "module '%s' did not load" : "no module '%s'", module_name);
		goto out;
	}
	kernel *k = mod->kernels;
	while (k && strcmp(k->name, entry) != 0)
		k = k->next;
	if (!k) {
		kernel *n = calloc(1, sizeof(*n));
		if (!n || !(n->name = strdup(entry))) {
			free(n);
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot record kernel '%s'", entry);
			goto out;
		}
		rc = m->runner->ops->kernel(m->runner, module_name, entry, &n->info, e);
		if (rc != VY_OK) {
			free(n->name);
			free(n);
			goto out;
		}
		n->next = mod->kernels;
		mod->kernels = k = n;
	}
	*info = k->info;
	mod->busy++;
out:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void vy_modules_put(vy_modules *m, const char *name)
{
	pthread_mutex_lock(&m->lock);
	module *mod = find(m, name);
	if (mod && mod->busy)
		mod->busy--;
	pthread_mutex_unlock(&m->lock);
}

bool vy_modules_busy(vy_modules *m, const char *name)
{
	pthread_mutex_lock(&m->lock);
	module *mod = find(m, name);
	bool busy = mod && mod->busy;
	pthread_mutex_unlock(&m->lock);
	return busy;
}
