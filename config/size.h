/* Sizes as users write them: "4096", "64K", "1.5G" is refused (whole numbers
 * only), "512M", "2T"; K/M/G/T are powers of 1024, with an optional "iB" or
 * "B" ("64KiB", "64KB"). */
#ifndef VY_SIZE_H
#define VY_SIZE_H

#include <stdint.h>

#include "core/err.h"

vy_err vy_size_parse(const char *text, uint64_t *out, vy_error *e);

/* "1.5 GiB"-style rendering for messages. */
void vy_size_format(uint64_t bytes, char *buf, unsigned long cap);

#endif
