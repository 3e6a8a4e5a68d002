/* hadamard.h — internal entry points of the Walsh–Hadamard transform. */
#ifndef SJK_HADAMARD_H
#define SJK_HADAMARD_H
#include <stddef.h>

/* Scalar reference: in-place orthonormal WHT of one block of n (power of two) values. */
void sjk_hadamard_block_ref(float *x, size_t n);
/* The dispatched (fastest available) version of the same; equal to the reference within
 * fp32 rounding of a different summation order (tests: 1e-6 relative). */
void sjk_hadamard_block(float *x, size_t n);

#endif
