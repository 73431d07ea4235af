/* The standard module `std`: CUDA C kept in kernels/std.cu and built into
 * the binary, so an installed vyrefs needs no file of its own to find it.
 * It is compiled (NVRTC, cached like any .cu) and loaded the first time a
 * sequence names std.KERNEL; docs/ctl.md lists its kernels. */
#ifndef VY_STD_H
#define VY_STD_H

#define VY_STD_NAME "std"

/* kernels/std.cu, NUL-terminated. */
extern const char vy_std_source[];

#endif
