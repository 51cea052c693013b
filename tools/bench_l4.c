// tools/bench_l4.c — lanework-bench-l4: what the L4's transport costs, under mpirun (DESIGN §11,
// docs/l4.md). Built where CMake finds MPI, into libexec beside the fork server; run as
//   mpirun -np 3 [--oversubscribe --bind-to none --mca btl self,vader] lanework-bench-l4 [MODE]
// Rank 0 (the L4) drives; ranks 1 and 2 serve. MODE:
//   (none)  startup, a task message's round trip to rank 1 and back (p50/p99), the marginal cost
//           per message with 128 in flight, a 4 MB tensor moved rank 1 -> rank 2 directly (never
//           through rank 0; from and into the tensor's own buffers, lw__l4_comm_*_tensor,
//           timed from rank 0's two requests to rank 2's answer), and the clean shutdown;
//   death   rank 0 tells rank 2 to SIGKILL itself and measures until rank 2's loss is reported;
//   hung    the same with SIGSTOP (the liveness channel's default 2 s bound);
//   tasks, tasks-death, tasks-hung: remote tasks through the L4 worker (tools/bench_l4_tasks.c).
// The first three are the transport's figures, under the L4 worker. One JSON object per run on
// rank 0's stdout: {"bench":"l4", "mode":..., ...}.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "lanework/orch.h"
#include "parent/l4_mpi.h"
#include "parent/l4_wire.h"
#include "tools/bench_l4_tasks.h"

#define SECOND 1000000000LL
#define ROUND_TRIPS 2000
#define IN_FLIGHT 128
#define BURSTS 20
#define TENSOR_BYTES (4u << 20)
#define TENSOR_MOVES 20

// Control words rank 0 sends in a CANCEL message's frame field (the bench's own protocol on
// top of the messages): what the receiving rank does next.
enum { CMD_ECHO = 0, CMD_SEND_TENSOR = 1, CMD_RECV_TENSOR = 2, CMD_DIE = 3, CMD_STOP = 4 };

static uint8_t g_msg[1 << 16];
static uint64_t g_seq_to[3], g_seq_from[3];

static void die(const char *what, const lw_error_t *err) {
  fprintf(stderr, "lanework-bench-l4: %s: %s\n", what, err ? err->message : "");
  _exit(2);
}

static size_t task_msg(int32_t from, int32_t to, uint64_t id, uint32_t cmd) {
  lw_l4_task_t t;
  memset(&t, 0, sizeof(t));
  t.identity = (lw_mb_identity_t){.run_id = 1, .task_id = id, .dispatch_id = id, .generation = 1};
  t.frame = cmd;
  t.kind = LW_L4_TASK_KERNEL;
  t.chip = LW_ANY_CHIP;
  snprintf(t.name, sizeof(t.name), "empty");
  size_t n = 0;
  lw_error_t err;
  if (lw__l4_wire_task_encode(&t, from, ++g_seq_to[to], g_msg, sizeof(g_msg), &n, &err) != LW_OK) {
    die("encode", &err);
  }
  return n;
}

static size_t done_msg(const lw_l4_task_t *t, int32_t from, int32_t to) {
  lw_l4_done_t d;
  memset(&d, 0, sizeof(d));
  d.identity = t->identity;
  d.frame = t->frame;
  d.status = LW_OK;
  size_t n = 0;
  lw_error_t err;
  if (lw__l4_wire_done_encode(&d, from, ++g_seq_to[to], g_msg, sizeof(g_msg), &n, &err) != LW_OK) {
    die("encode", &err);
  }
  return n;
}

static void send_or_die(lw_l4_comm_t *c, int32_t to, size_t n) {
  lw_error_t err;
  if (lw__l4_comm_send(c, to, g_msg, n, lw__now_ns() + 30 * SECOND, &err) != LW_OK) {
    die("send", &err);
  }
}

// The next message from `from` (any rank when -1), decoded; its buffer in *buf (free it).
static lw_l4_wire_msg_t recv_or_die(lw_l4_comm_t *c, int32_t from, int32_t *out_from, void **buf) {
  size_t bytes = 0;
  int32_t got = -1;
  lw_error_t err;
  if (lw__l4_comm_recv(c, from, &got, buf, &bytes, lw__now_ns() + 30 * SECOND, &err) != LW_OK) {
    die("receive", &err);
  }
  lw_l4_wire_msg_t m;
  if (lw__l4_wire_decode(*buf, bytes, got, ++g_seq_from[got], &m, &err) != LW_OK) {
    die("decode", &err);
  }
  if (out_from) *out_from = got;
  return m;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static void serve(lw_l4_comm_t *c) {
  int32_t me = lw__l4_comm_rank(c);
  uint8_t *tensor = malloc(TENSOR_BYTES);
  if (!tensor) die("out of memory", NULL);
  memset(tensor, me, TENSOR_BYTES);
  for (;;) {
    size_t bytes = 0;
    void *buf = NULL;
    int32_t from = -1;
    lw_error_t err;
    lw_status_t st = lw__l4_comm_recv(c, -1, &from, &buf, &bytes, lw__now_ns() + SECOND / 10, &err);
    if (st == LW_NOT_FOUND) {
      if (lw__l4_comm_peer_ended(c, 0, NULL, 0)) break;
      continue;
    }
    if (st != LW_OK) die("serve: receive", &err);
    if (from != 0) die("serve: a message from another L3 rank", NULL);
    lw_l4_wire_msg_t m;
    if (lw__l4_wire_decode(buf, bytes, 0, ++g_seq_from[0], &m, &err) != LW_OK) die("decode", &err);
    free(buf);
    lw_l4_task_t t = m.u.task;
    switch (t.frame) {
      case CMD_ECHO:
        send_or_die(c, 0, done_msg(&t, me, 0));
        break;
      case CMD_SEND_TENSOR:  // to the other rank, directly, from the tensor's own buffer
        if (lw__l4_comm_send_tensor(c, me == 1 ? 2 : 1, tensor, TENSOR_BYTES,
                                    lw__now_ns() + 30 * SECOND, &err) != LW_OK) {
          die("tensor send", &err);
        }
        break;
      case CMD_RECV_TENSOR: {  // into the tensor's own buffer, then tell rank 0
        if (lw__l4_comm_recv_tensor(c, me == 1 ? 2 : 1, tensor, TENSOR_BYTES,
                                    lw__now_ns() + 30 * SECOND, &err) != LW_OK) {
          die("tensor receive", &err);
        }
        lw_l4_task_t got = {.identity = {.task_id = TENSOR_BYTES}};
        send_or_die(c, 0, done_msg(&got, me, 0));
        break;
      }
      case CMD_DIE:
        raise(SIGKILL);
        break;
      case CMD_STOP:
        raise(SIGSTOP);
        break;
      default:
        break;
    }
  }
  free(tensor);
}

static void run_figures(lw_l4_comm_t *c, int64_t startup_ns) {
  // Round trips to rank 1.
  uint64_t *rt = malloc(sizeof(uint64_t) * ROUND_TRIPS);
  for (int i = 0; i < ROUND_TRIPS; ++i) {
    int64_t t0 = lw__now_ns();
    send_or_die(c, 1, task_msg(0, 1, (uint64_t)i + 1, CMD_ECHO));
    void *buf = NULL;
    (void)recv_or_die(c, 1, NULL, &buf);
    free(buf);
    rt[i] = (uint64_t)(lw__now_ns() - t0);
  }
  qsort(rt, ROUND_TRIPS, sizeof(uint64_t), cmp_u64);
  double p50 = (double)rt[ROUND_TRIPS / 2] / 1e3, p99 = (double)rt[ROUND_TRIPS * 99 / 100] / 1e3;
  free(rt);
  // Many in flight, to both ranks: the marginal cost per message (median of the bursts).
  double per[BURSTS];
  for (int b = 0; b < BURSTS; ++b) {
    int64_t t0 = lw__now_ns();
    for (int i = 0; i < IN_FLIGHT; ++i) {
      int32_t to = 1 + i % 2;
      send_or_die(c, to, task_msg(0, to, (uint64_t)i, CMD_ECHO));
    }
    for (int i = 0; i < IN_FLIGHT; ++i) {
      void *buf = NULL;
      (void)recv_or_die(c, -1, NULL, &buf);
      free(buf);
    }
    per[b] = (double)(lw__now_ns() - t0) / 1e3 / IN_FLIGHT;
  }
  qsort(per, BURSTS, sizeof(double), lw__bench_l4_cmp_double);
  // A 4 MB tensor from rank 1 to rank 2, directly: rank 0 asks, rank 2 says when it arrived.
  double gbs[TENSOR_MOVES];
  for (int i = 0; i < TENSOR_MOVES; ++i) {
    int64_t t0 = lw__now_ns();
    send_or_die(c, 2, task_msg(0, 2, (uint64_t)i, CMD_RECV_TENSOR));
    send_or_die(c, 1, task_msg(0, 1, (uint64_t)i, CMD_SEND_TENSOR));
    void *buf = NULL;
    lw_l4_wire_msg_t m = recv_or_die(c, 2, NULL, &buf);
    free(buf);
    if (m.u.done.identity.task_id != TENSOR_BYTES) die("tensor size", NULL);
    gbs[i] = (double)TENSOR_BYTES / (double)(lw__now_ns() - t0);
  }
  qsort(gbs, TENSOR_MOVES, sizeof(double), lw__bench_l4_cmp_double);
  int64_t t_close = lw__now_ns();
  bool finalized = lw__l4_comm_close(c, true);
  double shutdown_ms = (double)(lw__now_ns() - t_close) / 1e6;
  printf(
      "{\"bench\": \"l4\", \"mode\": \"figures\", \"ranks\": 3, \"startup_ms\": %.1f, "
      "\"round_trip_p50_us\": %.2f, \"round_trip_p99_us\": %.2f, "
      "\"per_message_in_flight_us\": %.2f, \"in_flight\": %d, "
      "\"tensor_4mb_gbs\": %.2f, \"tensor_4mb_gbs_min\": %.2f, \"shutdown_ms\": %.1f, "
      "\"finalized\": %s, \"through_l4\": false}\n",
      (double)startup_ns / 1e6, p50, p99, per[BURSTS / 2], IN_FLIGHT, gbs[TENSOR_MOVES / 2], gbs[0],
      shutdown_ms, finalized ? "true" : "false");
  fflush(stdout);
}

static void run_fault(lw_l4_comm_t *c, bool stop) {
  int64_t t0 = lw__now_ns();
  send_or_die(c, 2, task_msg(0, 2, 1, stop ? CMD_STOP : CMD_DIE));
  char why[LW_ERROR_MESSAGE_BYTES] = "";
  while (!lw__l4_comm_peer_ended(c, 2, why, sizeof(why))) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  double ms = (double)(lw__now_ns() - t0) / 1e6;
  // The report's text, with its quotes made plain for the JSON string.
  for (char *p = why; *p; ++p) {
    if (*p == '"' || *p == '\\') *p = '\'';
  }
  printf("{\"bench\": \"l4\", \"mode\": \"%s\", \"to_error_ms\": %.2f, \"error\": \"%s\"}\n",
         stop ? "hung" : "death", ms, why);
  fflush(stdout);
  // Without MPI_Finalize: mpirun then ends the job, the stopped or dead rank included.
  _exit(0);
}

int main(int argc, char **argv) {
  int64_t t_start = lw__now_ns();
  const char *mode = argc > 1 ? argv[1] : "figures";
  if (strncmp(mode, "tasks", 5) == 0) return lw__bench_l4_tasks(&argc, &argv, mode);
  lw_l4_comm_config_t cfg = {.startup_deadline_ns = t_start + 30 * SECOND};
  lw_l4_comm_t *c = NULL;
  lw_error_t err;
  if (lw__l4_comm_open(&argc, &argv, &cfg, &c, &err) != LW_OK) die("open", &err);
  if (lw__l4_comm_size(c) != 3) {
    fprintf(stderr, "lanework-bench-l4: run it as mpirun -np 3 (got %d ranks)\n",
            (int)lw__l4_comm_size(c));
    _exit(2);
  }
  int64_t startup = lw__now_ns() - t_start;
  if (lw__l4_comm_rank(c) != 0) {
    serve(c);
    (void)lw__l4_comm_close(c, true);
    return 0;
  }
  if (strcmp(mode, "death") == 0) run_fault(c, false);
  if (strcmp(mode, "hung") == 0) run_fault(c, true);
  run_figures(c, startup);
  return 0;
}
