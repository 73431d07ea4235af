/* The launcher: a dispatch table over the channel's operations, as libfuse's
 * fuse_ll_ops[] and OpenSSH's monitor table. Anything unexpected (a message
 * before HELLO, an unknown opcode, a malformed body) ends the process: the
 * daemon starts a new one. */
#include "launcher/launcher.h"
#include "core/span.h"
#include "core/u64map.h"
#include "ctl/runner.h"
#include "proto/channel.h"
#include "proto/seq.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A buffer the daemon exported to us, mapped here. */
typedef struct mapping {
	uint64_t gen;
	uint64_t lead; /* the buffer's byte 0 is this far into span */
	vy_span span;
} mapping;

typedef struct launcher {
	vy_chan ch;
	vy_device *dev;
	vy_runner *runner;
	vy_u64map maps; /* handle -> mapping */
} launcher;

static void status_of(vy_status *st, vy_err rc, const vy_error *e)
{
	st->rc = (int32_t)rc;
	st->step = -1;
	snprintf(st->msg, sizeof(st->msg), "%s", rc == VY_OK ? "" : e->msg);
}

static vy_err reply(launcher *l, const vy_msg *m, const void *out, size_t len, const void *extra, size_t extra_len)
{
	const void *parts[2] = {out, extra};
	size_t lens[2] = {len, extra_len};
	vy_error e;
	return vy_chan_send(&l->ch, m->h.opcode | VY_OP_REPLY, m->h.unique, parts, lens, 2, NULL, 0, &e);
}

static vy_err reply_status(launcher *l, const vy_msg *m, vy_err rc, const vy_error *e)
{
	vy_status st;
	status_of(&st, rc, e);
	return reply(l, m, &st, sizeof(st), NULL, 0);
}

/* A body of a fixed part followed by `n` names of the lengths it gives. */
static bool body_is(const vy_msg *m, size_t fixed, uint64_t rest)
{
	return m->len >= fixed && m->len - fixed == rest;
}

static char *name_at(const vy_msg *m, size_t off, uint32_t len)
{
	char *s = malloc((size_t)len + 1);
	if (s) {
		memcpy(s, (char *)m->body + off, len);
		s[len] = '\0';
		if (strlen(s) != len) { /* an embedded NUL */
			free(s);
			s = NULL;
		}
	}
	return s;
}

static vy_err op_hello(launcher *l, vy_msg *m)
{
	vy_hello_in in;
	if (l->dev || !body_is(m, sizeof(in), 0))
		return VY_EINVAL;
	memcpy(&in, m->body, sizeof(in));
	vy_hello_out out = {.major = VY_PROTO_MAJOR, .minor = VY_PROTO_MINOR};
	vy_error e;
	/* The mailbox comes with HELLO; the reply goes through it. */
	int mb_fd = vy_msg_take_fd(m, 0);
	vy_err rc = vy_chan_open_launcher(&l->ch, l->ch.sock, mb_fd, &e);
	if (mb_fd >= 0)
		close(mb_fd);
	if (rc != VY_OK)
		return rc;
	if (in.major != VY_PROTO_MAJOR)
		rc = vy_fail(&e, VY_EINVAL, "run one vyrefs binary for the daemon and its launcher",
			     "protocol %u.%u asked, this launcher speaks %u.%u", in.major, in.minor, VY_PROTO_MAJOR,
			     VY_PROTO_MINOR);
	vy_device_options o = {.backend = (vy_backend_kind)in.backend, .ordinal = in.ordinal, .host_memory = in.host_memory};
	if (rc == VY_OK && in.backend != VY_BACKEND_CUDA && in.backend != VY_BACKEND_HOST)
		rc = vy_fail(&e, VY_EINVAL, "report this bug", "the daemon asked for backend %u", in.backend);
	if (rc == VY_OK)
		rc = vy_device_open(&o, &l->dev, NULL, 0, &e);
	if (rc == VY_OK && !l->dev->share) {
		rc = vy_fail(&e, VY_ENOTSUP, "use a GPU with virtual memory management", "this device cannot import memory");
	}
	if (rc == VY_OK)
		rc = vy_runner_local_open(l->dev, &l->runner, &e);
	if (rc == VY_OK)
		out.share_granularity = l->dev->info.share_granularity;
	status_of(&out.st, rc, &e);
	reply(l, m, &out, sizeof(out), NULL, 0);
	return rc;
}

static vy_err op_load(launcher *l, vy_msg *m)
{
	vy_load_in in;
	if (m->len < sizeof(in))
		return VY_EINVAL;
	memcpy(&in, m->body, sizeof(in));
	uint64_t rest = (uint64_t)in.name_len + in.image_len;
	if (!body_is(m, sizeof(in), rest))
		return VY_EINVAL;
	char *name = name_at(m, sizeof(in), in.name_len);
	if (!name)
		return VY_EINVAL;
	char *log = NULL;
	vy_error e;
	vy_err rc = l->runner->ops->load(l->runner, name, (char *)m->body + sizeof(in) + in.name_len,
					 (size_t)in.image_len, &log, &e);
	vy_load_out out = {0};
	status_of(&out.st, rc, &e);
	size_t log_len = log ? strlen(log) : 0;
	out.log_len = (uint32_t)log_len;
	vy_err sent = reply(l, m, &out, sizeof(out), log, log_len);
	free(log);
	free(name);
	return sent;
}

static vy_err op_unload(launcher *l, vy_msg *m)
{
	vy_name_in in;
	if (m->len < sizeof(in))
		return VY_EINVAL;
	memcpy(&in, m->body, sizeof(in));
	char *name = body_is(m, sizeof(in), in.name_len) ? name_at(m, sizeof(in), in.name_len) : NULL;
	if (!name)
		return VY_EINVAL;
	vy_error e;
	vy_err rc = l->runner->ops->unload(l->runner, name, &e);
	free(name);
	return reply_status(l, m, rc, &e);
}

static vy_err op_kernel(launcher *l, vy_msg *m)
{
	vy_kernel_in in;
	if (m->len < sizeof(in))
		return VY_EINVAL;
	memcpy(&in, m->body, sizeof(in));
	if (!body_is(m, sizeof(in), (uint64_t)in.module_len + in.entry_len))
		return VY_EINVAL;
	char *mod = name_at(m, sizeof(in), in.module_len);
	char *entry = name_at(m, sizeof(in) + in.module_len, in.entry_len);
	vy_err rc = VY_EINVAL;
	if (mod && entry) {
		vy_function_info info;
		vy_error e;
		vy_kernel_out out = {0};
		rc = l->runner->ops->kernel(l->runner, mod, entry, &info, &e);
		status_of(&out.st, rc, &e);
		if (rc == VY_OK) {
			out.nparams = (uint32_t)info.nparams;
			out.max_threads = info.max_threads;
			out.static_shared = info.static_shared;
			out.max_dynamic_shared = info.max_dynamic_shared;
			out.occ_block = info.occ_block;
			out.occ_grid = info.occ_grid;
			for (size_t i = 0; i < info.nparams && i < VY_PROTO_PARAMS_MAX; i++)
				out.param_size[i] = (uint32_t)info.param_size[i];
		}
		rc = reply(l, m, &out, sizeof(out), NULL, 0);
	}
	free(mod);
	free(entry);
	return rc;
}

static vy_err unmap_one(launcher *l, uint64_t handle, vy_error *e)
{
	mapping *mp = vy_u64map_remove(&l->maps, handle);
	if (!mp)
		return VY_OK;
	vy_err rc = vy_span_release(l->dev, &mp->span, e);
	free(mp);
	return rc;
}

static vy_err op_map(launcher *l, vy_msg *m)
{
	vy_map_in in;
	uint64_t chunk[VY_CHUNKS_MAX];
	if (m->len < sizeof(in))
		return VY_EINVAL;
	memcpy(&in, m->body, sizeof(in));
	if (in.nchunks == 0 || in.nchunks > VY_CHUNKS_MAX || m->nfds != in.nchunks ||
	    !body_is(m, sizeof(in), (uint64_t)in.nchunks * sizeof(uint64_t)))
		return VY_EINVAL;
	memcpy(chunk, (char *)m->body + sizeof(in), in.nchunks * sizeof(uint64_t));
	vy_error e;
	vy_err rc = unmap_one(l, in.handle, &e); /* an older generation */
	mapping *mp = calloc(1, sizeof(*mp));
	if (rc == VY_OK && !mp)
		rc = vy_fail(&e, VY_ENOMEM, "free host memory", "launcher: cannot record a mapping");
	if (rc == VY_OK)
		rc = vy_span_import(l->dev, m->fds, chunk, in.nchunks, &mp->span, &e);
	if (rc == VY_OK && (mp->span.bytes != in.bytes || in.lead >= in.bytes)) {
		vy_span_release(l->dev, &mp->span, NULL);
		rc = vy_fail(&e, VY_EINVAL, "report this bug", "launcher: a mapping of %llu bytes said it was %llu, byte 0 at %u",
			     (unsigned long long)mp->span.bytes, (unsigned long long)in.bytes, in.lead);
	}
	if (rc == VY_OK) {
		mp->gen = in.gen;
		mp->lead = in.lead;
		if (!vy_u64map_put(&l->maps, in.handle, mp)) {
			vy_span_release(l->dev, &mp->span, NULL);
			rc = vy_fail(&e, VY_ENOMEM, "free host memory", "launcher: cannot record a mapping");
		} else {
			mp = NULL;
		}
	}
	free(mp);
	return reply_status(l, m, rc, &e);
}

static vy_err op_unmap(launcher *l, vy_msg *m)
{
	vy_unmap_in in;
	if (!body_is(m, sizeof(in), 0))
		return VY_EINVAL;
	memcpy(&in, m->body, sizeof(in));
	vy_error e;
	vy_err rc = unmap_one(l, in.handle, &e);
	return reply_status(l, m, rc, &e);
}

static vy_err op_run(launcher *l, vy_msg *m)
{
	vy_seq seq;
	vy_error e;
	vy_run_out out = {0};
	vy_run_result res = {.failed_step = -1};
	vy_err rc = vy_seq_decode(m->body, m->len, &seq, &e);
	if (rc != VY_OK)
		return rc; /* the daemon broke the protocol */
	vy_dptr *ptrs = malloc(((size_t)seq.nbuffers + 1) * sizeof(*ptrs));
	if (!ptrs)
		rc = vy_fail(&e, VY_ENOMEM, "free host memory", "launcher: cannot hold the sequence");
	for (uint32_t i = 0; rc == VY_OK && i < seq.nbuffers; i++) {
		const vy_wire_buffer *b = &seq.buffers[i];
		mapping *mp = vy_u64map_get(&l->maps, b->handle);
		if (!mp || mp->gen != b->gen || b->len > mp->span.bytes - mp->lead)
			rc = vy_fail(&e, VY_EINTERNAL, "report this bug: the daemon and its launcher disagree",
				     "launcher: buffer %llu (generation %llu) is not mapped here",
				     (unsigned long long)b->handle, (unsigned long long)b->gen);
		else
			ptrs[i] = mp->span.ptr + mp->lead;
	}
	if (rc == VY_OK)
		rc = vy_runner_local_run_ptrs(l->runner, &seq, ptrs, vy_chan_stop_flag(&l->ch), &res, &e);
	free(ptrs);
	status_of(&out.st, rc, &e);
	out.st.step = res.failed_step;
	out.steps = res.steps;
	out.launches = res.launches;
	out.memset_ops = res.memset_ops;
	out.memset_bytes = res.memset_bytes;
	out.d2d_ops = res.d2d_ops;
	out.d2d_bytes = res.d2d_bytes;
	out.syncs = res.syncs;
	out.device_ns = res.device_us > 0 ? (uint64_t)(res.device_us * 1000.0) : 0;
	vy_err sent = reply(l, m, &out, sizeof(out), NULL, 0);
	/* A device failure leaves this context broken (a fault is sticky):
	 * the daemon starts a fresh launcher; end this one. */
	if (rc == VY_EDEVICE)
		return VY_EDEVICE;
	return sent;
}

/* How long an idle launcher polls before it sleeps: one-launch-per-write
 * work sends the next request within tens of microseconds, and taking it
 * without a wake-up saves more than a launch costs. Bounded, so an idle
 * launcher costs nothing. */
#define SPIN_US 200

typedef vy_err (*op_fn)(launcher *l, vy_msg *m);

static const op_fn ops[] = {
	[VY_OP_HELLO] = op_hello, [VY_OP_LOAD] = op_load, [VY_OP_UNLOAD] = op_unload, [VY_OP_KERNEL] = op_kernel,
	[VY_OP_MAP] = op_map,     [VY_OP_UNMAP] = op_unmap, [VY_OP_RUN] = op_run,
};

/* The daemon gone (killed: its end of the channel closed), a sequence
 * still running here would go on writing files that its successor serves:
 * the launcher ends at once, in the middle of any step, as it would when
 * killed. Polling the channel for its hang-up takes nothing from it. */
static void *watch_daemon(void *arg)
{
	int sock = (int)(intptr_t)arg;
	for (;;) {
		struct pollfd p = {.fd = sock, .events = POLLRDHUP};
		int n = poll(&p, 1, -1);
		if (n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
			_exit(0); /* as the main loop ends when the daemon closes the channel */
		if (n < 0 && errno != EINTR)
			return NULL; /* cannot watch: the channel's end still ends it between messages */
	}
}

int vy_launcher_main(int sock)
{
	/* Nothing of the daemon's but the channel: the mount's /dev/fuse fd
	 * held here would keep a dead mount busy. */
	for (int fd = 3; fd < sock; fd++)
		close(fd);
	if (close_range((unsigned)sock + 1, ~0u, 0) != 0) /* before Linux 5.9: one at a time */
		for (long fd = sock + 1, max = sysconf(_SC_OPEN_MAX); fd < max; fd++)
			close((int)fd);
	/* Killable again: the daemon is exempt from the OOM killer (its
	 * files' memory is not freed by its death: daemon/oom.h), not the
	 * process that runs users' kernels. */
	FILE *adj = fopen("/proc/self/oom_score_adj", "we");
	bool ordinary = adj && fputs("0", adj) >= 0;
	if (adj && fclose(adj) != 0)
		ordinary = false;
	if (!ordinary)
		fprintf(stderr, "vyrefs launcher: cannot set oom_score_adj to 0 (Fix: check /proc)\n");
	launcher l = {.ch = {.sock = sock, .mb_fd = -1}};
	vy_u64map_init(&l.maps);
	pthread_t watcher;
	int err = pthread_create(&watcher, NULL, watch_daemon, (void *)(intptr_t)sock);
	if (err == 0)
		pthread_detach(watcher);
	else
		fprintf(stderr, "vyrefs launcher: cannot watch the daemon (%s): a sequence runs on past its death\n",
			strerror(err));
	int status = 0;
	for (;;) {
		vy_msg m;
		vy_error e;
		vy_err rc = vy_chan_recv(&l.ch, -1, SPIN_US, &m, &e);
		if (rc != VY_OK)
			break; /* the daemon closed the channel: done */
		uint16_t op = m.h.opcode;
		op_fn fn = op < sizeof(ops) / sizeof(ops[0]) ? ops[op] : NULL;
		if (!fn || (op != VY_OP_HELLO && !l.dev)) {
			fprintf(stderr, "vyrefs launcher: unexpected opcode %u; closing the channel\n", op);
			vy_msg_free(&m);
			status = 2;
			break;
		}
		rc = fn(&l, &m);
		vy_msg_free(&m);
		if (rc != VY_OK && op != VY_OP_HELLO) {
			status = rc == VY_EDEVICE ? 1 : 2;
			break;
		}
		if (rc != VY_OK) {
			status = 1;
			break;
		}
	}
	uint64_t key;
	void *value;
	size_t cursor = 0;
	while (vy_u64map_next(&l.maps, &cursor, &key, &value)) {
		mapping *mp = value;
		vy_span_release(l.dev, &mp->span, NULL);
		free(mp);
	}
	vy_u64map_destroy(&l.maps);
	vy_runner_close(l.runner);
	vy_device_close(l.dev);
	vy_chan_close(&l.ch);
	return status;
}
