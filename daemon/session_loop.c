/* The request loop vyrefs and bench/nullfs share (session.h says why it is
 * ours).
 * - The loop is busy while, in the last QUIET_NS, a request was taken as
 *   another was being served (requests in parallel) or with no worker left
 *   waiting. Then every idle worker waits on the kernel, as in libfuse's
 *   loop, and bursts are taken at once.
 * - A worker that takes a request when no other waits on the kernel wakes
 *   the worker that went to sleep last (or starts a new one, up to
 *   VY_SESSION_WORKERS); when quiet, only if no worker has replied and is
 *   on its way back to wait.
 * - Quiet, a worker that has replied goes back to the kernel while fewer
 *   than `waiting` workers wait there; otherwise it sleeps on a stack.
 * So once requests come one at a time they alternate over the few hot
 * workers that wait, with no wake-up on their path; no worker is torn down
 * and started again. */
#include "core/clock.h"
#include "daemon/session.h"

#include <errno.h>
#include <fuse_log.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define QUIET_NS 100000000ull /* 100 ms without requests in parallel */

struct worker {
	pthread_t thread;
	pthread_cond_t wake;
	bool woken;		  /* taken off the stack, with a waiting place */
	bool serving;		  /* counted in pool.serving */
	bool replied;		  /* counted in pool.returning */
	struct worker *next;	  /* on the sleeping stack */
	struct worker *next_made; /* every worker, for the join */
	struct fuse_buf buf;
	struct pool *pool;
};

struct pool {
	struct fuse_session *se;
	unsigned waiting_cap; /* >= 2 (0 runs libfuse's loop instead) */
	pthread_mutex_t lock;
	unsigned made, waiting; /* workers started; in (or bound for) a receive */
	atomic_uint serving;	/* took a request, not replied yet */
	atomic_uint returning;	/* replied, not yet back: they will wait again */
	uint64_t busy_ns;	/* the last take in parallel or with none waiting */
	struct worker *sleeping; /* top: the one that went to sleep last */
	struct worker *all;
	bool stop;
	int error; /* the first receive error, a negative errno */
	sem_t ended; /* posted by each worker whose receive ended the session */
};

static void *work(void *arg);

static _Thread_local struct worker *current; /* NULL in libfuse's loop */

void vy_session_replying(void)
{
	struct worker *w = current;
	if (w && w->serving) {
		w->serving = false;
		w->replied = true;
		atomic_fetch_add(&w->pool->returning, 1);
		atomic_fetch_sub(&w->pool->serving, 1);
	}
}

/* With the pool locked: one more worker, counted as waiting. Workers take
 * no signals: they go to the thread that waits in vy_session_loop. */
static int start_worker(struct pool *p)
{
	struct worker *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->pool = p;
	int rc = pthread_cond_init(&w->wake, NULL);
	if (rc != 0) {
		free(w);
		return -rc;
	}
	sigset_t all, old;
	sigfillset(&all);
	rc = pthread_sigmask(SIG_BLOCK, &all, &old);
	if (rc == 0) {
		rc = pthread_create(&w->thread, NULL, work, w);
		if (pthread_sigmask(SIG_SETMASK, &old, NULL) != 0) /* fails only for a bad `how` */
			fuse_log(FUSE_LOG_ERR, "vyrefs: cannot restore the signal mask after starting a worker\n");
	}
	if (rc != 0) {
		pthread_cond_destroy(&w->wake);
		free(w);
		return -rc;
	}
	w->next_made = p->all;
	p->all = w;
	p->made++;
	p->waiting++;
	return 0;
}

/* With the pool locked, when no worker is left waiting: the worker that went
 * to sleep last goes back to the kernel; none sleeping, a new one starts.
 * At the worker limit, or when a start fails, the request after this one
 * waits for a worker to finish. */
static void keep_one_waiting(struct pool *p)
{
	struct worker *w = p->sleeping;
	if (w) {
		p->sleeping = w->next;
		w->woken = true;
		p->waiting++;
		pthread_cond_signal(&w->wake);
	} else if (p->made < VY_SESSION_WORKERS) {
		(void)start_worker(p); /* failing, the workers there serve on */
	}
}

/* With the pool locked, after a request: back to the kernel, or to sleep
 * until keep_one_waiting needs this worker. False when the loop stops. */
static bool wait_or_sleep(struct pool *p, struct worker *w)
{
	if (p->stop)
		return false;
	if (p->waiting < p->waiting_cap || vy_monotonic_ns() - p->busy_ns < QUIET_NS) {
		p->waiting++;
		return true;
	}
	w->woken = false;
	w->next = p->sleeping;
	p->sleeping = w;
	while (!w->woken && !p->stop)
		pthread_cond_wait(&w->wake, &p->lock);
	return w->woken && !p->stop;
}

/* A worker's read said the connection is gone (one session per process). */
static atomic_bool connection_gone;

bool vy_session_connection_gone(void)
{
	return atomic_load(&connection_gone);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->pool;
	current = w;
	for (;;) {
		/* Cancellation only inside the receive: vy_session_loop ends a
		 * worker blocked there; a request is never cut short. */
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		int res = fuse_session_receive_buf(p->se, &w->buf);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		if (res == -EINTR || res == -EAGAIN)
			continue; /* still waiting */
		pthread_mutex_lock(&p->lock);
		p->waiting--;
		if (res <= 0 || p->stop) {
			if (res < 0 && p->error == 0)
				p->error = res;
			if (res == 0) /* libfuse's word for ENODEV: the kernel ended it */
				atomic_store(&connection_gone, true);
			pthread_mutex_unlock(&p->lock);
			fuse_session_exit(p->se);
			sem_post(&p->ended);
			return NULL;
		}
		bool parallel = atomic_load(&p->serving) > 0;
		if (parallel || p->waiting == 0) { /* the clock only when it decides */
			uint64_t now = vy_monotonic_ns();
			if (parallel)
				p->busy_ns = now;
			/* Quiet, a worker that has replied is about to wait again.
			 * Busy, it may still be writing a large reply: no waiting
			 * for it. */
			if (p->waiting == 0 && (now - p->busy_ns < QUIET_NS || atomic_load(&p->returning) == 0)) {
				p->busy_ns = now;
				keep_one_waiting(p);
			}
		}
		w->serving = true;
		atomic_fetch_add(&p->serving, 1);
		pthread_mutex_unlock(&p->lock);

		fuse_session_process_buf(p->se, &w->buf);

		pthread_mutex_lock(&p->lock);
		if (w->serving) { /* no reply (a forget) */
			w->serving = false;
			atomic_fetch_sub(&p->serving, 1);
		}
		if (w->replied) {
			w->replied = false;
			atomic_fetch_sub(&p->returning, 1);
		}
		bool again = wait_or_sleep(p, w);
		pthread_mutex_unlock(&p->lock);
		if (!again)
			return NULL;
	}
}

/* libfuse's own loop: every idle worker waits on the kernel. */
static int libfuse_loop(struct fuse_session *se)
{
	struct fuse_loop_config *loop = fuse_loop_cfg_create();
	if (!loop)
		return -ENOMEM;
	int rc = fuse_session_loop_mt(se, loop);
	fuse_loop_cfg_destroy(loop);
	return rc > 0 ? 0 : rc; /* > 0: the signal that ended it */
}

int vy_session_loop(struct fuse_session *se, unsigned waiting)
{
	if (waiting == 0)
		return libfuse_loop(se);
	struct pool p = {.se = se, .waiting_cap = waiting};
	int rc = pthread_mutex_init(&p.lock, NULL);
	if (rc != 0)
		return -rc;
	if (sem_init(&p.ended, 0, 0) != 0) {
		rc = -errno;
		pthread_mutex_destroy(&p.lock);
		return rc;
	}
	pthread_mutex_lock(&p.lock);
	rc = start_worker(&p);
	pthread_mutex_unlock(&p.lock);
	if (rc == 0) {
		/* Wakes on a worker's end or on a signal (fuse_session_exit);
		 * each second too, for a signal that came just before the wait. */
		while (!fuse_session_exited(se)) {
			struct timespec t;
			if (clock_gettime(CLOCK_REALTIME, &t) != 0)
				break;
			t.tv_sec += 1;
			if (sem_timedwait(&p.ended, &t) != 0 && errno != EINTR && errno != ETIMEDOUT)
				break;
		}
		fuse_session_exit(se);
		pthread_mutex_lock(&p.lock);
		p.stop = true;
		for (struct worker *w = p.sleeping; w; w = w->next)
			pthread_cond_signal(&w->wake);
		for (struct worker *w = p.all; w; w = w->next_made)
			pthread_cancel(w->thread); /* takes effect in a receive only */
		pthread_mutex_unlock(&p.lock);
		rc = p.error;
	}
	while (p.all) {
		struct worker *w = p.all;
		p.all = w->next_made;
		pthread_join(w->thread, NULL);
		pthread_cond_destroy(&w->wake);
		free(w->buf.mem);
		free(w);
	}
	sem_destroy(&p.ended);
	pthread_mutex_destroy(&p.lock);
	return rc;
}
