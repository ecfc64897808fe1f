#include "cli/cli.h"
int sqz_cmd_inspect(int argc, char **argv) { (void)argc; (void)argv; return 1; }
void sqz_cmd_inspect_usage(FILE *out) { (void)out; }
