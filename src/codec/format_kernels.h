/* format_kernels.h — the dispatch of the value formats' hot kernels: the table chosen once
 * per process, and the scalar references. The table's entries and their tolerances are in
 * format_kernels_table.h, the leaf that the instruction-set files (format_kernels_avx2.c,
 * format_kernels_avx512.c) implement. */
#ifndef SJK_FORMAT_KERNELS_H
#define SJK_FORMAT_KERNELS_H

#include "codec/format_kernels_table.h"

/* The dispatched table (initialised once, thread-safely). */
const sjk_fmt_kernels *sjk_fmt_kernels_get(void);
/* The scalar references. */
const sjk_fmt_kernels *sjk_fmt_kernels_ref(void);

#endif
