/* A minimal test harness for C11 test programs: cases, checks, and a
 * doctest-style summary line that scripts/test_summary.py counts. */
#ifndef BACKPLANE_TESTS_C_TEST_H
#define BACKPLANE_TESTS_C_TEST_H

#include <stdio.h>
#include <string.h>

static int c_test_failed_checks;
static int c_test_cases_run;
static int c_test_cases_failed;

#define CHECK(condition)                                                            \
  do {                                                                              \
    if (!(condition)) {                                                             \
      ++c_test_failed_checks;                                                       \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
    }                                                                               \
  } while (0)

/* Checks that `text` contains `part`, printing both when it does not. */
#define CHECK_CONTAINS(text, part)                                                      \
  do {                                                                                  \
    const char* c_test_text = (text);                                                   \
    if (c_test_text == NULL || strstr(c_test_text, (part)) == NULL) {                   \
      ++c_test_failed_checks;                                                           \
      fprintf(stderr, "%s:%d: expected \"%s\" to contain \"%s\"\n", __FILE__, __LINE__, \
              c_test_text ? c_test_text : "(null)", (part));                            \
    }                                                                                   \
  } while (0)

static void c_test_run(const char* name, void (*test)(void)) {
  int before = c_test_failed_checks;
  ++c_test_cases_run;
  test();
  if (c_test_failed_checks != before) {
    ++c_test_cases_failed;
    fprintf(stderr, "FAILED: %s\n", name);
  }
}

#define RUN(test) c_test_run(#test, test)

static int c_test_summary(void) {
  printf("[doctest] test cases: %d | %d passed | %d failed | 0 skipped\n", c_test_cases_run,
         c_test_cases_run - c_test_cases_failed, c_test_cases_failed);
  return c_test_cases_failed == 0 ? 0 : 1;
}

#endif
