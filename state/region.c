/* The region's header: create, check and map, INIT, counters, root. */
#include "state/region.h"

#include "core/checked.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef VY_VERSION
#define VY_VERSION "unknown"
#endif

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

static const vy_state_fds no_fds = {-1, {-1, -1}};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

vy_err vy_state_region_create(uint64_t log_bytes, vy_state *s, vy_error *e)
{
	*s = (vy_state){.fds = no_fds};
	uint64_t bytes;
	if (log_bytes < VY_STATE_LOG_MIN || (log_bytes & (log_bytes - 1)) ||
	    !vy_add_u64(VY_STATE_HEADER_BYTES, log_bytes, &bytes) || bytes > (uint64_t)SIZE_MAX / 2)
		return vy_fail(e, VY_EINVAL, "give a power of two of at least 4096 bytes",
			       "state log of %llu bytes", (unsigned long long)log_bytes);
	static const char *const names[] = {"vyrefs-state", "vyrefs-image-a", "vyrefs-image-b"};
	int *fds[] = {&s->fds.region, &s->fds.image[0], &s->fds.image[1]};
	for (int i = 0; i < 3; i++) {
		*fds[i] = memfd_create(names[i], MFD_CLOEXEC | (i == 0 ? MFD_ALLOW_SEALING : 0));
		if (*fds[i] < 0) {
			int err = errno;
			vy_state_region_close(s);
			return vy_fail(e, err == EMFILE || err == ENFILE ? VY_EMFILE : VY_ENOMEM,
				       "raise the open-file limit (ulimit -n) or free memory",
				       "memfd_create for the state region: %s", strerror(err));
		}
	}
	/* Its memory taken now, not at the log's first lap: a write into a
	 * page not yet there costs a fault (one per 9 control writes, 3 µs
	 * each on a VM), and a page the kernel cannot give then would call
	 * its out-of-memory killer mid-change rather than fail the mount. */
	if (ftruncate(s->fds.region, (off_t)bytes) != 0 || fallocate(s->fds.region, 0, 0, (off_t)bytes) != 0 ||
	    fcntl(s->fds.region, F_ADD_SEALS, SEALS) != 0) {
		int err = errno;
		vy_state_region_close(s);
		return vy_fail(e, VY_ENOMEM, "free memory (the state region lives in RAM)",
			       "sizing and sealing the state region (%llu bytes): %s", (unsigned long long)bytes,
			       strerror(err));
	}
	void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, s->fds.region, 0);
	if (m == MAP_FAILED) {
		int err = errno;
		vy_state_region_close(s);
		return vy_fail(e, VY_ENOMEM, "free memory or raise vm.max_map_count",
			       "mapping the state region: %s", strerror(err));
	}
	s->base = m;
	s->bytes = bytes;
	s->hdr = m;
	s->ring = s->base + VY_STATE_HEADER_BYTES;
	s->cap = log_bytes;
	s->mask = log_bytes - 1;
	s->next_seq = 1;
	vy_state_hdr *h = s->hdr; /* a fresh memfd reads as zeros */
	h->format = VY_STATE_FORMAT;
	h->header_bytes = VY_STATE_HEADER_BYTES;
	h->region_bytes = bytes;
	h->log_offset = VY_STATE_HEADER_BYTES;
	h->log_bytes = log_bytes;
	snprintf(h->version, sizeof(h->version), "%s", VY_VERSION);
	/* The magic last: a region is one only when all of it is. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, VY_STATE_MAGIC, 8);
	return VY_OK;
}

void vy_state_region_claim(vy_state *s)
{
	char version[VY_STATE_VERSION_MAX] = {0};
	snprintf(version, sizeof(version), "%s", VY_VERSION);
	vy_state_put(s, s->hdr->version, version, sizeof(version));
	uint32_t format = VY_STATE_FORMAT;
	vy_state_put(s, &s->hdr->format, &format, sizeof(format));
}

void vy_state_region_close(vy_state *s)
{
	if (s->base)
		munmap(s->base, s->bytes);
	s->base = NULL;
	close_fd(&s->fds.region);
	close_fd(&s->fds.image[0]);
	close_fd(&s->fds.image[1]);
}

/* The version string at offset 40 (every format keeps it there), made
 * printable: it came from another binary. */
static void version_at(const char *raw, char out[VY_STATE_VERSION_MAX])
{
	size_t i = 0;
	for (; i + 1 < VY_STATE_VERSION_MAX && raw[i]; i++)
		out[i] = raw[i] >= 0x20 && raw[i] < 0x7f ? raw[i] : '?';
	out[i] = 0;
}

void vy_state_writer_version(const vy_state *s, char out[VY_STATE_VERSION_MAX])
{
	version_at(s->hdr->version, out);
}

/* Read the first bytes of the header (magic, format, version) without
 * mapping: a refused region is never written to, not even by a mapping. */
static vy_err check_format(int fd, uint64_t size, vy_error *e)
{
	char head[offsetof(vy_state_hdr, version) + VY_STATE_VERSION_MAX];
	if (size < sizeof(head) || pread(fd, head, sizeof(head), 0) != (ssize_t)sizeof(head))
		return vy_fail(e, VY_EINVAL, "hand the daemon the region vyrefs made (keeper slot 1)",
			       "the state region is %llu bytes, too small for a header", (unsigned long long)size);
	if (memcmp(head, VY_STATE_MAGIC, 8))
		return vy_fail(e, VY_EINVAL, "hand the daemon the region vyrefs made (keeper slot 1)",
			       "not a vyrefs state region (no VYRSTATE magic)");
	uint32_t format;
	memcpy(&format, head + offsetof(vy_state_hdr, format), sizeof(format));
	if (format < VY_STATE_FORMAT_MIN || format > VY_STATE_FORMAT) {
		char ver[VY_STATE_VERSION_MAX];
		version_at(head + offsetof(vy_state_hdr, version), ver);
		return vy_fail(e, VY_ENOTSUP, "the old binary serves on; install a matching vyrefs to upgrade",
			       "state format %u from vyrefs %s; this binary reads %u..%u", format,
			       ver[0] ? ver : "(unnamed)", VY_STATE_FORMAT_MIN, VY_STATE_FORMAT);
	}
	return VY_OK;
}

/* What the mapped header says, each field read once and then checked:
 * the ring's bounds come from these copies, never from the header again. */
typedef struct hdr_view {
	uint64_t log_offset, log_bytes, head, tail;
} hdr_view;

static vy_err check_header(const vy_state_hdr *h, uint64_t size, hdr_view *v, vy_error *e)
{
	const char *fix = "the region is damaged; unmount and mount again (its files are lost)";
	uint32_t hb = h->header_bytes;
	uint64_t rb = h->region_bytes, lo = h->log_offset, lb = h->log_bytes;
	if (hb != VY_STATE_HEADER_BYTES || rb != size)
		return vy_fail(e, VY_EINVAL, fix, "state header says %u header bytes and a %llu-byte region; it has %llu",
			       hb, (unsigned long long)rb, (unsigned long long)size);
	if (lo < hb || lo % 8 || lb < VY_STATE_LOG_MIN || (lb & (lb - 1)) || !vy_range_within(lo, lb, rb))
		return vy_fail(e, VY_EINVAL, fix, "state log at %llu, %llu bytes, outside the %llu-byte region",
			       (unsigned long long)lo, (unsigned long long)lb, (unsigned long long)rb);
	uint64_t head = vy_state_load_u64(&h->log_head), tail = vy_state_load_u64(&h->log_tail);
	if (head > tail || tail - head > lb || head % 8 || tail % 8)
		return vy_fail(e, VY_EINVAL, fix, "state log head %llu and tail %llu do not fit its %llu bytes",
			       (unsigned long long)head, (unsigned long long)tail, (unsigned long long)lb);
	*v = (hdr_view){lo, lb, head, tail};
	return VY_OK;
}

vy_err vy_state_region_open(const vy_state_fds *fds, vy_state *s, vy_error *e)
{
	*s = (vy_state){.fds = no_fds};
	struct stat st;
	if (fstat(fds->region, &st) != 0 || !S_ISREG(st.st_mode))
		return vy_fail(e, VY_EINVAL, "hand the daemon the region vyrefs made (keeper slot 1)",
			       "the state region fd %d is not a memfd", fds->region);
	for (int i = 0; i < 2; i++) {
		struct stat ist;
		if (fstat(fds->image[i], &ist) != 0 || !S_ISREG(ist.st_mode))
			return vy_fail(e, VY_EINVAL, "hand the daemon the images vyrefs made (keeper slots)",
				       "the state image %c fd %d is not a memfd", 'A' + i, fds->image[i]);
	}
	uint64_t size = (uint64_t)st.st_size;
	vy_err rc = check_format(fds->region, size, e);
	if (rc)
		return rc;
	/* Sealed against shrinking: no fault through the mapping, ever. */
	int seals = fcntl(fds->region, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) || size > (uint64_t)SIZE_MAX / 2)
		return vy_fail(e, VY_EINVAL, "hand the daemon the region vyrefs made (keeper slot 1)",
			       "the state region is not sealed against shrinking");
	if (size < VY_STATE_HEADER_BYTES)
		return vy_fail(e, VY_EINVAL, "the region is damaged; unmount and mount again (its files are lost)",
			       "the state region is %llu bytes, its header %u", (unsigned long long)size,
			       VY_STATE_HEADER_BYTES);
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fds->region, 0);
	if (m == MAP_FAILED)
		return vy_fail(e, VY_ENOMEM, "free memory or raise vm.max_map_count", "mapping the state region: %s",
			       strerror(errno));
	hdr_view v = {0};
	rc = check_header(m, size, &v, e);
	if (rc) {
		munmap(m, size);
		return rc;
	}
	s->fds = *fds;
	s->base = m;
	s->bytes = size;
	s->hdr = m;
	s->ring = s->base + v.log_offset;
	s->cap = v.log_bytes;
	s->mask = v.log_bytes - 1;
	s->head = v.head;
	s->tail = v.tail;
	return VY_OK;
}

vy_err vy_state_set_init(vy_state *s, const void *req, uint32_t req_len, const void *reply, uint32_t reply_len,
			 vy_error *e)
{
	if (req_len == 0 || req_len > VY_STATE_INIT_MAX || reply_len == 0 || reply_len > VY_STATE_INIT_MAX)
		return vy_fail(e, VY_EINVAL, "pass the INIT request and reply as read and written",
			       "INIT of %u and %u bytes (each 1..%u)", req_len, reply_len, VY_STATE_INIT_MAX);
	vy_state_put(s, s->hdr->init_req, req, req_len);
	vy_state_put(s, s->hdr->init_reply, reply, reply_len);
	vy_state_store(s, &s->hdr->init_lens, (uint64_t)req_len | (uint64_t)reply_len << 32);
	return VY_OK;
}

bool vy_state_get_init(const vy_state *s, const uint8_t **req, uint32_t *req_len, const uint8_t **reply,
		       uint32_t *reply_len)
{
	uint64_t lens = vy_state_load_u64(&s->hdr->init_lens);
	uint32_t a = (uint32_t)lens, b = (uint32_t)(lens >> 32);
	if (a == 0 || a > VY_STATE_INIT_MAX || b == 0 || b > VY_STATE_INIT_MAX)
		return false;
	*req = s->hdr->init_req;
	*req_len = a;
	*reply = s->hdr->init_reply;
	*reply_len = b;
	return true;
}

void vy_state_note_takeover(vy_state *s, uint64_t ms)
{
	__atomic_fetch_add(&s->hdr->takeovers, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&s->hdr->takeover_ms, ms, __ATOMIC_RELAXED);
}

uint64_t vy_state_takeovers(const vy_state *s, uint64_t *last_ms)
{
	if (last_ms)
		*last_ms = __atomic_load_n(&s->hdr->takeover_ms, __ATOMIC_RELAXED);
	return __atomic_load_n(&s->hdr->takeovers, __ATOMIC_RELAXED);
}

void vy_state_mark_broken(vy_state *s)
{
	__atomic_store_n(&s->hdr->broken, 1, __ATOMIC_RELEASE);
}

bool vy_state_broken(const vy_state *s)
{
	return __atomic_load_n(&s->hdr->broken, __ATOMIC_ACQUIRE) != 0;
}

void vy_state_set_counters(vy_state *s, uint64_t slot, uint64_t key)
{
	__atomic_store_n(&s->hdr->counters_slot, 0, __ATOMIC_RELEASE); /* never a slot with another's key */
	__atomic_store_n(&s->hdr->counters_key, key, __ATOMIC_RELEASE);
	__atomic_store_n(&s->hdr->counters_slot, slot, __ATOMIC_RELEASE);
}

uint64_t vy_state_counters(const vy_state *s, uint64_t *key)
{
	uint64_t slot = __atomic_load_n(&s->hdr->counters_slot, __ATOMIC_ACQUIRE);
	*key = __atomic_load_n(&s->hdr->counters_key, __ATOMIC_ACQUIRE);
	return slot;
}

void vy_state_stat_add(vy_state *s, unsigned idx, uint64_t v)
{
	if (idx < VY_STATE_STATS)
		__atomic_fetch_add(&s->hdr->stats[idx], v, __ATOMIC_RELAXED);
}

void vy_state_stat_set(vy_state *s, unsigned idx, uint64_t v)
{
	if (idx < VY_STATE_STATS)
		__atomic_store_n(&s->hdr->stats[idx], v, __ATOMIC_RELAXED);
}

uint64_t vy_state_stat_get(const vy_state *s, unsigned idx)
{
	return idx < VY_STATE_STATS ? __atomic_load_n(&s->hdr->stats[idx], __ATOMIC_RELAXED) : 0;
}

vy_state_root vy_state_root_get(const vy_state *s)
{
	uint64_t v = vy_state_load_u64(&s->hdr->root);
	return (vy_state_root){.set = v & VY_STATE_ROOT_SET, .which = (v & VY_STATE_ROOT_B) ? 1 : 0, .seq = v >> 2};
}

void vy_state_root_store(vy_state *s, vy_state_root r)
{
	uint64_t v = r.seq << 2 | (r.which ? VY_STATE_ROOT_B : 0) | (r.set ? VY_STATE_ROOT_SET : 0);
	vy_state_store(s, &s->hdr->root, v);
}

void vy_state_cut_step(vy_state *s)
{
	if (s->cut->left == 0)
		s->cut->fire(s->cut->ctx);
	s->cut->left--;
}

void vy_state_put_cut(vy_state *s, void *dst, const void *src, size_t n)
{
	uint8_t *d = dst;
	const uint8_t *p = src;
	for (size_t i = 0; i < n; i++) {
		vy_state_cut_step(s);
		__atomic_store_n(&d[i], p[i], __ATOMIC_RELAXED);
	}
}

vy_err vy_state_pwrite(vy_state *s, int fd, const void *src, size_t n, uint64_t off, vy_error *e)
{
	const uint8_t *p = src;
	size_t step = s->cut ? 1 : n; /* under a cut, byte by byte */
	bool stepped = false;
	while (n) {
		size_t k = n < step ? n : step;
		if (s->cut && !stepped)
			vy_state_cut_step(s);
		stepped = true;
		ssize_t w = pwrite(fd, p, k, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		stepped = false;
		if (w <= 0)
			return vy_fail(e, w < 0 && errno == ENOSPC ? VY_ENOSPC : VY_ENOMEM, "free memory (images live in RAM)",
				       "writing a state image: %s", w < 0 ? strerror(errno) : "wrote nothing");
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return VY_OK;
}
