/* The control language's lexer and parser (see DESIGN.md):
 *
 *   launch MODULE.ENTRY grid=X[,Y[,Z]] block=X[,Y[,Z]] [shared=BYTES] [ARG ...]
 *   launch MODULE.ENTRY n=COUNT [grid=auto] [ARG ...]
 *   fill PATH BYTE [OFFSET [LENGTH]]
 *   clear PATH
 *   copy SRC DST [SRC_OFFSET DST_OFFSET LENGTH]
 *   repeat N            ... end
 *
 * One statement a line; `#` starts a comment; tokens are separated by blanks
 * and may be double-quoted (\" and \\ inside). Arguments: PATH, PATH+OFFSET,
 * u32:V i32:V u64:V i64:V f32:V f64:V, size:PATH. Numbers are decimal or 0x
 * hex; sizes, offsets and lengths may carry K/M/G/T. */
#ifndef VY_PARSE_H
#define VY_PARSE_H

#include "core/err.h"
#include "ctl/plan.h"

/* Where a statement went wrong: line (counted from first_line), the token,
 * and the message with its Fix hint. */
typedef struct vy_ctl_error {
	int line;
	vy_error e;
} vy_ctl_error;

/* Parse the complete statements of text[0, len): every whole line, up to the
 * last point outside a repeat block. *consumed says how many bytes that was;
 * the rest (a partial line, an open repeat) waits for more text. On error
 * the plan is freed and *consumed covers through the failing line (or the
 * whole failing repeat block). */
vy_err vy_ctl_parse(const char *text, size_t len, int first_line, vy_ctl_plan *out, size_t *consumed,
		    vy_ctl_error *err);

/* At close: what is left must be only blanks and comments. */
vy_err vy_ctl_parse_leftover(const char *text, size_t len, int first_line, vy_ctl_error *err);

#endif
