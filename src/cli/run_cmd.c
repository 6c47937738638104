/* run_cmd.c -- placeholder for the launcher until the agent lands. */
#include <stdio.h>

#include "cli/cli.h"

int cli_run_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "elrun: the launcher is not built yet; "
                    "try 'elrun store --listen 127.0.0.1:0'\n");
    return 2;
}
