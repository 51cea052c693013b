// tools/cli.h — the one option parser of the `lanework` program. Every subcommand describes
// its options in a table (name, kind, range, default, help); the parser (getopt_long, so
// `--x v` and `--x=v` both work) checks every value against that table and the help text is
// printed from the same table, so a range in the help is the range that is checked.
//
// Errors are written to stderr as `lanework <command>: <what>` followed by a hint to run
// `--help`; they name the option, quote the value and give the allowed range. The parser
// returns LW_CLI_USAGE for them (the process exits 2), LW_CLI_HELP after printing the help on
// stdout (exit 0), LW_CLI_OK otherwise. Thread safety: getopt_long keeps global state, so one
// parse at a time (the program is single-threaded while it parses).
#ifndef LANEWORK_TOOLS_CLI_H_
#define LANEWORK_TOOLS_CLI_H_

#include <stdbool.h>
#include <stdio.h>

typedef enum lw_cli_kind {
  LW_CLI_FLAG,    // no value
  LW_CLI_INT,     // a whole number in min..max
  LW_CLI_NUMBER,  // a finite decimal number (any value; the command checks relations)
  LW_CLI_STRING,  // any text: a path, or a list the command checks itself
  LW_CLI_CHOICE,  // one of the '|'-separated words of choices
} lw_cli_kind_t;

typedef struct lw_cli_opt {
  const char *name;       // long name without the dashes; NULL ends a table
  char short_name;        // 'o' for -o; 0 for none
  lw_cli_kind_t kind;
  long min, max;          // LW_CLI_INT: the allowed range, both ends included
  const char *choices;    // LW_CLI_CHOICE: "sim|opencl"
  const char *metavar;    // the value's name in the help: "N", "DIR"
  const char *def;        // the default as the help prints it; NULL prints none
  const char *help;       // what it does; '\n' starts an indented continuation line
  const char *only_with;  // the backend it applies to ("opencl"); NULL: every backend
  int key;                // the command's own id of the option
} lw_cli_opt_t;

// A parsed value: text as given (NULL for a flag), n for LW_CLI_INT, x for LW_CLI_NUMBER.
typedef struct lw_cli_value {
  const char *text;
  long n;
  double x;
} lw_cli_value_t;

typedef struct lw_cli_cmd {
  const char *name;      // "bench dispatch": the prefix of every message and of the usage line
  const char *synopsis;  // what follows the name in the usage line: "KERNEL.so -o OUT.lwk"
  const char *about;     // a few lines on what the command does (may be NULL)
  const lw_cli_opt_t *opts;  // ended by an entry whose name is NULL; may be NULL (no options)
  int max_positional;    // how many operands the command takes (checked by the parser)
  // Optional: for an option this command does not take, the other commands that do take it
  // ("overlap, cancel"), or NULL; the error then says where the option belongs.
  const char *(*owner_of)(const char *option, char *buf, size_t size);
} lw_cli_cmd_t;

enum { LW_CLI_OK = 0, LW_CLI_HELP = 1, LW_CLI_USAGE = 2 };

// Called once per option in command-line order; returns LW_CLI_OK, or LW_CLI_USAGE after
// naming what was wrong with lw__cli_error.
typedef int (*lw_cli_on_opt_fn)(void *user, const lw_cli_opt_t *opt, const lw_cli_value_t *v);

// Parses argv[1..argc) (argv[0] is the command's own word). --help / -h is taken by every
// command. On LW_CLI_OK, the operands are argv[*first_operand .. argc) (getopt_long moves them
// behind the options).
int lw__cli_parse(const lw_cli_cmd_t *cmd, int argc, char **argv, lw_cli_on_opt_fn on_opt,
                  void *user, int *first_operand);

// The command's help: usage line, about, and one entry per option with its default and range.
void lw__cli_help(const lw_cli_cmd_t *cmd, FILE *f);

// Writes "lanework <cmd>: <message>" and the --help hint on stderr; returns LW_CLI_USAGE (2).
int lw__cli_error(const lw_cli_cmd_t *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// The range or the choices of an option as the help and the errors print them: "1..19",
// "sim|opencl"; "" for a flag or text.
const char *lw__cli_range(const lw_cli_opt_t *opt, char *buf, size_t size);

// The option of table opts with this long name, or NULL.
const lw_cli_opt_t *lw__cli_find(const lw_cli_opt_t *opts, const char *name);

#endif  // LANEWORK_TOOLS_CLI_H_
