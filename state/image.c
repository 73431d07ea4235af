/* Checkpoint images: write, publish, verify and load (state/image.h). */
#include "state/image.h"

#include "core/checked.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define IHDR ((uint64_t)sizeof(vy_state_image_hdr))
#define SHDR ((uint64_t)sizeof(vy_state_section_hdr))
#define IMAGE_FIX "the region is damaged; unmount and mount again (its files are lost)"

static const uint8_t zeros[8];

vy_err vy_state_image_begin(vy_state *s, vy_state_image_writer *w, vy_error *e)
{
	vy_state_root r = vy_state_root_get(s);
	w->s = s;
	w->which = r.set ? !r.which : 0;
	w->bytes = IHDR;
	w->sections = 0;
	w->failed = false;
	if (XXH3_64bits_reset(&w->hash) != XXH_OK) {
		w->failed = true;
		return vy_fail(e, VY_EINTERNAL, "report this", "starting a state image's hash failed");
	}
	/* The inactive image only: the published one is never written. */
	if (ftruncate(s->fds.image[w->which], 0) != 0) {
		w->failed = true;
		return vy_fail(e, VY_ENOMEM, "free memory (images live in RAM)", "emptying state image %c: %s",
			       'A' + w->which, strerror(errno));
	}
	return VY_OK;
}

static vy_err put(vy_state_image_writer *w, const void *p, uint64_t len, vy_error *e)
{
	uint64_t end;
	if (!vy_add_u64(w->bytes, len, &end) || end > (uint64_t)INT64_MAX) {
		w->failed = true;
		return vy_fail(e, VY_EOVERFLOW, "checkpoint less", "a state image past %llu bytes",
			       (unsigned long long)INT64_MAX);
	}
	vy_err rc = vy_state_pwrite(w->s, w->s->fds.image[w->which], p, len, w->bytes, e);
	if (rc) {
		w->failed = true;
		return rc;
	}
	if (XXH3_64bits_update(&w->hash, p, len) != XXH_OK) {
		w->failed = true;
		return vy_fail(e, VY_EINTERNAL, "report this", "hashing a state image failed");
	}
	w->bytes = end;
	return VY_OK;
}

vy_err vy_state_image_add(vy_state_image_writer *w, uint32_t type, const void *p, uint64_t len, vy_error *e)
{
	if (w->failed)
		return vy_fail(e, VY_EINVAL, "begin the checkpoint again", "a state image whose write failed");
	if (w->sections == UINT32_MAX)
		return vy_fail(e, VY_EOVERFLOW, "fewer, larger sections", "a state image of 2^32 sections");
	vy_state_section_hdr h = {.type = type, .len = len};
	vy_err rc = put(w, &h, SHDR, e);
	if (!rc && len)
		rc = put(w, p, len, e);
	if (!rc && len % 8)
		rc = put(w, zeros, 8 - len % 8, e);
	if (!rc)
		w->sections++;
	return rc;
}

/* The header's bytes before the sum, seeded with the body's hash: the
 * body is hashed once, as it is written. */
static uint64_t image_sum(const vy_state_image_hdr *h, uint64_t body_sum)
{
	return XXH3_64bits_withSeed(h, offsetof(vy_state_image_hdr, sum), body_sum);
}

vy_err vy_state_image_publish(vy_state_image_writer *w, vy_error *e)
{
	if (w->failed)
		return vy_fail(e, VY_EINVAL, "begin the checkpoint again", "a state image whose write failed");
	vy_state *s = w->s;
	uint64_t seq = vy_state_log_last_seq(s);
	if (seq > VY_STATE_ROOT_SEQ_MAX)
		return vy_fail(e, VY_EOVERFLOW, "unmount and mount again", "state seq %llu past the root's range",
			       (unsigned long long)seq);
	vy_state_image_hdr h = {.format = VY_STATE_FORMAT, .header_bytes = IHDR, .seq = seq, .bytes = w->bytes,
				.sections = w->sections};
	memcpy(h.magic, VY_STATE_IMAGE_MAGIC, 8);
	h.sum = image_sum(&h, XXH3_64bits_digest(&w->hash));
	vy_err rc = vy_state_pwrite(s, s->fds.image[w->which], &h, IHDR, 0, e);
	if (rc) {
		w->failed = true;
		return rc;
	}
	vy_state_root_store(s, (vy_state_root){.set = true, .which = w->which, .seq = seq}); /* the commit */
	vy_state_log_trim(s);
	return VY_OK;
}

/* The whole image in memory, read once: what is checked is what is used. */
static vy_err read_image(int fd, unsigned which, uint8_t **buf, uint64_t *size, vy_error *e)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return vy_fail(e, VY_EINVAL, IMAGE_FIX, "state image %c: %s", 'A' + which, strerror(errno));
	uint64_t n = (uint64_t)st.st_size;
	if (n < IHDR || n > (uint64_t)SIZE_MAX / 2)
		return vy_fail(e, VY_EINVAL, IMAGE_FIX, "state image %c is %llu bytes", 'A' + which,
			       (unsigned long long)n);
	uint8_t *b = malloc(n);
	if (!b)
		return vy_fail(e, VY_ENOMEM, "free memory", "reading a state image of %llu bytes", (unsigned long long)n);
	for (uint64_t got = 0; got < n;) {
		ssize_t r = pread(fd, b + got, n - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(b);
			return vy_fail(e, VY_EINVAL, IMAGE_FIX, "reading state image %c: %s", 'A' + which,
				       r < 0 ? strerror(errno) : "it shrank");
		}
		got += (uint64_t)r;
	}
	*buf = b;
	*size = n;
	return VY_OK;
}

/* Walk the sections of a verified image: count them (fn NULL) or hand them
 * over. False at the first that does not fit. */
static bool walk(const uint8_t *b, uint64_t bytes, uint32_t sections, vy_state_section_fn fn, void *ctx,
		 vy_err *rc, vy_error *e)
{
	uint64_t pos = IHDR;
	for (uint32_t i = 0; i < sections; i++) {
		vy_state_section_hdr h;
		if (bytes - pos < SHDR)
			return false;
		memcpy(&h, b + pos, SHDR);
		pos += SHDR;
		uint64_t padded = h.len + (8 - h.len % 8) % 8;
		if (h.len > bytes - pos || padded > bytes - pos)
			return false;
		if (fn && (*rc = fn(ctx, h.type, b + pos, h.len, e)) != VY_OK)
			return true;
		pos += padded;
	}
	return pos == bytes;
}

vy_err vy_state_image_load(vy_state_root root, int fd, vy_state_section_fn fn, void *ctx, uint64_t *sections,
			  vy_error *e)
{
	uint8_t *b = NULL;
	uint64_t size = 0;
	vy_err rc = read_image(fd, root.which, &b, &size, e);
	if (rc)
		return rc;
	vy_state_image_hdr h;
	memcpy(&h, b, IHDR);
	char which = (char)('A' + root.which);
	if (memcmp(h.magic, VY_STATE_IMAGE_MAGIC, 8) || h.format < VY_STATE_FORMAT_MIN || h.format > VY_STATE_FORMAT ||
	    h.header_bytes != IHDR || h.bytes < IHDR || h.bytes > size)
		rc = vy_fail(e, VY_EINVAL, IMAGE_FIX, "state image %c: a bad header (format %u, %llu of %llu bytes)",
			     which, h.format, (unsigned long long)h.bytes, (unsigned long long)size);
	else if (h.seq != root.seq)
		rc = vy_fail(e, VY_EINVAL, IMAGE_FIX, "state image %c holds seq %llu, the root names %llu", which,
			     (unsigned long long)h.seq, (unsigned long long)root.seq);
	else if (image_sum(&h, XXH3_64bits(b + IHDR, h.bytes - IHDR)) != h.sum)
		rc = vy_fail(e, VY_EINVAL, IMAGE_FIX, "state image %c (seq %llu) fails its checksum", which,
			     (unsigned long long)h.seq);
	else if (!walk(b, h.bytes, h.sections, NULL, NULL, &rc, e))
		rc = vy_fail(e, VY_EINVAL, IMAGE_FIX, "state image %c: its %u sections do not fit its bytes", which,
			     h.sections);
	if (!rc) {
		walk(b, h.bytes, h.sections, fn, ctx, &rc, e);
		*sections = h.sections;
	}
	free(b);
	return rc;
}

vy_err vy_state_load(vy_state *s, vy_state_section_fn on_section, vy_state_rec_fn on_record, void *ctx,
		     vy_state_loaded *out, vy_error *e)
{
	*out = (vy_state_loaded){.root = vy_state_root_get(s)};
	if (out->root.set) {
		vy_err rc = vy_state_image_load(out->root, s->fds.image[out->root.which], on_section, ctx, &out->sections, e);
		if (rc)
			return rc;
	}
	uint64_t after = out->root.set ? out->root.seq : 0;
	return vy_state_log_scan(s, after, after, on_record, ctx, &out->log, e);
}
