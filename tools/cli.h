/* cli.h — the sjkvarn command-line tool: one file per subcommand (tools/cmd_*.c), each
 * exporting an entry point listed in the table of tools/main.c. Diagnostics go to
 * stderr, results to stdout; entry points return the process exit status. */
#ifndef SJK_CLI_H
#define SJK_CLI_H

typedef int (*sjk_cli_fn)(int argc, char **argv);

typedef struct sjk_cli_cmd {
    const char *name;    /* "bench", "run", ... */
    const char *summary; /* one line for `sjkvarn help` */
    sjk_cli_fn fn;       /* argv[0] is the subcommand name */
} sjk_cli_cmd;

int sjk_cmd_bench(int argc, char **argv);
int sjk_cmd_eval(int argc, char **argv);
int sjk_cmd_inspect(int argc, char **argv);
int sjk_cmd_plan(int argc, char **argv);
int sjk_cmd_run(int argc, char **argv);
int sjk_cmd_serve(int argc, char **argv);
int sjk_cmd_train(int argc, char **argv);
int sjk_cmd_capture(int argc, char **argv);
/* `plan --make-quality-floor MODEL@CTX=STUDY.csv ...` (tools/floor_gen.c); argv holds the pairs. */
int sjk_plan_make_quality_floor(int argc, char **argv);

#endif
