#include "test_util.h"
static void test_placeholder(void **state) { (void)state; }
int main(void) { const struct CMUnitTest t[] = {cmocka_unit_test(test_placeholder)}; return cmocka_run_group_tests(t, NULL, NULL); }
