#ifndef VY_VERSION_H
#define VY_VERSION_H
#define VY_VERSION "0.1.0"
#endif
