/* CRC-32C (Castagnoli), the state log's and images' checksum: SSE4.2's
 * crc32 instruction where the CPU has it (asked once, at run time), a
 * table otherwise; both give the same values. state/README.md says why
 * crc32c and not XXH3 (measured by bench/statebench). */
#ifndef VY_STATE_CRC32C_H
#define VY_STATE_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Continue a crc over n more bytes: start with crc 0; crc(a then b) is
 * vy_crc32c(vy_crc32c(0, a), b). */
uint32_t vy_crc32c(uint32_t crc, const void *p, size_t n);

/* Each way on its own (tests and the bench compare them); the hardware one
 * only where vy_crc32c_hw_present(). */
uint32_t vy_crc32c_table(uint32_t crc, const void *p, size_t n);
uint32_t vy_crc32c_hw(uint32_t crc, const void *p, size_t n);
bool vy_crc32c_hw_present(void);

#endif
