/* The standby's copy of the kept namespace (preload.h). */
#include "persist/preload.h"
#include "core/clock.h"
#include "daemon/log.h"
#include "persist/load.h"
#include "state/follow.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct vy_preload {
	vy_state_follow f;
	vy_shadow sh;
	vy_load_ctx load;
	bool fresh;        /* this step started afresh (reset) */
	atomic_bool finish; /* stopped with time to spare: no step is cut */
	bool failed;        /* a step failed (logged): the takeover loads everything */
	bool said;         /* the first step that worked is logged */
	atomic_bool stop;
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void reset(void *ctx)
{
	vy_preload *p = ctx;
	vy_shadow_destroy(&p->sh);
	vy_shadow_init(&p->sh);
	p->load = (vy_load_ctx){.shadow = &p->sh};
	p->fresh = true;
}

/* A fresh load the takeover would not use is cut short at a stop. */
static bool cut(vy_preload *p)
{
	return p->fresh && atomic_load(&p->stop) && !atomic_load(&p->finish);
}

static vy_err section(void *ctx, uint32_t type, const void *b, uint64_t len, vy_error *e)
{
	vy_preload *p = ctx;
	if (cut(p))
		return vy_fail(e, VY_EINTR, "nothing to do", "stopped");
	return vy_load_section(&p->load, type, b, len, e);
}

static vy_err record(void *ctx, const vy_state_rec *r, vy_error *e)
{
	vy_preload *p = ctx;
	if (cut(p))
		return vy_fail(e, VY_EINTR, "nothing to do", "stopped");
	return vy_load_record(&p->load, r, e);
}

static const vy_state_follow_fns fns = {.reset = reset, .section = section, .record = record};

static void *follow(void *arg)
{
	vy_preload *p = arg;
	pthread_setname_np(pthread_self(), "vy-follow"); /* not a FUSE worker (tests count those) */
	pthread_mutex_lock(&p->lock);
	while (!atomic_load(&p->stop)) {
		pthread_mutex_unlock(&p->lock);
		vy_error e;
		p->fresh = false;
		vy_err rc = vy_state_follow_step(&p->f, &fns, p, &e);
		pthread_mutex_lock(&p->lock);
		if (rc == VY_OK && !p->said) {
			p->said = true; /* once: the tests wait for it */
			vy_log(LOG_NOTICE, "standby: following the kept state ahead (%llu records)",
			       (unsigned long long)p->load.records);
		}
		if (rc != VY_OK && rc != VY_EBUSY && rc != VY_EINTR) {
			/* The takeover loads everything, and says what it finds. */
			vy_log(LOG_WARNING, "standby: stopped following the kept state: %s", e.msg);
			p->failed = true;
			break;
		}
		struct timespec t;
		if (clock_gettime(CLOCK_REALTIME, &t) != 0)
			break;
		t.tv_nsec += VY_PRELOAD_STEP_MS * 1000000L;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		while (!atomic_load(&p->stop) && pthread_cond_timedwait(&p->cond, &p->lock, &t) == 0)
			;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* A preload following `fds` (taken), its thread not started; NULL: logged,
 * after `who` ("standby", "takeover"). */
static vy_preload *open_preload(const vy_state_fds *fds, const char *who)
{
	vy_preload *p = calloc(1, sizeof(*p));
	vy_error e;
	vy_err rc = p ? vy_state_follow_open(fds, &p->f, &e) : vy_fail(&e, VY_ENOMEM, "free memory", "no memory");
	if (rc != VY_OK) {
		int own[3] = {fds->region, fds->image[0], fds->image[1]};
		for (int i = 0; i < 3; i++)
			if (own[i] >= 0)
				close(own[i]);
		free(p);
		vy_log(rc == VY_ENOTSUP ? LOG_INFO : LOG_WARNING, "%s: cannot follow the kept state ahead: %s", who, e.msg);
		return NULL;
	}
	vy_shadow_init(&p->sh);
	p->load = (vy_load_ctx){.shadow = &p->sh};
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	return p;
}

vy_preload *vy_preload_start(const vy_state_fds *fds)
{
	vy_preload *p = open_preload(fds, "standby");
	if (!p)
		return NULL;
	int err = pthread_create(&p->thread, NULL, follow, p);
	if (err != 0) {
		vy_log(LOG_WARNING, "standby: cannot follow the kept state ahead: %s", strerror(err));
		vy_preload_free(p);
		return NULL;
	}
	p->running = true;
	return p;
}

void vy_preload_stop(vy_preload *p)
{
	if (!p || !p->running)
		return;
	pthread_mutex_lock(&p->lock);
	atomic_store(&p->stop, true);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	p->running = false;
}

/* One step on this thread, none cut; a failure leaves the copy unused
 * (the takeover then loads everything and says why). */
static void step_now(vy_preload *p)
{
	vy_error e;
	atomic_store(&p->finish, true);
	p->fresh = false;
	vy_err rc = vy_state_follow_step(&p->f, &fns, p, &e);
	if (rc != VY_OK && rc != VY_EBUSY) {
		vy_log(LOG_WARNING, "takeover: cannot load the kept state while the devices open: %s", e.msg);
		p->failed = true;
	}
}

void vy_preload_finish(vy_preload *p)
{
	if (!p)
		return;
	if (p->running) {
		pthread_mutex_lock(&p->lock);
		atomic_store(&p->finish, true);
		atomic_store(&p->stop, true);
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
		p->running = false;
	}
	if (!p->failed) /* once failed, said once: the takeover loads everything */
		step_now(p); /* what was written since its last step (all of it, if none ran) */
}

vy_preload *vy_preload_load(const vy_state_fds *fds)
{
	vy_preload *p = open_preload(fds, "takeover");
	if (p)
		step_now(p);
	if (p && p->failed) { /* its partial copy is no use: freed before the full load */
		vy_preload_free(p);
		p = NULL;
	}
	return p;
}

bool vy_preload_take(vy_preload *p, const vy_state *st, vy_shadow *sh, uint64_t *seq, uint64_t *records)
{
	if (!p || p->running || p->failed || !vy_state_follow_current(&p->f, st))
		return false;
	*sh = p->sh;
	vy_shadow_init(&p->sh);
	*seq = p->f.seq;
	*records = p->load.records;
	p->f.loaded = false;
	return true;
}

void vy_preload_free(vy_preload *p)
{
	if (!p)
		return;
	vy_preload_stop(p);
	vy_shadow_destroy(&p->sh);
	vy_state_follow_close(&p->f);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
