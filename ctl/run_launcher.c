/* The launcher runner: the daemon's stub for its launcher process (after
 * OpenSSH's monitor_wrap.c). It starts `vyrefs --launcher` on first use,
 * replays every module into a new one, exports to it exactly the buffers
 * each validated sequence names (and only once per generation), and takes
 * the mappings back when a buffer is freed or replaced. A launcher that
 * dies, faults (its context is broken for good) or runs past
 * launch_timeout is killed and replaced at the next use; the daemon's own
 * context, and so every file, is never touched by user code. */
#include "ctl/runner.h"
#include "core/grow.h"
#include "core/u64map.h"
#include "launcher/launcher.h"
#include "proto/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Loading, mapping and starting take no user code: a bound generous enough
 * for a large JIT, and still an end if the launcher hangs. */
#define CONTROL_TIMEOUT_MS 120000
/* The daemon polls for a reply this long before it sleeps: a short
 * sequence's reply comes sooner than a wake-up takes (launcher/launcher.c
 * does the same for requests). */
#define REPLY_SPIN_US 100
/* A RUN's wait looks for a stop this often; a launcher that has not
 * stopped this long after it was asked to is killed. */
#define STOP_SLICE_MS 50
#define STOP_GRACE_MS 1000

typedef struct saved_module {
	char *name;
	void *image;
	size_t len;
	struct saved_module *next;
} saved_module;

typedef struct launcher_runner {
	vy_runner base;
	pthread_mutex_t lock; /* the channel: one request at a time */
	vy_store *store;
	vy_telemetry *tel;
	vy_launcher_options o;
	pid_t pid;
	vy_chan ch;           /* ch.sock -1: no launcher running */
	bool started_once;
	uint64_t unique;
	vy_u64map mapped;     /* handle -> its generation, in the value */
	uint64_t swept_at;    /* vy_store_export_frees at the last sweep */
	saved_module *modules; /* replayed into each new launcher */
} launcher_runner;

static launcher_runner *lr_of(vy_runner *r)
{
	return (launcher_runner *)r;
}

/* Kill and reap the launcher, and take back every mapping it held. Its
 * memory is gone with it, so the exports end. Lock held. */
static void lose(launcher_runner *l, char *why, size_t why_cap)
{
	vy_chan_close(&l->ch);
	if (l->pid > 0) {
		kill(l->pid, SIGKILL); /* a no-op if it already exited */
		int status = 0;
		pid_t w;
		do
			w = waitpid(l->pid, &status, 0);
		while (w < 0 && errno == EINTR);
		if (why && w == l->pid) {
			if (WIFSIGNALED(status))
				snprintf(why, why_cap, "killed by signal %d", WTERMSIG(status));
			else
				snprintf(why, why_cap, "exit status %d", WEXITSTATUS(status));
		}
	}
	l->pid = 0;
	uint64_t key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&l->mapped, &cursor, &key, &value))
		vy_store_unexport(l->store, key, NULL);
	vy_u64map_destroy(&l->mapped);
	vy_u64map_init(&l->mapped);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait for the reply to a RUN: in slices, so that a stop asked for (the
 * writer got a signal, or the mount is going away) reaches the launcher
 * through the mailbox, and a launcher that does not stop within a second
 * (a kernel keeps it busy) is answered with VY_EINTR for the caller to
 * kill. VY_ETIMEDOUT past timeout_ms. Lock held. */
static vy_err await_run(launcher_runner *l, int timeout_ms, const _Atomic uint32_t *stop, vy_msg *reply, vy_error *e)
{
	uint64_t start = now_ms(), asked = 0;
	for (unsigned spin = REPLY_SPIN_US;; spin = 0) {
		vy_err rc = vy_chan_recv(&l->ch, STOP_SLICE_MS, spin, reply, e);
		if (rc != VY_ETIMEDOUT)
			return rc;
		uint64_t now = now_ms();
		if (timeout_ms >= 0 && now - start >= (uint64_t)timeout_ms)
			return vy_fail(e, VY_ETIMEDOUT, "raise launch_timeout", "no answer within %d ms", timeout_ms);
		bool want = (stop && atomic_load(stop)) || (l->o.exiting && l->o.exiting(l->o.exiting_ctx));
		if (want && !asked) {
			vy_chan_set_stop(&l->ch, 1);
			asked = now;
		}
		if (asked && (now - asked >= STOP_GRACE_MS || !vy_chan_stop_flag(&l->ch)))
			return vy_fail(e, VY_EINTR, "make the kernel end sooner", "the sequence was stopped");
	}
}

/* One request and its reply (of at least `min` bytes, a vy_status first);
 * a RUN's wait can be stopped (await_run). The reply is the caller's to
 * free. Lock held. */
static vy_err call_stoppable(launcher_runner *l, uint16_t op, const void *const *parts, const size_t *lens,
			     unsigned nparts, const int *fds, unsigned nfds, int timeout_ms, const _Atomic uint32_t *stop,
			     size_t min, vy_msg *reply, vy_error *e)
{
	uint64_t unique = ++l->unique;
	vy_err rc = vy_chan_send(&l->ch, op, unique, parts, lens, nparts, fds, nfds, e);
	if (rc == VY_OK)
		rc = op == VY_OP_RUN ? await_run(l, timeout_ms, stop, reply, e)
				     : vy_chan_recv(&l->ch, timeout_ms, REPLY_SPIN_US, reply, e);
	if (rc != VY_OK)
		return rc;
	if (reply->h.opcode != (op | VY_OP_REPLY) || reply->h.unique != unique || reply->len < min ||
	    reply->len < sizeof(vy_status) || reply->nfds) {
		vy_msg_free(reply);
		return vy_fail(e, VY_EDEVICE, "the launcher is restarted for the next sequence",
			       "the launcher answered out of turn");
	}
	return VY_OK;
}

static vy_err call(launcher_runner *l, uint16_t op, const void *const *parts, const size_t *lens, unsigned nparts,
		   const int *fds, unsigned nfds, int timeout_ms, size_t min, vy_msg *reply, vy_error *e)
{
	return call_stoppable(l, op, parts, lens, nparts, fds, nfds, timeout_ms, NULL, min, reply, e);
}

/* The status at the start of a reply, as an error. */
static vy_err status_rc(const vy_msg *m, vy_error *e)
{
	vy_status st;
	memcpy(&st, m->body, sizeof(st));
	st.msg[sizeof(st.msg) - 1] = '\0';
	if (st.rc == VY_OK)
		return VY_OK;
	vy_err rc = st.rc > 0 && st.rc <= VY_ERR_LAST ? (vy_err)st.rc : VY_EINTERNAL;
	if (e) {
		e->code = rc;
		snprintf(e->msg, sizeof(e->msg), "%s", st.msg);
	}
	return rc;
}

static vy_err send_load(launcher_runner *l, const saved_module *m, char **log, vy_error *e)
{
	vy_load_in in = {.name_len = (uint32_t)strlen(m->name), .image_len = m->len};
	const void *parts[3] = {&in, m->name, m->image};
	size_t lens[3] = {sizeof(in), in.name_len, m->len};
	vy_msg r;
	vy_err rc = call(l, VY_OP_LOAD, parts, lens, 3, NULL, 0, CONTROL_TIMEOUT_MS, sizeof(vy_load_out), &r, e);
	if (rc != VY_OK)
		return rc;
	vy_load_out out;
	memcpy(&out, r.body, sizeof(out));
	if (log && out.log_len <= r.len - sizeof(out) && (*log = malloc((size_t)out.log_len + 1))) {
		memcpy(*log, (char *)r.body + sizeof(out), out.log_len);
		(*log)[out.log_len] = '\0';
	}
	rc = status_rc(&r, e);
	vy_msg_free(&r);
	return rc;
}

/* A launcher ready for requests: started, greeted, its modules loaded.
 * Lock held. */
static vy_err ensure(launcher_runner *l, vy_error *e)
{
	if (l->ch.sock >= 0) {
		/* Alive, or gone while idle (killed, out of memory): then a new
		 * one, so the next sequence does not pay for the last. */
		int status;
		pid_t w = waitpid(l->pid, &status, WNOHANG);
		if (w == 0)
			return VY_OK;
		if (w == l->pid)
			l->pid = 0; /* reaped: nothing left to kill */
		lose(l, NULL, 0);
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return vy_fail(e, VY_ENOMEM, "raise the open-file limit", "cannot make the launcher's channel: %s",
			       strerror(errno));
	/* The child's end becomes fd 3 through dup2, which clears CLOEXEC;
	 * an end that already is fd 3 would keep it, so move it up. */
	if (sv[1] == VY_LAUNCHER_FD) {
		int up = fcntl(sv[1], F_DUPFD_CLOEXEC, VY_LAUNCHER_FD + 1);
		close(sv[1]);
		sv[1] = up;
	}
	posix_spawn_file_actions_t fa;
	int err = posix_spawn_file_actions_init(&fa);
	if (err == 0 && sv[1] >= 0)
		err = posix_spawn_file_actions_adddup2(&fa, sv[1], VY_LAUNCHER_FD);
	char *argv[] = {(char *)"vyrefs", (char *)"--launcher", NULL};
	pid_t pid = 0;
	if (err == 0 && sv[1] >= 0)
		err = posix_spawn(&pid, l->o.exe, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (sv[1] >= 0)
		close(sv[1]);
	if (err != 0 || sv[1] < 0) {
		close(sv[0]);
		return vy_fail(e, VY_ENODEV, "check that the vyrefs binary can be run (it starts itself as the launcher)",
			       "cannot start the launcher %s: %s", l->o.exe, strerror(err ? err : EMFILE));
	}
	l->pid = pid;
	vy_err rc = vy_chan_open_daemon(&l->ch, sv[0], e);
	if (rc != VY_OK) {
		close(sv[0]);
		l->ch.sock = -1;
		lose(l, NULL, 0);
		return rc;
	}
	vy_telemetry_add(l->tel, launcher_starts, 1);
	if (l->started_once)
		vy_telemetry_add(l->tel, launcher_restarts, 1);
	l->started_once = true;
	vy_hello_in in = {.major = VY_PROTO_MAJOR, .minor = VY_PROTO_MINOR, .backend = (uint32_t)l->o.backend,
			  .ordinal = l->o.ordinal, .host_memory = l->o.host_memory};
	const void *parts[1] = {&in};
	size_t lens[1] = {sizeof(in)};
	vy_msg r;
	/* HELLO hands over the mailbox (if any); it is the launcher's then. */
	int mb_fd = l->ch.mb_fd;
	rc = call(l, VY_OP_HELLO, parts, lens, 1, &mb_fd, mb_fd >= 0 ? 1 : 0, CONTROL_TIMEOUT_MS,
		  sizeof(vy_hello_out), &r, e);
	if (rc == VY_OK) {
		rc = status_rc(&r, e);
		vy_msg_free(&r);
	}
	for (saved_module *m = l->modules; rc == VY_OK && m; m = m->next) {
		vy_error why; /* a module that failed before fails again: its log says so */
		rc = send_load(l, m, NULL, &why);
		if (rc != VY_EDEVICE && rc != VY_ETIMEDOUT)
			rc = VY_OK;
		else if (e)
			*e = why;
	}
	if (rc != VY_OK) {
		lose(l, NULL, 0);
		vy_error_prefix(e, "cannot start the launcher: ");
	}
	return rc;
}

static void forget_module(launcher_runner *l, const char *name)
{
	for (saved_module **p = &l->modules; *p; p = &(*p)->next)
		if (!strcmp((*p)->name, name)) {
			saved_module *m = *p;
			*p = m->next;
			free(m->name);
			free(m->image);
			free(m);
			return;
		}
}

static vy_err lr_load(vy_runner *r, const char *name, const void *image, size_t len, char **log, vy_error *e)
{
	launcher_runner *l = lr_of(r);
	*log = NULL;
	saved_module *m = calloc(1, sizeof(*m));
	if (m) {
		m->name = strdup(name);
		m->image = malloc(len ? len : 1);
		m->len = len;
	}
	if (!m || !m->name || !m->image) {
		if (m) {
			free(m->name);
			free(m->image);
		}
		free(m);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot keep module '%s'", name);
	}
	memcpy(m->image, image, len);
	pthread_mutex_lock(&l->lock);
	forget_module(l, name);
	m->next = l->modules;
	l->modules = m;
	vy_err rc = ensure(l, e);
	if (rc == VY_OK) /* the new launcher loaded it already; load again for its log */
		rc = send_load(l, m, log, e);
	if (rc == VY_EDEVICE || rc == VY_ETIMEDOUT)
		lose(l, NULL, 0);
	pthread_mutex_unlock(&l->lock);
	return rc;
}

static vy_err lr_unload(vy_runner *r, const char *name, vy_error *e)
{
	launcher_runner *l = lr_of(r);
	pthread_mutex_lock(&l->lock);
	forget_module(l, name);
	vy_err rc = VY_OK;
	if (l->ch.sock >= 0) {
		vy_name_in in = {.name_len = (uint32_t)strlen(name)};
		const void *parts[2] = {&in, name};
		size_t lens[2] = {sizeof(in), in.name_len};
		vy_msg m;
		rc = call(l, VY_OP_UNLOAD, parts, lens, 2, NULL, 0, CONTROL_TIMEOUT_MS, sizeof(vy_status), &m, e);
		if (rc == VY_OK) {
			rc = status_rc(&m, e);
			vy_msg_free(&m);
		} else {
			lose(l, NULL, 0); /* the next launcher will not have it */
			rc = VY_OK;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

static vy_err lr_kernel(vy_runner *r, const char *module, const char *entry, vy_function_info *info, vy_error *e)
{
	launcher_runner *l = lr_of(r);
	pthread_mutex_lock(&l->lock);
	vy_err rc = ensure(l, e);
	vy_msg m;
	if (rc == VY_OK) {
		vy_kernel_in in = {.module_len = (uint32_t)strlen(module), .entry_len = (uint32_t)strlen(entry)};
		const void *parts[3] = {&in, module, entry};
		size_t lens[3] = {sizeof(in), in.module_len, in.entry_len};
		rc = call(l, VY_OP_KERNEL, parts, lens, 3, NULL, 0, CONTROL_TIMEOUT_MS, sizeof(vy_kernel_out), &m, e);
		if (rc == VY_EDEVICE || rc == VY_ETIMEDOUT)
			lose(l, NULL, 0);
	}
	if (rc == VY_OK) {
		rc = status_rc(&m, e);
		if (rc == VY_OK) {
			vy_kernel_out out;
			memcpy(&out, m.body, sizeof(out));
			memset(info, 0, sizeof(*info));
			info->nparams = out.nparams < VY_PARAMS_MAX ? out.nparams : VY_PARAMS_MAX;
			info->max_threads = out.max_threads;
			info->static_shared = out.static_shared;
			info->max_dynamic_shared = out.max_dynamic_shared;
			info->occ_block = out.occ_block;
			info->occ_grid = out.occ_grid;
			for (size_t i = 0; i < info->nparams; i++)
				info->param_size[i] = out.param_size[i];
		}
		vy_msg_free(&m);
	}
	pthread_mutex_unlock(&l->lock);
	return rc;
}

/* Take one mapping back from the launcher. Lock held. */
static vy_err unmap(launcher_runner *l, uint64_t handle, vy_error *e)
{
	vy_unmap_in in = {.handle = handle};
	const void *parts[1] = {&in};
	size_t lens[1] = {sizeof(in)};
	vy_msg m;
	vy_err rc = call(l, VY_OP_UNMAP, parts, lens, 1, NULL, 0, CONTROL_TIMEOUT_MS, sizeof(vy_status), &m, e);
	if (rc != VY_OK) {
		lose(l, NULL, 0); /* gone with it: every mapping ends */
		return rc;
	}
	rc = status_rc(&m, e);
	vy_msg_free(&m);
	vy_u64map_remove(&l->mapped, handle);
	vy_store_unexport(l->store, handle, NULL);
	return rc;
}

/* Unmap buffers freed or replaced since they were mapped. Lock held. */
static void sweep_locked(launcher_runner *l)
{
	uint64_t frees = vy_store_export_frees(l->store);
	if (frees == l->swept_at)
		return; /* no exported buffer went since: every mapping is current */
	uint64_t *stale = NULL, key;
	size_t n = 0, cap = 0, cursor = 0;
	void *value;
	bool all = true;
	while (vy_u64map_next(&l->mapped, &cursor, &key, &value)) {
		if (vy_store_current(l->store, key, (uint64_t)(uintptr_t)value))
			continue;
		if (!vy_grow((void **)&stale, &cap, n, sizeof(*stale))) {
			all = false; /* the rest waits for the next sweep */
			break;
		}
		stale[n++] = key;
	}
	for (size_t i = 0; i < n && l->ch.sock >= 0; i++)
		unmap(l, stale[i], NULL);
	free(stale);
	if (all)
		l->swept_at = frees;
}

/* Map what the sequence names and the launcher lacks. Lock held. */
static vy_err map_buffers(launcher_runner *l, const vy_seq *seq, const vy_buffer_view *views, vy_error *e)
{
	for (uint32_t i = 0; i < seq->nbuffers; i++) {
		uint64_t h = seq->buffers[i].handle;
		void *gen = vy_u64map_get(&l->mapped, h);
		if (gen && (uint64_t)(uintptr_t)gen == views[i].gen)
			continue;
		if (gen) {
			vy_err rc = unmap(l, h, e);
			if (rc != VY_OK)
				return rc;
		}
		vy_buffer_view v;
		vy_export x;
		vy_err rc = vy_store_export(l->store, h, 0, &v, &x, e);
		if (rc != VY_OK)
			return rc;
		vy_map_in in = {.handle = h, .gen = v.gen, .bytes = v.alloc, .nchunks = x.n, .lead = (uint32_t)v.lead};
		const void *parts[2] = {&in, x.chunk};
		size_t lens[2] = {sizeof(in), x.n * sizeof(uint64_t)};
		vy_msg m;
		rc = call(l, VY_OP_MAP, parts, lens, 2, x.fd, x.n, CONTROL_TIMEOUT_MS, sizeof(vy_status), &m, e);
		vy_export_close(&x);
		if (rc == VY_OK) {
			rc = status_rc(&m, e);
			vy_msg_free(&m);
		} else {
			vy_store_unexport(l->store, h, NULL);
			lose(l, NULL, 0);
			return rc;
		}
		if (rc == VY_OK && !vy_u64map_put(&l->mapped, h, (void *)(uintptr_t)v.gen))
			rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot record a mapping");
		if (rc != VY_OK) {
			vy_store_unexport(l->store, h, NULL);
			lose(l, NULL, 0); /* it may hold the mapping: start afresh */
			return rc;
		}
	}
	return VY_OK;
}

static vy_err lr_run(vy_runner *r, const vy_seq *seq, const vy_buffer_view *views, const _Atomic uint32_t *stop,
		     vy_run_result *res, vy_error *e)
{
	launcher_runner *l = lr_of(r);
	memset(res, 0, sizeof(*res));
	res->failed_step = -1;
	void *body = NULL;
	size_t len = 0;
	vy_err rc = vy_seq_encode(seq, &body, &len, e);
	if (rc != VY_OK)
		return rc;
	pthread_mutex_lock(&l->lock);
	rc = ensure(l, e);
	if (rc == VY_OK) {
		sweep_locked(l);
		rc = ensure(l, e); /* a sweep may have lost it */
	}
	if (rc == VY_OK)
		rc = map_buffers(l, seq, views, e);
	vy_msg m = {0};
	bool sent = false;
	if (rc == VY_OK) {
		const void *parts[1] = {body};
		size_t lens[1] = {len};
		int timeout = l->o.timeout_ms ? (l->o.timeout_ms > INT32_MAX ? INT32_MAX : (int)l->o.timeout_ms) : -1;
		sent = true;
		vy_chan_set_stop(&l->ch, 0);
		/* Shown while the launcher holds the sequence: a test (or an
		 * operator) sees that a stop or a kill now meets a running
		 * sequence, without waiting on the scheduler. */
		vy_telemetry_set(l->tel, launcher_sequences, 1);
		rc = call_stoppable(l, VY_OP_RUN, parts, lens, 1, NULL, 0, timeout, stop, sizeof(vy_run_out), &m, e);
		vy_telemetry_set(l->tel, launcher_sequences, 0);
	}
	char why[64] = "";
	if (sent && rc == VY_EINTR) {
		/* Asked to stop, it did not within a second: a kernel keeps
		 * it busy. Killing it ends the kernel. */
		lose(l, why, sizeof(why));
		res->process_lost = true;
		rc = vy_fail(e, VY_EINTR, "make the kernel end sooner; the mount goes on",
			     "the sequence was stopped: a kernel kept its launcher busy, so the launcher was killed");
	} else if (sent && rc == VY_ETIMEDOUT) {
		lose(l, why, sizeof(why));
		res->process_lost = true;
		rc = vy_fail(e, VY_ETIMEDOUT,
			     "make the kernel end sooner, or raise launch_timeout (0: no limit); the mount goes on",
			     "the sequence ran past launch_timeout (%llu ms): its launcher was killed",
			     (unsigned long long)l->o.timeout_ms);
	} else if (sent && rc != VY_OK) {
		lose(l, why, sizeof(why));
		res->process_lost = true;
		rc = vy_fail(e, VY_EDEVICE, "see the kernel log; the next sequence starts a new launcher",
			     "the launcher died while running the sequence (%s)", why[0] ? why : "its channel broke");
	} else if (sent) {
		vy_run_out out;
		memcpy(&out, m.body, sizeof(out));
		res->steps = out.steps;
		res->launches = out.launches;
		res->memset_ops = out.memset_ops;
		res->memset_bytes = out.memset_bytes;
		res->d2d_ops = out.d2d_ops;
		res->d2d_bytes = out.d2d_bytes;
		res->syncs = out.syncs;
		res->device_us = (double)out.device_ns / 1000.0;
		res->failed_step = out.st.step;
		rc = status_rc(&m, e);
		vy_msg_free(&m);
		if (rc == VY_EDEVICE) {
			/* A fault breaks the launcher's context for good. */
			lose(l, NULL, 0);
			res->process_lost = true;
		}
	}
	pthread_mutex_unlock(&l->lock);
	free(body);
	return rc;
}

static void lr_sweep(vy_runner *r)
{
	launcher_runner *l = lr_of(r);
	if (pthread_mutex_trylock(&l->lock) != 0)
		return; /* a sequence runs: it sweeps when it starts the next */
	sweep_locked(l);
	pthread_mutex_unlock(&l->lock);
}

static void lr_close(vy_runner *r)
{
	launcher_runner *l = lr_of(r);
	pthread_mutex_lock(&l->lock);
	lose(l, NULL, 0);
	pthread_mutex_unlock(&l->lock);
	vy_u64map_destroy(&l->mapped);
	while (l->modules)
		forget_module(l, l->modules->name);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

static const vy_runner_ops launcher_ops = {
	.load = lr_load,
	.unload = lr_unload,
	.kernel = lr_kernel,
	.run = lr_run,
	.sweep = lr_sweep,
	.close = lr_close,
};

vy_err vy_runner_launcher_open(vy_store *store, vy_telemetry *tel, const vy_launcher_options *o, vy_runner **out,
			       vy_error *e)
{
	launcher_runner *l = calloc(1, sizeof(*l));
	if (!l || pthread_mutex_init(&l->lock, NULL) != 0) {
		free(l);
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot allocate the launcher runner");
	}
	l->base.ops = &launcher_ops;
	l->base.shares = true;
	l->store = store;
	l->tel = tel;
	l->o = *o;
	l->ch.sock = -1;
	l->ch.mb_fd = -1;
	vy_u64map_init(&l->mapped);
	*out = &l->base;
	return VY_OK;
}

int vy_runner_launcher_pid(vy_runner *r)
{
	launcher_runner *l = lr_of(r);
	pthread_mutex_lock(&l->lock);
	int pid = l->pid;
	pthread_mutex_unlock(&l->lock);
	return pid;
}
