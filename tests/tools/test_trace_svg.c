// tests/tools/test_trace_svg.c — `lanework trace svg`: hand-made trace files (the format of
// the trace recorder's contract) drawn by the built program. What is asserted is what the
// picture must carry: well-formed SVG (rsvg-convert renders it to a PNG), every lane's label in
// band order, escaped names, the failure outline, the instants, the dependency arrow from the
// producer's end to the consumer's start, the legend, the dropped-events warning, narrow spans
// merged; and that a trace it cannot read exits 2 with a message and writes nothing.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

static char g_dir[64];

static void make_dir(void) {
  snprintf(g_dir, sizeof(g_dir), "/tmp/lw_trace_svg_XXXXXX");
  cr_assert_not_null(mkdtemp(g_dir), "mkdtemp: %s", strerror(errno));
}

static void remove_dir(void) {
  DIR *d = opendir(g_dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", g_dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(g_dir);
}

TestSuite(trace_svg, .init = make_dir, .fini = remove_dir, .timeout = 60);

// g_dir/name, malloc'd (the caller frees it).
static char *path_of(const char *name) {
  char *p = malloc(512);
  cr_assert_not_null(p);
  snprintf(p, 512, "%s/%s", g_dir, name);
  return p;
}

static char *write_text(const char *name, const char *text) {
  char *p = path_of(name);
  FILE *f = fopen(p, "w");
  cr_assert_not_null(f, "cannot write %s", p);
  fputs(text, f);
  cr_assert_eq(fclose(f), 0);
  return p;
}

static char *read_text(const char *path) {
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "cannot read %s: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *t = malloc(cap);
  cr_assert_not_null(t);
  for (;;) {
    if (len + 1 >= cap) {
      cap *= 2;
      t = realloc(t, cap);
      cr_assert_not_null(t);
    }
    size_t r = fread(t + len, 1, cap - 1 - len, f);
    if (r == 0) break;
    len += r;
  }
  fclose(f);
  t[len] = '\0';
  return t;
}

// Runs argv[0] (a program; "lanework" means the built tool) with stdout discarded; returns
// its exit status (-1 when it did not exit) and its stderr in *err_text (may be NULL).
static int run(const char *const *argv, char **err_text) {
  int pipefd[2];
  cr_assert_eq(pipe(pipefd), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    close(pipefd[1]);
    if (strcmp(argv[0], "lanework") == 0) {
      execv(lw_test_tool_path(), (char *const *)argv);
    } else {
      execvp(argv[0], (char *const *)argv);
    }
    _exit(127);
  }
  close(pipefd[1]);
  size_t cap = 1 << 14, len = 0;
  char *text = calloc(1, cap);
  cr_assert_not_null(text);
  for (;;) {
    ssize_t r = read(pipefd[0], text + len, cap - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
    if (len + 1 >= cap) break;
  }
  close(pipefd[0]);
  int status = 0;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  if (err_text) {
    *err_text = text;
  } else {
    free(text);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `lanework trace svg TRACE -o OUT extra...`, asserted to succeed; returns the SVG text.
static char *draw(const char *trace, const char *out, const char *const *extra) {
  const char *argv[16] = {"lanework", "trace", "svg", trace, "-o", out};
  int n = 6;
  for (; extra && *extra && n < 15; ++extra) argv[n++] = *extra;
  argv[n] = NULL;
  char *err = NULL;
  int rc = run(argv, &err);
  cr_assert_eq(rc, 0, "lanework trace svg %s exited %d:\n%s", trace, rc, err);
  free(err);
  return read_text(out);
}

// rsvg-convert parses the SVG as XML and renders it; a PNG signature proves it did.
static void assert_renders(const char *svg_path) {
  char *png = path_of("render.png");
  const char *argv[] = {"rsvg-convert", "-o", png, svg_path, NULL};
  char *err = NULL;
  int rc = run(argv, &err);
  cr_assert_neq(rc, 127, "rsvg-convert is not installed (librsvg2-bin; scripts/common.sh)");
  cr_assert_eq(rc, 0, "rsvg-convert %s failed (%d): %s", svg_path, rc, err);
  free(err);
  FILE *f = fopen(png, "rb");
  cr_assert_not_null(f);
  unsigned char sig[8] = {0};
  cr_assert_eq(fread(sig, 1, 8, f), 8);
  fclose(f);
  cr_assert(memcmp(sig, "\x89PNG\r\n\x1a\n", 8) == 0, "%s is not a PNG", png);
  free(png);
}

static size_t count(const char *hay, const char *needle, const char *end) {
  size_t n = 0;
  for (const char *p = strstr(hay, needle); p && (!end || p < end); p = strstr(p + 1, needle)) {
    ++n;
  }
  return n;
}

// The <rect ...> tag of the span whose hover text contains marker.
static char *rect_of(const char *svg, const char *marker) {
  const char *m = strstr(svg, marker);
  cr_assert_not_null(m, "no span with '%s' in the picture", marker);
  cr_assert_null(strstr(m + 1, marker), "'%s' names more than one span", marker);
  const char *r = NULL;
  for (const char *p = strstr(svg, "<rect"); p && p < m; p = strstr(p + 1, "<rect")) r = p;
  cr_assert_not_null(r);
  const char *close = strchr(r, '>');
  char *tag = strndup(r, (size_t)(close - r + 1));
  cr_assert_not_null(tag);
  return tag;
}

static double attr(const char *tag, const char *name) {
  char key[32];
  snprintf(key, sizeof(key), " %s=\"", name);
  const char *p = strstr(tag, key);
  cr_assert_not_null(p, "no %s in %s", name, tag);
  return strtod(p + strlen(key), NULL);
}

// Two chip processes with run, register and queue lanes, chip 0 respawned under a new pid, a
// sub, the parent's supervisor and orchestrator; a failing span, a death and a respawn, a dep
// flow (and a dispatch flow, not drawn by default), a name that needs escaping, a lane with a
// name and nothing on it. Process metadata comes in scrambled order; chip 0's run lane has a
// larger tid than its register lane but the smaller sort index.
static const char kTrace[] =
    "{\"displayTimeUnit\":\"ns\",\n"
    " \"otherData\":{\"producer\":\"lanework\",\"clock\":\"CLOCK_MONOTONIC\",\"t0_ns\":1,"
    "\"dropped_events\":3,\"events\":40},\n"
    " \"traceEvents\":[\n"
    " {\"ph\":\"M\",\"name\":\"process_name\",\"pid\":500,\"tid\":0,\"args\":{\"name\":\"sub "
    "0\"}},\n"
    " {\"ph\":\"M\",\"name\":\"process_name\",\"pid\":301,\"tid\":0,"
    "\"args\":{\"name\":\"chip 0 (sim)\"}},\n"
    " {\"ph\":\"M\",\"name\":\"process_name\",\"pid\":202,\"tid\":0,"
    "\"args\":{\"name\":\"chip 1 (sim)\"}},\n"
    " {\"ph\":\"M\",\"name\":\"process_name\",\"pid\":100,\"tid\":0,"
    "\"args\":{\"name\":\"lanework parent\"}},\n"
    " {\"ph\":\"M\",\"name\":\"process_name\",\"pid\":201,\"tid\":0,"
    "\"args\":{\"name\":\"chip 0 (sim)\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":100,\"tid\":101,"
    "\"args\":{\"name\":\"supervisor\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":100,\"tid\":102,"
    "\"args\":{\"name\":\"orchestrator\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":201,\"tid\":2019,"
    "\"args\":{\"name\":\"run lane\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":201,\"tid\":2019,"
    "\"args\":{\"sort_index\":1}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":201,\"tid\":2012,"
    "\"args\":{\"name\":\"register lane\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":201,\"tid\":2012,"
    "\"args\":{\"sort_index\":2}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":201,\"tid\":1073741824,"
    "\"args\":{\"name\":\"queue 0\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":201,\"tid\":1073741824,"
    "\"args\":{\"sort_index\":3}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":201,\"tid\":2013,"
    "\"args\":{\"name\":\"mailbox loop\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":202,\"tid\":2021,"
    "\"args\":{\"name\":\"run lane\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":202,\"tid\":2022,"
    "\"args\":{\"name\":\"register lane\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":301,\"tid\":3011,"
    "\"args\":{\"name\":\"run lane\"}},\n"
    " {\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":500,\"tid\":5001,"
    "\"args\":{\"name\":\"run lane\"}},\n"
    " {\"ph\":\"X\",\"cat\":\"orch\",\"name\":\"orch\",\"pid\":100,\"tid\":102,\"ts\":0.0,"
    "\"dur\":900.0,\"args\":{\"run\":1}},\n"
    " {\"ph\":\"X\",\"cat\":\"submit\",\"name\":\"vadd\",\"pid\":100,\"tid\":102,\"ts\":5.0,"
    "\"dur\":3.0,\"args\":{\"run\":1,\"task\":1,\"callable\":\"vadd\"}},\n"
    " {\"ph\":\"X\",\"cat\":\"queue\",\"name\":\"vadd\",\"pid\":201,\"tid\":1073741824,"
    "\"ts\":12.0,\"dur\":8.0,\"args\":{\"run\":1,\"task\":1,\"callable\":\"vadd\",\"chip\":0}},\n"
    " {\"ph\":\"X\",\"cat\":\"run\",\"name\":\"vadd\",\"pid\":201,\"tid\":2019,\"ts\":20.0,"
    "\"dur\":300.0,\"args\":{\"run\":1,\"task\":1,\"callable\":\"vadd\",\"chip\":0,"
    "\"status\":\"LW_OK\"}},\n"
    " {\"ph\":\"X\",\"cat\":\"register\",\"name\":\"a<b&\\\"c\\\"\",\"pid\":201,\"tid\":2012,"
    "\"ts\":30.0,\"dur\":250.0,\"args\":{\"callable\":\"a<b&\\\"c\\\"\",\"chip\":0,"
    "\"status\":\"LW_OK\"}},\n"
    " {\"ph\":\"X\",\"cat\":\"run\",\"name\":\"vmul\",\"pid\":202,\"tid\":2021,\"ts\":330.0,"
    "\"dur\":200.0,\"args\":{\"run\":1,\"task\":2,\"callable\":\"vmul\",\"chip\":1,"
    "\"status\":\"LW_TASK_FAILED\"}},\n"
    " {\"ph\":\"X\",\"cat\":\"register\",\"name\":\"vmul\",\"pid\":202,\"tid\":2022,\"ts\":20.0,"
    "\"dur\":120.0,\"args\":{\"callable\":\"vmul\",\"chip\":1,\"status\":\"LW_OK\"}},\n"
    " {\"ph\":\"s\",\"cat\":\"flow\",\"name\":\"dep\",\"id\":7,\"pid\":201,\"tid\":2019,"
    "\"ts\":100.0},\n"
    " {\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"flow\",\"name\":\"dep\",\"id\":7,\"pid\":202,"
    "\"tid\":2021,\"ts\":400.0},\n"
    " {\"ph\":\"s\",\"cat\":\"flow\",\"name\":\"dispatch\",\"id\":8,\"pid\":100,\"tid\":102,"
    "\"ts\":6.0},\n"
    " {\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"flow\",\"name\":\"dispatch\",\"id\":8,\"pid\":201,"
    "\"tid\":2019,\"ts\":25.0},\n"
    " {\"ph\":\"i\",\"s\":\"t\",\"cat\":\"fault\",\"name\":\"death\",\"pid\":100,\"tid\":101,"
    "\"ts\":600.0,\"args\":{\"chip\":0,\"detail\":\"SIGKILL\"}},\n"
    " {\"ph\":\"i\",\"s\":\"t\",\"cat\":\"fault\",\"name\":\"respawn\",\"pid\":100,\"tid\":101,"
    "\"ts\":650.0,\"args\":{\"chip\":0,\"detail\":\"new pid 301\"}},\n"
    " {\"ph\":\"X\",\"cat\":\"run\",\"name\":\"vadd\",\"pid\":301,\"tid\":3011,\"ts\":700.0,"
    "\"dur\":100.0,\"args\":{\"run\":1,\"task\":3,\"callable\":\"vadd\",\"chip\":0,"
    "\"status\":\"LW_OK\"}},\n"
    " {\"ph\":\"X\",\"cat\":\"run\",\"name\":\"subfn\",\"pid\":500,\"tid\":5001,\"ts\":720.0,"
    "\"dur\":50.0,\"args\":{\"callable\":\"subfn\",\"status\":\"LW_OK\"}}\n"
    " ]}\n";

static char *draw_sample(const char *const *extra) {
  char *trace = write_text("trace.json", kTrace);
  char *out = path_of("out.svg");
  char *svg = draw(trace, out, extra);
  assert_renders(out);
  free(trace);
  free(out);
  return svg;
}

Test(trace_svg, every_lane_label_appears_and_the_svg_renders) {
  char *svg = draw_sample(NULL);
  cr_assert(strncmp(svg, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 44) == 0);
  cr_assert_not_null(strstr(svg, "version=\"1.1\" width=\"1600\" height=\""));
  cr_assert_not_null(strstr(svg, "viewBox=\"0 0 1600 "));
  const char *labels[] = {
      "lanework parent \xc2\xb7 supervisor", "lanework parent \xc2\xb7 orchestrator",
      "chip 0 (sim) \xc2\xb7 run lane",      "chip 0 (sim) \xc2\xb7 register lane",
      "chip 0 (sim) \xc2\xb7 queue 0",       "chip 1 (sim) \xc2\xb7 run lane",
      "chip 1 (sim) \xc2\xb7 register lane", "sub 0 \xc2\xb7 run lane",
  };
  for (size_t i = 0; i < sizeof(labels) / sizeof(labels[0]); ++i) {
    char want[128];
    snprintf(want, sizeof(want), "class=\"row\">%s</text>", labels[i]);
    cr_assert_not_null(strstr(svg, want), "no row labelled '%s'", labels[i]);
  }
  // Chip 0 has a row in its first process and one in its respawned one.
  cr_assert_eq(count(svg, "class=\"row\">chip 0 (sim) \xc2\xb7 run lane</text>", NULL), 2);
  cr_assert_str_eq(svg + strlen(svg) - 7, "</svg>\n");
  free(svg);
}

Test(trace_svg, bands_are_parent_then_chips_by_index_with_respawns_then_subs) {
  char *svg = draw_sample(NULL);
  const char *bands[] = {"lanework parent (pid 100)", "chip 0 (sim) (pid 201)",
                         "chip 0 (sim) (pid 301)", "chip 1 (sim) (pid 202)", "sub 0 (pid 500)"};
  const char *prev = svg;
  for (size_t i = 0; i < sizeof(bands) / sizeof(bands[0]); ++i) {
    const char *at = strstr(svg, bands[i]);
    cr_assert_not_null(at, "no band '%s'", bands[i]);
    cr_assert_gt(at, prev, "band '%s' is out of order", bands[i]);
    prev = at;
  }
  // Rows within a band follow the thread sort index, not the tid.
  const char *run = strstr(svg, "chip 0 (sim) \xc2\xb7 run lane");
  const char *reg = strstr(svg, "chip 0 (sim) \xc2\xb7 register lane");
  const char *queue = strstr(svg, "chip 0 (sim) \xc2\xb7 queue 0");
  cr_assert(run && reg && queue && run < reg && reg < queue);
  free(svg);
}

Test(trace_svg, a_lane_with_nothing_on_it_has_no_row) {
  char *svg = draw_sample(NULL);
  cr_assert_null(strstr(svg, "mailbox loop"));
  free(svg);
}

Test(trace_svg, names_are_escaped_for_xml) {
  char *svg = draw_sample(NULL);
  cr_assert_null(strstr(svg, "a<b&\"c\""));
  // The span's label, its hover text and its legend entry.
  cr_assert_geq(count(svg, "a&lt;b&amp;&quot;c&quot;", NULL), 3);
  free(svg);
}

// JSON escapes can carry what XML 1.0 forbids: a control character, U+FFFF.
Test(trace_svg, characters_xml_forbids_become_question_marks) {
  char *trace = write_text("ctrl.json",
                           "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x\\u0001y\\uffffz\","
                           "\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":5}]}");
  char *out = path_of("ctrl.svg");
  char *svg = draw(trace, out, NULL);
  assert_renders(out);
  cr_assert_not_null(strstr(svg, "<title>x?y?z\n"));
  free(svg);
  free(trace);
  free(out);
}

Test(trace_svg, a_failed_span_has_a_red_outline_and_an_ok_span_has_none) {
  char *svg = draw_sample(NULL);
  char *failed = rect_of(svg, "status: LW_TASK_FAILED");
  cr_assert_not_null(strstr(failed, "stroke=\"#d7191c\""), "failed span: %s", failed);
  char *ok = rect_of(svg, "task 1 \xc2\xb7 chip 0\nts 20.000");
  cr_assert_null(strstr(ok, "#d7191c"), "ok span: %s", ok);
  free(failed);
  free(ok);
  free(svg);
}

Test(trace_svg, a_span_carries_its_hover_text) {
  char *svg = draw_sample(NULL);
  cr_assert_not_null(strstr(svg,
                            "<title>vmul\ncat: run \xc2\xb7 callable: vmul\n"
                            "run 1 \xc2\xb7 task 2 \xc2\xb7 chip 1\n"
                            "ts 330.000 \xc2\xb5s \xc2\xb7 dur 200.000 \xc2\xb5s\n"
                            "status: LW_TASK_FAILED</title>"));
  free(svg);
}

Test(trace_svg, instants_are_drawn_with_their_names) {
  char *svg = draw_sample(NULL);
  cr_assert_not_null(strstr(svg, ">death</text>"));
  cr_assert_not_null(strstr(svg, ">respawn</text>"));
  cr_assert_not_null(strstr(svg, "detail: SIGKILL"));
  // On the supervisor's row: after its label, before the next row's.
  const char *row = strstr(svg, "lanework parent \xc2\xb7 supervisor</text>");
  const char *next = strstr(svg, "lanework parent \xc2\xb7 orchestrator</text>");
  const char *death = strstr(svg, ">death</text>");
  cr_assert(row && next && death && row < death && death < next);
  free(svg);
}

Test(trace_svg, a_dep_flow_is_one_arrow_from_the_producers_end_to_the_consumers_start) {
  char *svg = draw_sample(NULL);
  const char *flows = strstr(svg, "<g id=\"flows\">");
  cr_assert_not_null(flows);
  const char *end = strstr(flows, "</g>");
  // One arrow: the dispatch flow is not drawn by default.
  cr_assert_eq(count(flows, "<path d=\"M", end), 1);
  double x0, y0, c1x, c1y, c2x, c2y, x1, y1;
  cr_assert_eq(sscanf(strstr(flows, "<path d=\"M") + 10, "%lf,%lf C%lf,%lf %lf,%lf %lf,%lf", &x0,
                      &y0, &c1x, &c1y, &c2x, &c2y, &x1, &y1),
               8);
  char *producer = rect_of(svg, "task 1 \xc2\xb7 chip 0\nts 20.000");
  char *consumer = rect_of(svg, "task 2 \xc2\xb7 chip 1\nts 330.000");
  cr_assert_lt(fabs(x0 - (attr(producer, "x") + attr(producer, "width"))), 0.02);
  cr_assert_lt(fabs(x1 - attr(consumer, "x")), 0.02);
  // From the producer's row down to the consumer's.
  cr_assert_gt(y0, attr(producer, "y"));
  cr_assert_lt(y0, attr(producer, "y") + attr(producer, "height"));
  cr_assert_gt(y1, attr(consumer, "y"));
  cr_assert_lt(y1, attr(consumer, "y") + attr(consumer, "height"));
  free(producer);
  free(consumer);
  free(svg);
}

Test(trace_svg, no_flows_draws_no_arrow_and_all_flows_adds_dispatch) {
  const char *none[] = {"--no-flows", NULL};
  char *svg = draw_sample(none);
  cr_assert_null(strstr(svg, "<g id=\"flows\">"));
  cr_assert_null(strstr(svg, "marker-end="), "no arrow, in the legend either");
  free(svg);
  const char *all[] = {"--all-flows", NULL};
  svg = draw_sample(all);
  const char *flows = strstr(svg, "<g id=\"flows\">");
  cr_assert_eq(count(flows, "<path d=\"M", strstr(flows, "</g>")), 2);
  cr_assert_not_null(strstr(svg, "<title>dispatch flow 8\n"));
  free(svg);
}

Test(trace_svg, the_legend_lists_each_callable) {
  char *svg = draw_sample(NULL);
  const char *legend = strstr(svg, "<g id=\"legend\"");
  cr_assert_not_null(legend);
  const char *names[] = {">vadd</text>",  ">vmul</text>",
                         ">subfn</text>", ">a&lt;b&amp;&quot;c&quot;</text>",
                         ">orch</text>",  ">status not LW_OK</text>"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    cr_assert_not_null(strstr(legend, names[i]), "legend lacks %s", names[i]);
  }
  free(svg);
}

Test(trace_svg, dropped_events_are_reported_in_red_in_the_title) {
  char *svg = draw_sample(NULL);
  const char *title = strstr(svg, "<text id=\"title\"");
  cr_assert_not_null(title);
  cr_assert_not_null(strstr(title, "trace.json</tspan>: 9 spans \xc2\xb7 2 instants"));
  cr_assert_not_null(strstr(title,
                            "<tspan fill=\"#d7191c\" font-weight=\"bold\">3 events "
                            "dropped by the recorder</tspan>"));
  free(svg);
  char *trace = write_text("clean.json",
                           "{\"otherData\":{\"dropped_events\":0},\"traceEvents\":["
                           "{\"ph\":\"X\",\"name\":\"k\",\"pid\":1,\"tid\":1,\"ts\":0,"
                           "\"dur\":5}]}");
  char *out = path_of("clean.svg");
  svg = draw(trace, out, NULL);
  cr_assert_null(strstr(svg, "dropped"));
  free(svg);
  free(trace);
  free(out);
}

Test(trace_svg, an_empty_trace_draws_a_picture_saying_no_spans) {
  char *trace = write_text("empty.json", "{\"traceEvents\":[]}");
  char *out = path_of("empty.svg");
  char *svg = draw(trace, out, NULL);
  assert_renders(out);
  cr_assert_not_null(strstr(svg, ">no spans</text>"));
  free(svg);
  free(trace);
  free(out);
}

Test(trace_svg, a_window_draws_only_the_spans_inside_it) {
  char *trace = write_text(
      "window.json",
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"run\",\"name\":\"early\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":10,"
      "\"args\":{\"callable\":\"early\"}},"
      "{\"ph\":\"X\",\"cat\":\"run\",\"name\":\"late\",\"pid\":1,\"tid\":1,\"ts\":1000,"
      "\"dur\":10,\"args\":{\"callable\":\"late\"}}]}");
  char *out = path_of("window.svg");
  const char *window[] = {"--from", "500", "--to", "2000", "--width", "800", NULL};
  char *svg = draw(trace, out, window);
  assert_renders(out);
  cr_assert_not_null(strstr(svg, "<title>late\n"));
  cr_assert_null(strstr(svg, "early"));
  cr_assert_not_null(strstr(svg, "width=\"800\""));
  free(svg);
  free(trace);
  free(out);
}

// 100000 spans of 0.5 µs, one per µs, on one row (0.007 px each at 1600 px), one of them
// failed, and three wide spans on another: the narrow ones become a few grey runs, the failed
// one keeps its own outlined rectangle, the wide ones stay coloured.
Test(trace_svg, many_narrow_spans_merge_into_a_few_grey_runs, .timeout = 120) {
  char *trace = path_of("many.json");
  FILE *f = fopen(trace, "w");
  cr_assert_not_null(f);
  fputs("{\"traceEvents\":[", f);
  for (int i = 0; i < 100000; ++i) {
    fprintf(f,
            "{\"ph\":\"X\",\"cat\":\"run\",\"name\":\"tiny\",\"pid\":7,\"tid\":1,\"ts\":%d.000,"
            "\"dur\":0.500,\"args\":{\"callable\":\"tiny\",\"status\":\"%s\"}},\n",
            i, i == 50000 ? "LW_TASK_FAILED" : "LW_OK");
  }
  for (int i = 0; i < 3; ++i) {
    fprintf(f,
            "{\"ph\":\"X\",\"cat\":\"register\",\"name\":\"wide\",\"pid\":7,\"tid\":2,"
            "\"ts\":%d,\"dur\":20000,\"args\":{\"callable\":\"wide\"}}%s\n",
            i * 30000, i == 2 ? "" : ",");
  }
  fputs("]}\n", f);
  cr_assert_eq(fclose(f), 0);
  char *out = path_of("many.svg");
  char *svg = draw(trace, out, NULL);
  assert_renders(out);
  size_t rects = count(svg, "<rect", NULL);
  cr_assert_lt(rects, 200, "%zu rects for 100003 spans", rects);
  cr_assert_not_null(strstr(svg, "99999 spans narrower than 0.5 px merged into "));
  char *failed = rect_of(svg, "status: LW_TASK_FAILED");
  cr_assert_not_null(strstr(failed, "stroke=\"#d7191c\""), "%s", failed);
  free(failed);
  cr_assert_eq(count(svg, "<title>wide\n", NULL), 3);
  cr_assert_not_null(strstr(svg, ">merged spans &lt; 0.5 px</text>"));
  free(svg);
  free(trace);
  free(out);
}

Test(trace_svg, a_malformed_event_is_skipped_and_counted) {
  char *trace =
      write_text("malformed.json",
                 "{\"traceEvents\":["
                 "{\"ph\":\"X\",\"name\":\"good\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":5},"
                 "{\"ph\":\"X\",\"name\":\"no_ts\",\"pid\":1,\"tid\":1,\"dur\":5}]}");
  char *out = path_of("malformed.svg");
  const char *argv[] = {"lanework", "trace", "svg", trace, "-o", out, NULL};
  char *err = NULL;
  int rc = run(argv, &err);
  cr_assert_not_null(err);
  cr_assert_eq(rc, 0, "%s", err);
  cr_assert_not_null(strstr(err,
                            "1 malformed event ignored (first: event 1 (ph \"X\"): no "
                            "finite ts)"),
                     "%s", err);
  char *svg = read_text(out);
  cr_assert_not_null(strstr(svg, "<title>good\n"));
  cr_assert_null(strstr(svg, "no_ts"));
  cr_assert_not_null(strstr(svg, ">1 malformed event ignored</tspan>"));
  free(err);
  free(svg);
  free(trace);
  free(out);
}

// A failed run leaves nothing named like the output in the folder (no temporary either).
static void assert_no_output(void) {
  DIR *d = opendir(g_dir);
  cr_assert_not_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    cr_assert(strncmp(e->d_name, "out.svg", 7) != 0, "left %s behind", e->d_name);
  }
  closedir(d);
}

static char *expect_exit_2(const char *trace) {
  char *out = path_of("out.svg");
  const char *argv[] = {"lanework", "trace", "svg", trace, "-o", out, NULL};
  char *err = NULL;
  int rc = run(argv, &err);
  cr_assert_eq(rc, 2, "exit %d for %s; stderr: %s", rc, trace, err);
  assert_no_output();
  cr_assert_not_null(strstr(err, trace), "the message names the file: %s", err);
  free(out);
  return err;
}

Test(trace_svg, a_missing_file_exits_2_and_writes_nothing) {
  char *trace = path_of("missing.json");
  char *err = expect_exit_2(trace);
  cr_assert_not_null(strstr(err, "cannot read: No such file or directory"), "%s", err);
  free(err);
  free(trace);
}

Test(trace_svg, invalid_json_exits_2_with_its_line_and_column) {
  char *trace = write_text("bad.json", "{\n \"traceEvents\": [\n  {\"ph\": \"X\",, }\n]}\n");
  char *err = expect_exit_2(trace);
  cr_assert_not_null(strstr(err, ": not valid JSON: line 3, column "), "%s", err);
  free(err);
  free(trace);
  // Valid events but a broken value elsewhere in the document are invalid JSON too.
  trace = write_text("bad2.json", "{\"traceEvents\": [], \"x\": tru}");
  err = expect_exit_2(trace);
  cr_assert_not_null(strstr(err, ": not valid JSON: line 1, column "), "%s", err);
  free(err);
  free(trace);
}

Test(trace_svg, a_trace_without_a_trace_events_array_exits_2) {
  char *trace = write_text("noevents.json", "{\"otherData\": {\"dropped_events\": 0}}");
  char *err = expect_exit_2(trace);
  cr_assert_not_null(strstr(err, "no \"traceEvents\" array in the top-level object"), "%s", err);
  free(err);
  free(trace);
  trace = write_text("object.json", "{\"traceEvents\": {\"ph\": \"X\"}}");
  err = expect_exit_2(trace);
  cr_assert_not_null(strstr(err, "no \"traceEvents\" array (\"traceEvents\" is an object)"), "%s",
                     err);
  free(err);
  free(trace);
}

Test(trace_svg, bad_options_exit_2_and_write_nothing) {
  char *trace = write_text("trace.json", kTrace);
  char *out = path_of("out.svg");
  const char *no_out[] = {"lanework", "trace", "svg", trace, NULL};
  const char *narrow[] = {"lanework", "trace", "svg", trace, "-o", out, "--width", "10", NULL};
  const char *window[] = {"lanework", "trace", "svg",  trace, "-o", out,
                          "--from",   "50",    "--to", "20",  NULL};
  const char *unknown[] = {"lanework", "trace", "png", trace, "-o", out, NULL};
  const char *const *cases[] = {no_out, narrow, window, unknown};
  const char *want[] = {"no output file given", "--width \"10\" is out of range (400..100000)",
                        "--from 50 must be before --to 20", "unknown subcommand 'png'"};
  for (size_t i = 0; i < 4; ++i) {
    char *err = NULL;
    cr_assert_eq(run(cases[i], &err), 2, "case %zu", i);
    cr_assert_not_null(strstr(err, want[i]), "case %zu: %s", i, err);
    free(err);
    assert_no_output();
  }
  free(trace);
  free(out);
}
