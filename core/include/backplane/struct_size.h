/*
 * BP_STRUCT_SIZE: the struct_size of an older version of a struct, for the
 * plugin ABI (plugin.h) and for the core's checks of the embedding C API
 * (backplane.h), whose structs grow only at their end.
 *
 * Compiles as C11 and C++.
 */
#ifndef BACKPLANE_STRUCT_SIZE_H
#define BACKPLANE_STRUCT_SIZE_H

#include <stddef.h>

#if defined(__cplusplus)
#define BP_ALIGNOF_(type) alignof(type)
#else
#define BP_ALIGNOF_(type) _Alignof(type)
#endif

/* The struct_size of TYPE in the version whose last field was LAST_FIELD: as
 * PJRT_STRUCT_SIZE, the end of that field, but rounded up to the struct's
 * alignment, since that is what sizeof gave a caller built against that
 * version (and what it still passes; a struct keeps its alignment as it
 * grows: each starts with a size_t, and no later field may need more). */
#define BP_STRUCT_SIZE(type, last_field)                                                                       \
  ((offsetof(type, last_field) + sizeof(((type*)0)->last_field) + BP_ALIGNOF_(type) - 1) / BP_ALIGNOF_(type) * \
   BP_ALIGNOF_(type))

#endif /* BACKPLANE_STRUCT_SIZE_H */
