// COLO_CHECK: fatal assertion for broken invariants (memory accounting going negative, a job placed
// twice). Never use it for environmental errors; those are Status values.
#pragma once

#include <cstdio>
#include <cstdlib>

#define COLO_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
