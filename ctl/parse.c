/* Control language: lines -> tokens -> steps in repeat groups. */
#include "ctl/parse.h"
#include "config/size.h"
#include "core/checked.h"
#include "core/grow.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VY_CTL_MAX_ARGS 256
#define MAX_TOKENS (VY_CTL_MAX_ARGS + 8)
#define FIX_STATEMENTS "use launch, fill, clear, copy, repeat or end"
#define USAGE_LAUNCH                                                                                    \
	"launch MODULE.ENTRY grid=X[,Y[,Z]] block=X[,Y[,Z]] [shared=BYTES] [ARG ...], or launch MODULE.ENTRY " \
	"n=COUNT [grid=auto] [ARG ...]"
#define USAGE_FILL "fill PATH BYTE [OFFSET [LENGTH]]"
#define USAGE_COPY "copy SRC DST [SRC_OFFSET DST_OFFSET LENGTH]"

static void step_free(vy_ctl_step *s)
{
	free(s->module);
	free(s->entry);
	free(s->path);
	free(s->path2);
	for (size_t k = 0; k < s->nargs; k++)
		free(s->args[k].path);
	free(s->args);
}

void vy_ctl_plan_free(vy_ctl_plan *p)
{
	for (size_t i = 0; i < p->nsteps; i++)
		step_free(&p->steps[i]);
	free(p->steps);
	free(p->groups);
	memset(p, 0, sizeof(*p));
}

uint64_t vy_ctl_plan_steps(const vy_ctl_plan *p)
{
	uint64_t total = 0, n;
	for (size_t g = 0; g < p->ngroups; g++)
		if (!vy_mul_u64(p->groups[g].times, p->groups[g].count, &n) || !vy_add_u64(total, n, &total))
			return UINT64_MAX;
	return total;
}

/* ---- tokens ----------------------------------------------------------- */

typedef struct line_tokens {
	char *buf; /* the unquoted tokens, NUL-separated */
	char *tok[MAX_TOKENS];
	size_t n;
} line_tokens;

static vy_err lex(const char *line, size_t len, line_tokens *t, vy_error *e)
{
	t->n = 0;
	t->buf = malloc(len + 1);
	if (!t->buf)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot hold a %zu-byte line", len);
	char *w = t->buf;
	size_t i = 0;
	for (;;) {
		while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
			i++;
		if (i == len || line[i] == '#')
			return VY_OK;
		if (t->n == MAX_TOKENS)
			return vy_fail(e, VY_EINVAL, "give a launch at most 256 arguments", "too many tokens on one line");
		t->tok[t->n++] = w;
		while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '#') {
			if (line[i] == '\0')
				return vy_fail(e, VY_EINVAL, "write text, not binary", "a NUL byte in the line");
			if (line[i] != '"') {
				*w++ = line[i++];
				continue;
			}
			for (i++;; i++) { /* a quoted part: blanks and # are plain */
				if (i == len)
					return vy_fail(e, VY_EINVAL, "close the quote with \"", "unterminated quote");
				if (line[i] == '"')
					break;
				if (line[i] == '\\' && i + 1 < len && (line[i + 1] == '"' || line[i + 1] == '\\'))
					i++;
				*w++ = line[i];
			}
			i++;
		}
		*w++ = '\0';
	}
}

/* ---- numbers ---------------------------------------------------------- */

/* Decimal, or 0x hex; false if not a whole number that fits. */
static bool parse_u64(const char *s, uint64_t *out)
{
	if (!isdigit((unsigned char)s[0]))
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10);
	if (errno || *end || end == s)
		return false;
	*out = v;
	return true;
}

/* A byte count: a number, or a size with K/M/G/T. */
static bool parse_bytes(const char *s, uint64_t *out)
{
	return parse_u64(s, out) || vy_size_parse(s, out, NULL) == VY_OK;
}

static bool parse_i64(const char *s, int64_t *out)
{
	bool neg = s[0] == '-';
	uint64_t mag;
	if (!parse_u64(s + (neg || s[0] == '+'), &mag))
		return false;
	if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX)
		return false;
	*out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
	return true;
}

static bool parse_dims(const char *s, unsigned out[3])
{
	out[0] = out[1] = out[2] = 1;
	char copy[96];
	if (strlen(s) >= sizeof(copy))
		return false;
	strcpy(copy, s);
	char *save = NULL, *part;
	int k = 0;
	for (part = strtok_r(copy, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		if (k == 3 || !parse_u64(part, &v) || v == 0 || v > UINT32_MAX)
			return false;
		out[k++] = (unsigned)v;
	}
	return k > 0 && s[strlen(s) - 1] != ',';
}

/* ---- statements ------------------------------------------------------- */

static char *dup_path(const char *s, vy_error *e)
{
	while (*s == '/')
		s++; /* paths are relative to the mount root */
	if (!*s) {
		vy_fail(e, VY_EINVAL, "name a file in the mount", "an empty path");
		return NULL;
	}
	char *p = strdup(s);
	if (!p)
		vy_fail(e, VY_ENOMEM, "free host memory", "cannot copy a path");
	return p;
}

static vy_err parse_scalar(const char *tok, vy_ctl_arg *a, vy_error *e)
{
	const char *colon = strchr(tok, ':');
	size_t tlen = (size_t)(colon - tok);
	const char *v = colon + 1;
	static const char *const types[] = {"u32", "i32", "u64", "i64", "f32", "f64"};
	int type = -1;
	for (int i = 0; i < 6; i++)
		if (tlen == 3 && !strncmp(tok, types[i], 3))
			type = i;
	if (type < 0)
		return vy_fail(e, VY_EINVAL, "use u32:, i32:, u64:, i64:, f32:, f64: or size:", "unknown argument type in '%s'",
			       tok);
	a->kind = VY_ARG_SCALAR;
	a->type = types[type];
	a->size = (type == 0 || type == 1 || type == 4) ? 4 : 8;
	uint64_t u;
	int64_t i;
	char *end;
	bool ok = false;
	errno = 0;
	switch (type) {
	case 0:
		ok = parse_u64(v, &u) && u <= UINT32_MAX;
		if (ok) {
			uint32_t x = (uint32_t)u;
			memcpy(a->value, &x, 4);
		}
		break;
	case 1:
		ok = parse_i64(v, &i) && i >= INT32_MIN && i <= INT32_MAX;
		if (ok) {
			int32_t x = (int32_t)i;
			memcpy(a->value, &x, 4);
		}
		break;
	case 2:
		ok = parse_u64(v, &u);
		if (ok)
			memcpy(a->value, &u, 8);
		break;
	case 3:
		ok = parse_i64(v, &i);
		if (ok)
			memcpy(a->value, &i, 8);
		break;
	case 4: {
		float f = strtof(v, &end);
		ok = *v && !*end && !(errno == ERANGE && isinf(f));
		if (ok)
			memcpy(a->value, &f, 4);
		break;
	}
	case 5: {
		double d = strtod(v, &end);
		ok = *v && !*end && !(errno == ERANGE && isinf(d));
		if (ok)
			memcpy(a->value, &d, 8);
		break;
	}
	}
	if (!ok)
		return vy_fail(e, VY_EINVAL, "write a number that fits the type, e.g. u32:16777216 or f32:2.5",
			       "bad number '%s' for %s", v, a->type);
	return VY_OK;
}

static vy_err parse_arg(const char *tok, vy_ctl_arg *a, vy_error *e)
{
	memset(a, 0, sizeof(*a));
	if (!strncmp(tok, "size:", 5)) {
		a->kind = VY_ARG_SIZE;
		a->type = "size";
		a->size = 8;
		a->path = dup_path(tok + 5, e);
		return a->path ? VY_OK : e->code;
	}
	const char *colon = strchr(tok, ':');
	if (colon && colon - tok == 3)
		return parse_scalar(tok, a, e);
	a->kind = VY_ARG_BUFFER;
	a->type = "buffer";
	a->size = 8;
	const char *plus = strrchr(tok, '+');
	if (plus && plus != tok && parse_bytes(plus + 1, &a->offset)) {
		char *p = strndup(tok, (size_t)(plus - tok));
		a->path = p ? dup_path(p, e) : NULL;
		free(p);
	} else {
		a->path = dup_path(tok, e);
	}
	return a->path ? VY_OK : (e->code ? e->code : VY_ENOMEM);
}

static vy_err parse_launch(line_tokens *t, vy_ctl_step *s, vy_error *e)
{
	if (t->n < 2)
		return vy_fail(e, VY_EINVAL, "write " USAGE_LAUNCH, "launch needs a MODULE.ENTRY");
	const char *dot = strchr(t->tok[1], '.');
	if (!dot || dot == t->tok[1] || !dot[1])
		return vy_fail(e, VY_EINVAL, "name the kernel as MODULE.ENTRY, e.g. saxpy.saxpy",
			       "'%s' is not MODULE.ENTRY", t->tok[1]);
	s->module = strndup(t->tok[1], (size_t)(dot - t->tok[1]));
	s->entry = strdup(dot + 1);
	s->args = calloc(t->n, sizeof(*s->args));
	if (!s->module || !s->entry || !s->args)
		return vy_fail(e, VY_ENOMEM, "free host memory", "cannot hold a launch");
	bool grid = false, block = false, shared = false;
	for (size_t i = 2; i < t->n; i++) {
		const char *tok = t->tok[i];
		if (!strcmp(tok, "grid=auto")) {
			s->grid_auto = true;
		} else if (!strncmp(tok, "n=", 2)) {
			if (!parse_bytes(tok + 2, &s->count) || s->count == 0)
				return vy_fail(e, VY_EINVAL, "write n=COUNT, the elements the kernel runs over (1 or more; K/M/G allowed)",
					       "bad n '%s'", tok + 2);
			s->has_count = true;
		} else if (!strncmp(tok, "grid=", 5)) {
			if (!parse_dims(tok + 5, s->grid))
				return vy_fail(e, VY_EINVAL, "write grid=X[,Y[,Z]] with whole numbers from 1",
					       "bad grid '%s'", tok + 5);
			grid = true;
		} else if (!strncmp(tok, "block=", 6)) {
			if (!parse_dims(tok + 6, s->block))
				return vy_fail(e, VY_EINVAL, "write block=X[,Y[,Z]] with whole numbers from 1",
					       "bad block '%s'", tok + 6);
			block = true;
		} else if (!strncmp(tok, "shared=", 7)) {
			uint64_t v;
			if (!parse_bytes(tok + 7, &v) || v > UINT32_MAX)
				return vy_fail(e, VY_EINVAL, "write shared=BYTES, e.g. shared=4096", "bad shared '%s'",
					       tok + 7);
			s->shared = (uint32_t)v;
			shared = true;
		} else {
			if (s->nargs == VY_CTL_MAX_ARGS)
				return vy_fail(e, VY_EINVAL, "pass at most 256 arguments", "too many kernel arguments");
			vy_err rc = parse_arg(tok, &s->args[s->nargs], e);
			if (rc != VY_OK)
				return rc;
			s->nargs++;
		}
	}
	if (s->has_count) {
		/* vyrefs chooses both, or the user does: never half of each. */
		if (grid || block)
			return vy_fail(e, VY_EINVAL, "give either n=COUNT (vyrefs chooses grid and block) or grid= and block=",
				       "n= with %s", grid ? "grid=" : "block=");
		if (shared)
			return vy_fail(e, VY_EINVAL,
				       "give grid= and block= for a kernel that takes dynamic shared memory",
				       "n= with shared=: the occupancy choice assumes no dynamic shared memory");
		return VY_OK;
	}
	if (s->grid_auto)
		return vy_fail(e, VY_EINVAL, "write n=COUNT grid=auto, or give grid= a number",
			       "grid=auto needs n=COUNT");
	if (!grid || !block)
		return vy_fail(e, VY_EINVAL, "write " USAGE_LAUNCH, "launch needs grid= and block=, or n=COUNT");
	return VY_OK;
}

static vy_err parse_fill(line_tokens *t, vy_ctl_step *s, bool clear, vy_error *e)
{
	if (clear ? t->n != 2 : (t->n < 3 || t->n > 5))
		return vy_fail(e, VY_EINVAL, clear ? "write clear PATH" : "write " USAGE_FILL, "%s takes %s", t->tok[0],
			       clear ? "one path" : "a path, a byte, and an optional offset and length");
	s->path = dup_path(t->tok[1], e);
	if (!s->path)
		return e->code;
	if (!clear) {
		uint64_t b;
		if (!parse_u64(t->tok[2], &b) || b > 255)
			return vy_fail(e, VY_EINVAL, "give a byte value from 0 to 255 (or 0x00 to 0xff)",
				       "bad byte '%s'", t->tok[2]);
		s->byte = (uint8_t)b;
	}
	if (t->n > 3 && !(s->has_offset = parse_bytes(t->tok[3], &s->offset)))
		return vy_fail(e, VY_EINVAL, "give the offset in bytes", "bad offset '%s'", t->tok[3]);
	if (t->n > 4 && !(s->has_length = parse_bytes(t->tok[4], &s->length)))
		return vy_fail(e, VY_EINVAL, "give the length in bytes", "bad length '%s'", t->tok[4]);
	return VY_OK;
}

static vy_err parse_copy(line_tokens *t, vy_ctl_step *s, vy_error *e)
{
	if (t->n != 3 && t->n != 6)
		return vy_fail(e, VY_EINVAL, "write " USAGE_COPY, "copy takes two paths, or two paths and three numbers");
	s->path = dup_path(t->tok[1], e);
	s->path2 = s->path ? dup_path(t->tok[2], e) : NULL;
	if (!s->path2)
		return e->code;
	if (t->n == 6) {
		if (!parse_bytes(t->tok[3], &s->offset) || !parse_bytes(t->tok[4], &s->offset2) ||
		    !parse_bytes(t->tok[5], &s->length))
			return vy_fail(e, VY_EINVAL, "give SRC_OFFSET DST_OFFSET LENGTH in bytes", "bad number in '%s %s %s'",
				       t->tok[3], t->tok[4], t->tok[5]);
		s->has_offset = s->has_length = true;
	}
	return VY_OK;
}


vy_err vy_ctl_parse(const char *text, size_t len, int first_line, vy_ctl_plan *out, size_t *consumed,
		    vy_ctl_error *err)
{
	memset(out, 0, sizeof(*out));
	*consumed = 0;
	err->line = first_line;
	vy_error *e = &err->e;
	vy_error_clear(e);
	size_t pos = 0, committed = 0;
	int line = first_line;
	bool in_repeat = false;
	vy_err rc = VY_OK;
	for (; pos < len; line++) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		if (!nl)
			break; /* a partial line waits */
		size_t end = (size_t)(nl - text) + 1;
		line_tokens t;
		err->line = line;
		rc = lex(text + pos, end - 1 - pos, &t, e);
		pos = end;
		if (rc == VY_OK && t.n == 0) {
			free(t.buf);
			if (!in_repeat)
				committed = pos;
			continue;
		}
		const char *stmt = rc == VY_OK ? t.tok[0] : "";
		if (rc != VY_OK) {
			/* lex set the error */
		} else if (!strcmp(stmt, "repeat")) {
			uint64_t n;
			if (in_repeat)
				rc = vy_fail(e, VY_EINVAL, "close the first repeat with end before another",
					     "repeat inside repeat");
			else if (t.n != 2 || !parse_u64(t.tok[1], &n))
				rc = vy_fail(e, VY_EINVAL, "write repeat N, N a whole number", "bad repeat");
			else if (!vy_grow((void **)&out->groups, &out->cap_groups, out->ngroups, sizeof(*out->groups)))
				rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot hold a repeat");
			else {
				out->groups[out->ngroups++] = (vy_ctl_group){.times = n, .first = out->nsteps, .line = line};
				in_repeat = true;
			}
		} else if (!strcmp(stmt, "end")) {
			if (!in_repeat)
				rc = vy_fail(e, VY_EINVAL, "start the block with repeat N", "end without repeat");
			else if (t.n != 1)
				rc = vy_fail(e, VY_EINVAL, "write end alone on its line", "end takes nothing");
			else {
				vy_ctl_group *g = &out->groups[out->ngroups - 1];
				g->count = out->nsteps - g->first;
				in_repeat = false;
				committed = pos;
			}
		} else if (!strcmp(stmt, "launch") || !strcmp(stmt, "fill") || !strcmp(stmt, "clear") ||
			   !strcmp(stmt, "copy")) {
			if (!vy_grow((void **)&out->steps, &out->cap_steps, out->nsteps, sizeof(*out->steps)) ||
			    (!in_repeat &&
			     !vy_grow((void **)&out->groups, &out->cap_groups, out->ngroups, sizeof(*out->groups)))) {
				rc = vy_fail(e, VY_ENOMEM, "free host memory", "cannot hold the sequence");
			} else {
				vy_ctl_step *s = &out->steps[out->nsteps++];
				memset(s, 0, sizeof(*s));
				s->line = line;
				if (stmt[0] == 'l') {
					s->kind = VY_STEP_LAUNCH;
					rc = parse_launch(&t, s, e);
				} else if (stmt[0] == 'c' && stmt[1] == 'o') {
					s->kind = VY_STEP_COPY;
					rc = parse_copy(&t, s, e);
				} else {
					s->kind = VY_STEP_FILL;
					rc = parse_fill(&t, s, stmt[0] == 'c', e);
				}
				if (rc == VY_OK && !in_repeat) {
					out->groups[out->ngroups++] =
						(vy_ctl_group){.times = 1, .first = out->nsteps - 1, .count = 1, .line = line};
					committed = pos;
				}
			}
		} else {
			rc = vy_fail(e, VY_EINVAL, FIX_STATEMENTS, "unknown statement '%s'", stmt);
		}
		free(t.buf);
		if (rc != VY_OK) {
			vy_ctl_plan_free(out);
			*consumed = len; /* a refused sequence discards what was pending */
			return rc;
		}
	}
	if (in_repeat) { /* the open block waits for its end */
		vy_ctl_group *g = &out->groups[--out->ngroups];
		while (out->nsteps > g->first)
			step_free(&out->steps[--out->nsteps]);
	}
	*consumed = committed;
	return VY_OK;
}

vy_err vy_ctl_parse_leftover(const char *text, size_t len, int first_line, vy_ctl_error *err)
{
	vy_ctl_plan plan;
	size_t used;
	vy_err rc = vy_ctl_parse(text, len, first_line, &plan, &used, err);
	vy_ctl_plan_free(&plan);
	if (rc != VY_OK)
		return rc;
	/* What parse left: blanks and comments only, or an error. */
	for (size_t i = used; i < len; i++) {
		if (text[i] == '#') {
			while (i < len && text[i] != '\n')
				i++;
			continue;
		}
		if (!isspace((unsigned char)text[i])) {
			err->line = first_line;
			for (size_t k = 0; k < i; k++)
				err->line += text[k] == '\n';
			return vy_fail(&err->e, VY_EINVAL, "end every statement with a newline, and every repeat with end",
				       "the sequence was left unfinished at close");
		}
	}
	return VY_OK;
}
