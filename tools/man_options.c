/* Make docs/vyrefs.8 from docs/vyrefs.8.in: the template on stdin, the page
 * on stdout. A line `.\" @TH@` becomes the title line with this version, and
 * `.\" @SETTINGS@` the settings, from config/options.c's table (the one
 * --help and .vyre/config use).
 *
 * With --markdown, the same table for docs/manual.md: the manual on stdin,
 * itself on stdout with the lines between `<!-- @SETTINGS@ -->` and
 * `<!-- @END SETTINGS@ -->` made again as a markdown table (the rest is
 * copied as it is). `make man` runs both; docs_test checks that the
 * committed page and manual are what it makes now. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config/options.h"
#include "daemon/version.h"

/* Text for a roff line: \ as \e, a leading - of a word as \- (an option),
 * and \& before a leading . or ' so no text line is read as a request. */
static void roff_text(const char *s)
{
	if (s[0] == '.' || s[0] == '\'')
		fputs("\\&", stdout);
	for (const char *p = s; *p; p++) {
		if (*p == '\\')
			fputs("\\e", stdout);
		else if (*p == '-' && (p == s || p[-1] == ' ' || p[-1] == '('))
			fputs("\\-", stdout);
		else
			putchar(*p);
	}
}

static void settings(void)
{
	for (size_t i = 0; i < vy_options_count; i++) {
		const vy_option_doc *d = &vy_options[i];
		fputs(".TP\n\\fB", stdout);
		roff_text(d->key);
		fputs("=\\fP\\fI", stdout);
		roff_text(d->values);
		fputs("\\fP\n", stdout);
		roff_text(d->help);
		fputs(".\nDefault: ", stdout);
		roff_text(d->dflt);
		fputs(".\n", stdout);
	}
}

/* Text for a markdown table cell: | as \| (also inside `code`, as GitHub
 * reads tables), < as &lt; so nothing is read as HTML. */
static void md_text(const char *s)
{
	for (const char *p = s; *p; p++) {
		if (*p == '|')
			fputs("\\|", stdout);
		else if (*p == '<')
			fputs("&lt;", stdout);
		else
			putchar(*p);
	}
}

static void md_settings(void)
{
	fputs("| key | values | default | what it does |\n| --- | --- | --- | --- |\n", stdout);
	for (size_t i = 0; i < vy_options_count; i++) {
		const vy_option_doc *d = &vy_options[i];
		fputs("| `", stdout);
		md_text(d->key);
		fputs("` | `", stdout);
		md_text(d->values);
		fputs("` | ", stdout);
		md_text(d->dflt);
		fputs(" | ", stdout);
		md_text(d->help);
		fputs(". |\n", stdout);
	}
}

#define MD_BEGIN "<!-- @SETTINGS@ -->"
#define MD_END "<!-- @END SETTINGS@ -->"

int main(int argc, char **argv)
{
	bool markdown = argc == 2 && !strcmp(argv[1], "--markdown");
	if (argc > 1 && !markdown) {
		fprintf(stderr, "usage: man_options [--markdown] <TEMPLATE >PAGE\n");
		return 2;
	}
	char line[4096];
	int n = 0, begun = 0, tables = 0;
	while (fgets(line, sizeof(line), stdin)) {
		n++;
		size_t len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			fprintf(stderr, "man_options: template line %d is too long (Fix: break it)\n", n);
			return 1;
		}
		if (markdown) {
			if (!strcmp(line, MD_BEGIN "\n")) {
				if (begun) {
					fprintf(stderr, "man_options: line %d: a second " MD_BEGIN " before the " MD_END
							" of line %d's (Fix: end the first table)\n",
						n, begun);
					return 1;
				}
				begun = n;
				fputs(line, stdout);
				md_settings();
			} else if (!strcmp(line, MD_END "\n")) {
				if (!begun) {
					fprintf(stderr, "man_options: line %d: " MD_END " with no " MD_BEGIN
							" before it (Fix: put one where the table starts)\n",
						n);
					return 1;
				}
				begun = 0;
				tables++;
				fputs(line, stdout);
			} else if (!begun) {
				fputs(line, stdout);
			}
			continue;
		}
		if (!strcmp(line, ".\\\" @TH@\n"))
			printf(".TH VYREFS 8 \"\" \"vyrefs %s\" \"System Administration\"\n", VY_VERSION);
		else if (!strcmp(line, ".\\\" @SETTINGS@\n"))
			settings();
		else
			fputs(line, stdout);
	}
	if (begun) {
		fprintf(stderr, "man_options: the table begun at line %d has no " MD_END " (Fix: end it)\n", begun);
		return 1;
	}
	if (markdown && tables == 0) {
		fprintf(stderr, "man_options: no line " MD_BEGIN " (Fix: put the lines " MD_BEGIN " and " MD_END
				" where the settings table goes)\n");
		return 1;
	}
	if (ferror(stdin) || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "man_options: cannot read the template or write the page (Fix: check the paths)\n");
		return 1;
	}
	return 0;
}
