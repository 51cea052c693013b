// tests/child/test_opencl_trace.c — an opencl run executed in slices records each slice in the
// trace (LW_TRACE_SLICE, child/backend_opencl.c): inside its run's span, on the run lane's
// track, under the run's identity, numbered in order, not overlapping, and covering every
// work-item exactly once; the JSON names them "slice" with their number and work-items. So a
// stall between slices is a gap in the picture. Events and counts only, no timing.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes/trace.h"
#include "lanework/chip.h"
#include "test_util.h"

#define ITEMS 4096u
#define STEPS 64u

static const uint8_t k_dirs[5] = {LW_PARAM_IN, LW_PARAM_IN, LW_PARAM_OUT, LW_PARAM_SCALAR,
                                  LW_PARAM_SCALAR};

static lw_chip_t *chip;
static int fds_before;

static void open_chip(void) {
  lw_chip_config_t cfg;
  lw_chip_config_default(&cfg);
  snprintf(cfg.backend, sizeof(cfg.backend), "opencl");
  LW_ASSERT_OK(lw_chip_open(&cfg, &chip));
}

static void setup(void) {
  // A driver may keep process-wide fds open after its first context (NVIDIA's /dev/nvidia*):
  // the baseline is taken after one open and close.
  open_chip();
  lw_chip_close(chip);
  fds_before = lw_test_fd_count();
  open_chip();
}

static void teardown(void) {
  lw_chip_close(chip);
  chip = NULL;
  cr_expect_eq(lw_test_fd_count(), fds_before, "the chip left fds open");
}

TestSuite(opencl_trace, .init = setup, .fini = teardown, .timeout = 120);

static lw_callable_handle_t reg_repeat(void) {
  char path[512];
  snprintf(path, sizeof(path), "%s/opencl/repeat_vector_add.cl", lw_test_kernel_dir());
  lw_callable_t c;
  LW_ASSERT_OK(lw_callable_load_file(path, &c));
  c.n_params = 5;
  c.param_dirs = k_dirs;
  lw_callable_handle_t h;
  LW_ASSERT_OK(lw_chip_register(chip, &c, &h));
  lw_callable_free_loaded(&c);
  return h;
}

// One run of repeat_vector_add over ITEMS work-items inside a trace session: its capture.
static void traced_run(lw_trace_capture_t *cap) {
  lw_callable_handle_t h = reg_repeat();
  uint32_t *a = calloc(ITEMS, 4), *b = calloc(ITEMS, 4), *c = calloc(ITEMS, 4);
  cr_assert(a && b && c);
  lw_args_t args;
  const uint64_t g[3] = {ITEMS, 0, 0};
  lw_args_init(&args);
  LW_ASSERT_OK(lw_args_add_tensor(&args, a, ITEMS * 4, LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, b, ITEMS * 4, LW_TAG_INPUT));
  LW_ASSERT_OK(lw_args_add_tensor(&args, c, ITEMS * 4, LW_TAG_OUTPUT));
  LW_ASSERT_OK(lw_args_add_scalar(&args, ITEMS));
  LW_ASSERT_OK(lw_args_add_scalar(&args, STEPS));
  // One work-item per work-group: the first slice is the backend's first guess (a few hundred
  // work-items), so a range of ITEMS takes several slices whatever the device's speed.
  const uint64_t l[3] = {1, 0, 0};
  LW_ASSERT_OK(lw_args_set_launch(&args, 1, g, l));
  lw_error_t err;
  LW_ASSERT_OK(lw__trace_begin(NULL, &err));
  LW_ASSERT_OK(lw_chip_run(chip, h, &args, NULL, NULL));
  lw_trace_summary_t sum;
  LW_ASSERT_OK(lw__trace_end(cap, &sum, &err));
  cr_assert_eq(sum.dropped_events, 0);
  free(a);
  free(b);
  free(c);
}

Test(opencl_trace, a_sliced_run_records_every_slice_inside_its_run_span_in_order) {
  lw_trace_capture_t cap;
  traced_run(&cap);
  const lw_trace_record_t *run = NULL;
  for (size_t i = 0; i < cap.n; ++i) {
    if (cap.rec[i].ev.kind == LW_TRACE_RUN) {
      cr_assert_null(run, "two run spans for one run");
      run = &cap.rec[i];
    }
  }
  cr_assert_not_null(run, "no run span");
  int64_t run_t0 = run->ev.ts_ns, run_t1 = run->ev.ts_ns + run->ev.dur_ns;
  uint64_t next_index = 0, items = 0;
  int64_t last_end = run_t0;
  for (size_t i = 0; i < cap.n; ++i) {
    const lw_trace_event_t *e = &cap.rec[i].ev;
    if (e->kind != LW_TRACE_SLICE) continue;
    // Each thread's events are in the order it recorded them: slices in launch order.
    cr_assert_eq(e->arg[0], next_index, "slice %llu recorded where %llu was due",
                 (unsigned long long)e->arg[0], (unsigned long long)next_index);
    ++next_index;
    cr_assert_eq(cap.rec[i].track, run->track, "a slice off its run lane's track");
    cr_assert_eq(e->run_id, run->ev.run_id);
    cr_assert_eq(e->task_id, run->ev.task_id);
    cr_assert_eq(e->chip, run->ev.chip);
    cr_assert_str_eq(e->name, run->ev.name);
    cr_assert_geq(e->ts_ns, last_end, "slice %llu overlaps the one before",
                  (unsigned long long)e->arg[0]);
    cr_assert_leq(e->ts_ns + e->dur_ns, run_t1, "slice %llu ends after its run",
                  (unsigned long long)e->arg[0]);
    cr_assert_gt(e->arg[1], 0);
    last_end = e->ts_ns + e->dur_ns;
    items += e->arg[1];
  }
  cr_assert_geq(next_index, 2, "a run of %u work-items in %llu slice(s)", ITEMS,
                (unsigned long long)next_index);
  cr_assert_eq(items, ITEMS, "the slices covered %llu work-items of %u",
               (unsigned long long)items, ITEMS);
  lw__trace_capture_free(&cap);
}

Test(opencl_trace, the_json_names_each_slice_with_its_number_and_work_items) {
  lw_trace_capture_t cap;
  traced_run(&cap);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  cr_assert_not_null(f);
  lw_error_t err;
  LW_ASSERT_OK(lw__trace_write_json(&cap, f, NULL, &err));
  fclose(f);
  json_error_t je;
  json_t *doc = json_loads(text, 0, &je);
  cr_assert_not_null(doc, "%s", je.text);
  json_t *events = json_object_get(doc, "traceEvents");
  size_t i, slices = 0;
  json_int_t items = 0;
  json_t *ev;
  json_array_foreach(events, i, ev) {
    const char *cat = json_string_value(json_object_get(ev, "cat"));
    if (!cat || strcmp(cat, "slice") != 0) continue;
    cr_assert_str_eq(json_string_value(json_object_get(ev, "ph")), "X");
    json_t *args = json_object_get(ev, "args");
    cr_assert(json_is_integer(json_object_get(args, "slice")));
    cr_assert(json_is_integer(json_object_get(args, "work_items")));
    items += json_integer_value(json_object_get(args, "work_items"));
    ++slices;
  }
  cr_assert_geq(slices, 2);
  cr_assert_eq(items, ITEMS);
  json_decref(doc);
  free(text);
  lw__trace_capture_free(&cap);
}
