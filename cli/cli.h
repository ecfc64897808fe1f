/* cli/cli.h - the subcommand table and helpers the subcommands share. */
#ifndef SQZ_CLI_H
#define SQZ_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "sqz/sqz.h"

typedef struct sqz_cmd {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name; returns the exit status */
    void (*usage)(FILE *out);
} sqz_cmd;

/* Prints "sqz: error: <last error>" (or msg) to stderr and returns 1. */
int sqz_cli_fail(sqz_status s);
/* Prints "sqz <cmd>: <printf message>" to stderr and returns 2 (usage error). */
int sqz_cli_usage_error(const char *cmd, const char *fmt, ...);

int sqz_cmd_inspect(int argc, char **argv);
void sqz_cmd_inspect_usage(FILE *out);
int sqz_cmd_convert(int argc, char **argv);
void sqz_cmd_convert_usage(FILE *out);

#endif
