/* Make docs/vyrefs.8 from docs/vyrefs.8.in: the template on stdin, the page
 * on stdout. A line `.\" @TH@` becomes the title line with this version, and
 * `.\" @SETTINGS@` the settings, from config/options.c's table (the one
 * --help and .vyre/config use). `make man` runs it; cli_test checks that the
 * committed page is what it makes now. */
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

int main(void)
{
	char line[4096];
	int n = 0;
	while (fgets(line, sizeof(line), stdin)) {
		n++;
		size_t len = strlen(line);
		if (len == sizeof(line) - 1 && line[len - 1] != '\n') {
			fprintf(stderr, "man_options: template line %d is too long (Fix: break it)\n", n);
			return 1;
		}
		if (!strcmp(line, ".\\\" @TH@\n"))
			printf(".TH VYREFS 8 \"\" \"vyrefs %s\" \"System Administration\"\n", VY_VERSION);
		else if (!strcmp(line, ".\\\" @SETTINGS@\n"))
			settings();
		else
			fputs(line, stdout);
	}
	if (ferror(stdin) || fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "man_options: cannot read the template or write the page (Fix: check the paths)\n");
		return 1;
	}
	return 0;
}
