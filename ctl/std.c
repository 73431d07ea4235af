/* kernels/std.cu in the binary: the assembler includes the file's bytes
 * (the Makefile makes this object depend on it) and a NUL after them. */
#include "ctl/std.h"

__asm__(".section .rodata\n"
	".global vy_std_source\n"
	".type vy_std_source, @object\n"
	"vy_std_source:\n"
	".incbin \"kernels/std.cu\"\n"
	".byte 0\n"
	".size vy_std_source, . - vy_std_source\n"
	".previous\n");
