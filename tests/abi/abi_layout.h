/* Shared by the C and C++ halves of the ABI layout test. */
#ifndef BACKPLANE_TESTS_ABI_LAYOUT_H
#define BACKPLANE_TESTS_ABI_LAYOUT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct AbiLayoutEntry {
  const char* what; /* "Type" or "Type.field" */
  size_t size;
  size_t offset;
  int is_field;
} AbiLayoutEntry;

const AbiLayoutEntry* abi_layout_from_c(size_t* count);

#ifdef __cplusplus
}
#endif

#endif
