/* The settings, documented once: each key's values, its default and what
 * it does. `vyrefs --help`, `.vyre/config` (the key order and the comment
 * for a setting left to its computed default), the unknown-key message and
 * the man page's SETTINGS section (tools/man_options.c) are all made from
 * this table, so they cannot drift; vy_config_set must take every key here
 * but `config` (test_config checks), and cli_test checks the man page. */
#ifndef VY_CONFIG_OPTIONS_H
#define VY_CONFIG_OPTIONS_H

#include <stddef.h>

typedef struct vy_option_doc {
	const char *key;
	const char *values;  /* the value's form, as --help writes it */
	const char *dflt;    /* the default, in words where it is computed */
	const char *help;    /* one or two sentences, no trailing period */
} vy_option_doc;

/* In the order --help, .vyre/config and the man page give them. */
extern const vy_option_doc vy_options[];
extern const size_t vy_options_count;

/* The entry for `key`, or NULL. */
const vy_option_doc *vy_option_find(const char *key);

#endif
