// tests/gpu_check/check_summary.c — reads the gpu-check.json that `scripts/gpu-check run`
// wrote (with jansson: the script writes JSON by hand in bash, so a parser that owes it nothing
// checks it) and compares it with what the run had to say:
//
//   lw_gpu_check_summary FILE PASSED EXPECT...
//
//   PASSED       true or false: the summary's "passed"
//   NAME=STATUS  a step, in the order of the arguments, with that status; the summary holds
//                exactly these steps
//   NAME~TEXT    the step's stderr_tail contains TEXT
//   NAME@TEXT    the step's reason (a skipped step's) contains TEXT
//   target:ID=VERDICT%TEXT
//                the target ID of the summary's "targets" (lanework targets) has that verdict
//                (holds, missed, not_measured) and its "measured" contains TEXT
//
// Every step must carry its name, kind, command, exit code (null only when skipped) and
// seconds; a skipped step its reason; a passed test step its Criterion counts (all passing,
// none failing); a passed json step its bench's own JSON object, and a bench step of a device
// backend (bench_<bench>_opencl..., bench_<bench>_cuda...) that backend's; a step that did not
// pass the end of its output; a step that ran left none of the bundle's programs running
// (left_behind 0). The counts must match the steps. The machine says whether the
// cuda steps could run (machine.cuda.ready) and, when not, why. The targets are lanework
// targets' object: every one with an issue, an id, a verdict and what was measured, and counts
// that match. Prints what differs and exits 1; exits 0 when all holds.
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "check_summary: ");
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  failures++;
}

static const char *str_of(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_int_t int_of(const json_t *o, const char *key) {
  const json_t *v = json_object_get(o, key);
  return json_is_integer(v) ? json_integer_value(v) : -1;
}

// The fields every step has, and those its kind and status add.
static void check_step(const json_t *s, const char *name) {
  const char *kind = str_of(s, "kind"), *status = str_of(s, "status");
  if (!kind || !status || !str_of(s, "command")) {
    fail("step %s: no kind, status or command", name);
    return;
  }
  bool skipped = strcmp(status, "skipped") == 0, passed = strcmp(status, "passed") == 0;
  const json_t *rc = json_object_get(s, "exit_code");
  if (skipped ? !json_is_null(rc) : !json_is_integer(rc)) {
    fail("step %s: exit_code is not %s", name, skipped ? "null" : "an integer");
  }
  if (!json_is_number(json_object_get(s, "seconds")) ||
      json_number_value(json_object_get(s, "seconds")) < 0) {
    fail("step %s: seconds is not a number >= 0", name);
  }
  if (passed && json_integer_value(rc) != 0) fail("step %s: passed with exit code != 0", name);
  // What a step left running (gpu-check kills it): a step that ran leaves nothing of the
  // bundle's (its chip children and zygotes end with their program).
  const json_t *left = json_object_get(s, "left_behind");
  if (!skipped && (!json_is_integer(left) || json_integer_value(left) != 0)) {
    fail("step %s: left_behind is not 0 (the log names what it left running)", name);
  }
  if (!passed && !skipped && !json_is_string(json_object_get(s, "stderr_tail"))) {
    fail("step %s (%s) has no stderr_tail", name, status);
  }
  if (skipped && !str_of(s, "reason")) fail("step %s: skipped without a reason", name);
  if (passed && strcmp(kind, "test") == 0) {
    const json_t *t = json_object_get(s, "tests");
    json_int_t tested = int_of(t, "tested"), passing = int_of(t, "passing");
    if (!json_is_object(t) || tested <= 0 || passing != tested || int_of(t, "failing") != 0 ||
        int_of(t, "skipped") < 0) {
      fail("step %s: a passed test step without Criterion counts that say so", name);
    }
    if (!json_is_array(json_object_get(s, "failed_tests")) ||
        json_array_size(json_object_get(s, "failed_tests")) != 0) {
      fail("step %s: a passed test step must list no failed tests", name);
    }
  }
  if (passed && strcmp(kind, "json") == 0) {
    const json_t *r = json_object_get(s, "result");
    if (!json_is_object(r) || !str_of(r, "schema")) {
      fail("step %s: a passed json step without its program's JSON object (with a schema)",
           name);
    }
    // bench_<bench>_<backend>[_l<level>]: a device backend's bench reports that backend.
    static const char *const device_backends[] = {"opencl", "cuda"};
    for (size_t i = 0; i < sizeof device_backends / sizeof device_backends[0]; ++i) {
      char token[32];
      snprintf(token, sizeof token, "_%s", device_backends[i]);
      const char *at = strncmp(name, "bench_", 6) == 0 ? strstr(name + 6, token) : NULL;
      if (!at || (at[strlen(token)] != '\0' && at[strlen(token)] != '_')) continue;
      const char *backend = str_of(r, "backend");
      if (!backend || strcmp(backend, device_backends[i]) != 0) {
        fail("step %s: its result's backend is %s, not %s", name, backend ? backend : "missing",
             device_backends[i]);
      }
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 4 || (strcmp(argv[2], "true") != 0 && strcmp(argv[2], "false") != 0)) {
    fprintf(stderr, "usage: %s FILE true|false NAME=STATUS|NAME~TEXT...\n", argv[0]);
    return 2;
  }
  json_error_t err;
  json_t *doc = json_load_file(argv[1], 0, &err);
  if (!doc) {
    fprintf(stderr, "check_summary: %s: not JSON: %s (line %d, column %d)\n", argv[1], err.text,
            err.line, err.column);
    return 1;
  }
  if (!json_is_object(doc) || !str_of(doc, "schema") ||
      strcmp(str_of(doc, "schema"), "lanework.gpu_check") != 0 ||
      int_of(doc, "schema_version") != 1) {
    fail("%s: not a lanework.gpu_check summary of schema_version 1", argv[1]);
    return 1;
  }
  bool want_passed = strcmp(argv[2], "true") == 0;
  if (!json_is_boolean(json_object_get(doc, "passed")) ||
      json_is_true(json_object_get(doc, "passed")) != want_passed) {
    fail("\"passed\" is not %s", argv[2]);
  }
  const json_t *machine = json_object_get(doc, "machine"), *bundle = json_object_get(doc, "bundle");
  if (!str_of(machine, "hostname") || !str_of(machine, "kernel") ||
      !json_is_array(json_object_get(machine, "gpus"))) {
    fail("machine: no hostname, kernel or gpus");
  }
  if (!str_of(bundle, "lanework_version") || !json_is_true(json_object_get(bundle, "files_intact"))) {
    fail("bundle: no lanework_version, or its files are not intact");
  }
  const json_t *cuda = json_object_get(machine, "cuda");
  if (!json_is_object(cuda) || !json_is_boolean(json_object_get(cuda, "ready"))) {
    fail("machine: no cuda object saying whether the cuda steps could run (ready)");
  } else if (!json_is_true(json_object_get(cuda, "ready")) && !str_of(cuda, "skip_reason")) {
    fail("machine.cuda: not ready, and no skip_reason saying why");
  }

  const json_t *steps = json_object_get(doc, "steps");
  if (!json_is_array(steps)) {
    fail("no steps array");
    return 1;
  }
  const json_t *targets = json_object_get(doc, "targets");
  const json_t *tlist = json_object_get(targets, "targets");
  if (!json_is_object(targets) || !str_of(targets, "schema") ||
      strcmp(str_of(targets, "schema"), "lanework.targets") != 0 || !json_is_array(tlist) ||
      json_array_size(tlist) == 0) {
    fail("targets: not a lanework.targets object with a list of targets");
  } else {
    json_int_t by[3] = {0};  // holds, missed, not_measured
    static const char *const verdicts[3] = {"holds", "missed", "not_measured"};
    for (size_t k = 0; k < json_array_size(tlist); ++k) {
      const json_t *t = json_array_get(tlist, k);
      const char *v = str_of(t, "verdict");
      int which = -1;
      for (int c = 0; c < 3 && v; ++c) which = strcmp(v, verdicts[c]) == 0 ? c : which;
      if (int_of(t, "issue") <= 0 || !str_of(t, "id") || which < 0 || !str_of(t, "measured")) {
        fail("targets[%zu]: no issue, id, known verdict or measured", k);
      } else {
        by[which]++;
      }
    }
    for (int c = 0; c < 3; ++c) {
      if (int_of(targets, verdicts[c]) != by[c]) fail("targets.%s differs", verdicts[c]);
    }
  }

  size_t n = 0;
  json_int_t counted[4] = {0};  // passed, failed, timed_out, skipped
  const char *names[4] = {"passed", "failed", "timed_out", "skipped"};
  for (int i = 3; i < argc; ++i) {
    char name[128];
    if (strncmp(argv[i], "target:", 7) == 0) {
      // target:ID=VERDICT%TEXT
      const char *id = argv[i] + 7, *eq = strchr(id, '='), *pct = eq ? strchr(eq, '%') : NULL;
      if (!eq || !pct || (size_t)(eq - id) >= sizeof(name)) {
        fprintf(stderr, "check_summary: %s: not target:ID=VERDICT%%TEXT\n", argv[i]);
        return 2;
      }
      memcpy(name, id, (size_t)(eq - id));
      name[eq - id] = '\0';
      const json_t *found = NULL;
      for (size_t k = 0; k < json_array_size(tlist); ++k) {
        const char *tid = str_of(json_array_get(tlist, k), "id");
        if (tid && strcmp(tid, name) == 0) found = json_array_get(tlist, k);
      }
      const char *v = found ? str_of(found, "verdict") : NULL;
      const char *m = found ? str_of(found, "measured") : NULL;
      if (!v || strncmp(v, eq + 1, (size_t)(pct - eq - 1)) != 0 || v[pct - eq - 1] != '\0' || !m ||
          !strstr(m, pct + 1)) {
        fail("target %s: verdict %s, measured '%s'; expected %.*s and '%s'", name, v ? v : "none",
             m ? m : "", (int)(pct - eq - 1), eq + 1, pct + 1);
      }
      continue;
    }
    const char *sep = strpbrk(argv[i], "=~@");
    if (!sep || (size_t)(sep - argv[i]) >= sizeof(name)) {
      fprintf(stderr, "check_summary: %s: not NAME=STATUS, NAME~TEXT or NAME@TEXT\n", argv[i]);
      return 2;
    }
    memcpy(name, argv[i], (size_t)(sep - argv[i]));
    name[sep - argv[i]] = '\0';
    if (*sep == '~' || *sep == '@') {
      // A text the step's stderr_tail (~) or reason (@) holds: that step was listed before.
      const char *field = *sep == '~' ? "stderr_tail" : "reason";
      const json_t *found = NULL;
      for (size_t k = 0; k < json_array_size(steps); ++k) {
        const char *sn = str_of(json_array_get(steps, k), "name");
        if (sn && strcmp(sn, name) == 0) found = json_array_get(steps, k);
      }
      const char *text = found ? str_of(found, field) : NULL;
      if (!text || !strstr(text, sep + 1)) fail("step %s: %s lacks '%s'", name, field, sep + 1);
      continue;
    }
    const json_t *s = json_array_get(steps, n++);
    const char *sn = str_of(s, "name");
    if (!sn || strcmp(sn, name) != 0) {
      fail("expected step %s, found %s", name, sn ? sn : "none");
      continue;
    }
    const char *status = str_of(s, "status");
    if (!status || strcmp(status, sep + 1) != 0) {
      fail("step %s: status %s", name, status ? status : "none");
    }
    for (int c = 0; c < 4; ++c) counted[c] += status && strcmp(status, names[c]) == 0;
    check_step(s, name);
  }
  if (json_array_size(steps) != n) fail("the summary holds other steps than the ones expected");
  const json_t *counts = json_object_get(doc, "counts");
  if (int_of(counts, "steps") != (json_int_t)json_array_size(steps)) {
    fail("counts.steps differs from the steps listed");
  }
  for (int c = 0; c < 4; ++c) {
    if (int_of(counts, names[c]) != counted[c]) fail("counts.%s differs from the steps", names[c]);
  }
  json_decref(doc);
  if (failures == 0) printf("check_summary: %s: as expected\n", argv[1]);
  return failures == 0 ? 0 : 1;
}
