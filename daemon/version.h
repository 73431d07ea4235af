#ifndef VY_VERSION_H
#define VY_VERSION_H
/* One version for the binary, the library and the Python module: the
 * top-level file VERSION, which the Makefile passes as VY_VERSION
 * (client/python reads the same number; cli_test checks they agree). */
#ifndef VY_VERSION
#error "VY_VERSION comes from the file VERSION: build with make"
#endif
#endif
