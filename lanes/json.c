// lanes/json.c — see json.h.
#include "lanes/json.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "lanes/error.h"

void lw__json_initialize(lw_json_t *j, FILE *out, bool pretty) {
  memset(j, 0, sizeof(*j));
  j->out = out;
  j->pretty = pretty;
}
