// tools/cli.c — the option parser of the `lanework` program (see cli.h).
#include "tools/cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// getopt_long's val of the i-th option of a table: above every char, so short options keep
// their own letter.
#define LONG_VAL_BASE 1000
#define HELP_COLUMN 26
#define HELP_WIDTH 92  // the help wraps the range and default onto a new line past this

const lw_cli_opt_t *lw__cli_find(const lw_cli_opt_t *opts, const char *name) {
  for (const lw_cli_opt_t *o = opts; o && o->name; ++o) {
    if (strcmp(o->name, name) == 0) return o;
  }
  return NULL;
}

static size_t count_opts(const lw_cli_opt_t *opts) {
  size_t n = 0;
  while (opts && opts[n].name) ++n;
  return n;
}

static bool takes_value(const lw_cli_opt_t *o) { return o->kind != LW_CLI_FLAG; }

const char *lw__cli_range(const lw_cli_opt_t *opt, char *buf, size_t size) {
  buf[0] = '\0';
  if (opt->kind == LW_CLI_INT) {
    snprintf(buf, size, "%ld..%ld", opt->min, opt->max);
  } else if (opt->kind == LW_CLI_CHOICE) {
    snprintf(buf, size, "%s", opt->choices);
  }
  return buf;
}

int lw__cli_error(const lw_cli_cmd_t *cmd, const char *fmt, ...) {
  fprintf(stderr, "lanework %s: ", cmd->name);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nrun `lanework %s --help` for its options\n", cmd->name);
  return LW_CLI_USAGE;
}

void lw__cli_help(const lw_cli_cmd_t *cmd, FILE *f) {
  fprintf(f, "usage: lanework %s %s\n", cmd->name, cmd->synopsis ? cmd->synopsis : "[options]");
  if (cmd->about) fprintf(f, "\n%s\n", cmd->about);
  fprintf(f, "\noptions:\n");
  for (const lw_cli_opt_t *o = cmd->opts; o && o->name; ++o) {
    char left[96];
    int n = snprintf(left, sizeof(left), "  %s%c%s--%s%s%s", o->short_name ? "-" : "",
                     o->short_name ? o->short_name : ' ', o->short_name ? ", " : "   ", o->name,
                     takes_value(o) ? " " : "", takes_value(o) ? (o->metavar ? o->metavar : "V")
                                                              : "");
    // A name too long for the column gets the help on a line of its own.
    fprintf(f, "%s%*s", left, n < HELP_COLUMN ? HELP_COLUMN - n : 0, "");
    if (n >= HELP_COLUMN) fprintf(f, "\n%*s", HELP_COLUMN, "");
    int col = HELP_COLUMN;
    for (const char *p = o->help; *p; ++p) {
      if (*p == '\n') {
        fprintf(f, "\n%*s", HELP_COLUMN, "");
        col = HELP_COLUMN;
      } else {
        fputc(*p, f);
        ++col;
      }
    }
    // The range, the default and the backend, from the same fields the parser checks.
    char range[128], paren[256];
    lw__cli_range(o, range, sizeof(range));
    size_t len = 0;
    paren[0] = '\0';
    if (range[0]) len += (size_t)snprintf(paren + len, sizeof(paren) - len, "%s", range);
    if (o->def && len < sizeof(paren)) {
      len += (size_t)snprintf(paren + len, sizeof(paren) - len, "%sdefault %s", len ? ", " : "",
                              o->def);
    }
    if (o->only_with && len < sizeof(paren)) {
      len += (size_t)snprintf(paren + len, sizeof(paren) - len, "%s--backend %s only",
                              len ? ", " : "", o->only_with);
    }
    if (len) {
      if (col + (int)len + 3 > HELP_WIDTH) {
        fprintf(f, "\n%*s(%s)", HELP_COLUMN, "", paren);
      } else {
        fprintf(f, " (%s)", paren);
      }
    }
    fputc('\n', f);
  }
  fprintf(f, "%-*sthis text\n", HELP_COLUMN, "  -h, --help");
}

// Checks the value of o and fills v; names what is wrong and returns LW_CLI_USAGE otherwise.
static int check_value(const lw_cli_cmd_t *cmd, const lw_cli_opt_t *o, const char *text,
                       lw_cli_value_t *v) {
  char range[128];
  lw__cli_range(o, range, sizeof(range));
  *v = (lw_cli_value_t){.text = text};
  switch (o->kind) {
    case LW_CLI_FLAG:
    case LW_CLI_STRING:
      return LW_CLI_OK;
    case LW_CLI_INT: {
      char *end = NULL;
      errno = 0;
      long n = strtol(text, &end, 10);
      if (text[0] == '\0' || *end != '\0') {
        return lw__cli_error(cmd, "--%s \"%s\" is not a number (%s)", o->name, text, range);
      }
      if (errno == ERANGE || n < o->min || n > o->max) {
        return lw__cli_error(cmd, "--%s \"%s\" is out of range (%s)", o->name, text, range);
      }
      v->n = n;
      return LW_CLI_OK;
    }
    case LW_CLI_NUMBER: {
      char *end = NULL;
      errno = 0;
      double x = strtod(text, &end);
      if (text[0] == '\0' || *end != '\0' || errno == ERANGE || !isfinite(x)) {
        return lw__cli_error(cmd, "--%s \"%s\" is not a finite decimal number", o->name, text);
      }
      v->x = x;
      return LW_CLI_OK;
    }
    case LW_CLI_CHOICE: {
      size_t len = strlen(text);
      for (const char *p = o->choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && len > 0 && strncmp(p, text, n) == 0) return LW_CLI_OK;
        if (!bar) break;
        p = bar + 1;
      }
      return lw__cli_error(cmd, "--%s \"%s\" is not one of %s", o->name, text, range);
    }
  }
  return lw__cli_error(cmd, "--%s: option of an unknown kind", o->name);
}

// The error for an option this command does not know: text is the word as given.
static int unknown_option(const lw_cli_cmd_t *cmd, const char *text) {
  if (text[0] == '-' && text[1] == '-') {
    char name[64];
    size_t n = strcspn(text + 2, "=");
    if (n >= sizeof(name)) n = sizeof(name) - 1;
    memcpy(name, text + 2, n);
    name[n] = '\0';
    // getopt_long takes a unique prefix of a name; one that starts two names is refused
    // without telling which.
    char matches[256] = "";
    size_t len = 0, n_matches = 0;
    for (const lw_cli_opt_t *o = cmd->opts; o && o->name; ++o) {
      if (strncmp(o->name, name, strlen(name)) != 0) continue;
      ++n_matches;
      int w = snprintf(matches + len, sizeof(matches) - len, "%s--%s", len ? ", " : "", o->name);
      if (w > 0 && (size_t)w < sizeof(matches) - len) len += (size_t)w;
    }
    if (n_matches >= 2 && name[0]) {
      return lw__cli_error(cmd, "--%s is ambiguous (%s)", name, matches);
    }
    char owners[256];
    const char *where = cmd->owner_of ? cmd->owner_of(name, owners, sizeof(owners)) : NULL;
    if (where) {
      return lw__cli_error(cmd, "--%s does not apply to %s (it is an option of %s)", name,
                           cmd->name, where);
    }
    return lw__cli_error(cmd, "unknown option --%s", name);
  }
  return lw__cli_error(cmd, "unknown option %s", text);
}

int lw__cli_parse(const lw_cli_cmd_t *cmd, int argc, char **argv, lw_cli_on_opt_fn on_opt,
                  void *user, int *first_operand) {
  size_t n = count_opts(cmd->opts);
  struct option *longopts = calloc(n + 2, sizeof(*longopts));
  char *shorts = calloc(2 * n + 4, 1);
  if (!longopts || !shorts) {
    free(longopts);
    free(shorts);
    fprintf(stderr, "lanework %s: out of memory\n", cmd->name);
    return LW_CLI_USAGE;
  }
  // ':' first: a missing value is reported as ':' rather than '?'.
  size_t s = 0;
  shorts[s++] = ':';
  shorts[s++] = 'h';
  for (size_t i = 0; i < n; ++i) {
    const lw_cli_opt_t *o = &cmd->opts[i];
    longopts[i] = (struct option){o->name, takes_value(o) ? required_argument : no_argument,
                                  NULL, (int)(LONG_VAL_BASE + i)};
    if (o->short_name) {
      shorts[s++] = o->short_name;
      if (takes_value(o)) shorts[s++] = ':';
    }
  }
  longopts[n] = (struct option){"help", no_argument, NULL, 'h'};

  int rc = LW_CLI_OK;
  opterr = 0;
  optind = 0;  // 0: glibc starts a fresh scan (the parser may run more than once)
  for (;;) {
    int idx = -1;
    int c = getopt_long(argc, argv, shorts, longopts, &idx);
    if (c == -1) break;
    const lw_cli_opt_t *o = NULL;
    if (c == 'h') {
      lw__cli_help(cmd, stdout);
      rc = LW_CLI_HELP;
      break;
    }
    if (c == ':' || c == '?') {
      int which = optopt;
      if (which >= LONG_VAL_BASE && (size_t)(which - LONG_VAL_BASE) < n) {
        o = &cmd->opts[which - LONG_VAL_BASE];
      } else if (which > 0) {
        for (size_t i = 0; i < n; ++i) {
          if (cmd->opts[i].short_name == which) o = &cmd->opts[i];
        }
      }
      if (c == ':' && o) {
        char range[128];
        lw__cli_range(o, range, sizeof(range));
        rc = lw__cli_error(cmd, "--%s needs a value (%s%s%s)", o->name,
                           o->metavar ? o->metavar : "a value", range[0] ? ", " : "", range);
      } else if (which == 'h') {
        rc = lw__cli_error(cmd, "--help takes no value");
      } else if (o && which >= LONG_VAL_BASE) {
        rc = lw__cli_error(cmd, "--%s takes no value", o->name);
      } else if (which > 0 && which < LONG_VAL_BASE) {
        rc = lw__cli_error(cmd, "unknown option -%c", which);
      } else {
        rc = unknown_option(cmd, argv[optind - 1]);
      }
      break;
    }
    if (c >= LONG_VAL_BASE && (size_t)(c - LONG_VAL_BASE) < n) {
      o = &cmd->opts[c - LONG_VAL_BASE];
    } else {
      for (size_t i = 0; i < n && !o; ++i) {
        if (cmd->opts[i].short_name == c) o = &cmd->opts[i];
      }
    }
    if (!o) {
      rc = lw__cli_error(cmd, "getopt_long returned %d, which no option has", c);
      break;
    }
    lw_cli_value_t v;
    rc = check_value(cmd, o, takes_value(o) ? optarg : NULL, &v);
    if (rc == LW_CLI_OK && on_opt) rc = on_opt(user, o, &v);
    if (rc != LW_CLI_OK) break;
  }
  free(longopts);
  free(shorts);
  if (rc != LW_CLI_OK) return rc;
  if (argc - optind > cmd->max_positional) {
    const char *extra = argv[optind + cmd->max_positional];
    if (cmd->max_positional == 0) {
      return lw__cli_error(cmd, "unexpected argument '%s' (%s takes options only)", extra,
                           cmd->name);
    }
    return lw__cli_error(cmd, "unexpected argument '%s' (usage: lanework %s %s)", extra,
                         cmd->name, cmd->synopsis);
  }
  if (first_operand) *first_operand = optind;
  return LW_CLI_OK;
}
