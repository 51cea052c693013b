// tests/parent/mpi_l4_comm.c — the L4's transport (parent/l4_mpi.h) under a real mpirun, run
// by tests/parent/run_mpi.sh. Rank 0 sends task messages (parent/l4_wire.h) to every rank,
// many in flight; each rank answers each with a completion; rank 0 checks every answer. A
// fault is injected by the environment (LW_L4_TEST_FAULT):
//   (none)   every task is answered; everyone says goodbye and finalizes; exit 0;
//   kill:R   rank R SIGKILLs itself at its third task: rank 0 must name it DIED, exit 3;
//   stop:R   rank R SIGSTOPs itself at its third task: rank 0 must name it HUNG, exit 3;
//   kill:0   rank 0 SIGKILLs itself after its first answers: every rank must see the L4 DIED
//            and exit 4.
// What each rank saw goes to stdout, one line each, for the script to check.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lanes/sys.h"
#include "lanework/orch.h"
#include "parent/l4_mpi.h"
#include "parent/l4_wire.h"

#define TASKS_PER_RANK 64
#define TENSOR_BYTES (1u << 20)  // moved rank 1 -> rank 2 directly at the end of a clean run
#define SECOND 1000000000LL

static int g_fault_rank = -1;
static char g_fault_kind[8] = "";

static void parse_fault(void) {
  const char *f = getenv("LW_L4_TEST_FAULT");
  if (!f || !*f) return;
  const char *colon = strchr(f, ':');
  if (!colon || (size_t)(colon - f) >= sizeof(g_fault_kind)) return;
  memcpy(g_fault_kind, f, (size_t)(colon - f));
  g_fault_rank = atoi(colon + 1);
}

static void fail(int rank, const char *what, const lw_error_t *err) {
  printf("rank %d: FAILED %s: %s\n", rank, what, err ? err->message : "");
  fflush(stdout);
  _exit(2);
}

static uint8_t g_buf[1 << 16];

static void send_task_named(lw_l4_comm_t *c, int32_t to, uint64_t seq, uint64_t task_id,
                            const char *name) {
  lw_l4_task_t t;
  memset(&t, 0, sizeof(t));
  t.identity = (lw_mb_identity_t){.run_id = 1, .task_id = task_id, .dispatch_id = task_id,
                                  .generation = 1};
  t.frame = (uint32_t)(task_id % LW_MB_TASK_FRAMES);
  t.kind = LW_L4_TASK_KERNEL;
  t.chip = LW_ANY_CHIP;
  snprintf(t.name, sizeof(t.name), "%s", name);
  uint64_t payload[4] = {task_id, task_id * 2, task_id * 3, task_id * 4};
  t.n_tensors = 1;
  t.tensor[0] = (lw_l4_tensor_t){.tensor_id = task_id, .version = 1, .bytes = sizeof(payload),
                                 .home_rank = 0, .tag = LW_TAG_INOUT,
                                 .flags = LW_L4_TENSOR_INLINE, .data = payload};
  size_t bytes = 0;
  lw_error_t err;
  if (lw__l4_wire_task_encode(&t, 0, seq, g_buf, sizeof(g_buf), &bytes, &err) != LW_OK) {
    fail(0, "encode", &err);
  }
  lw_status_t st = lw__l4_comm_send(c, to, g_buf, bytes, lw__now_ns() + 10 * SECOND, &err);
  if (st != LW_OK) {
    printf("rank 0: send to rank %d ended: %s\n", (int)to, err.message);
    fflush(stdout);
    _exit(3);
  }
}

static void send_task(lw_l4_comm_t *c, int32_t to, uint64_t seq, uint64_t task_id) {
  send_task_named(c, to, seq, task_id, "vector_add");
}

static uint8_t tensor_byte(size_t i) { return (uint8_t)((i * 7u) % 251u); }

static int run_l4(lw_l4_comm_t *c) {
  int32_t n = lw__l4_comm_size(c);
  uint64_t *next_seq_from = calloc((size_t)n, sizeof(uint64_t));
  uint64_t answered = 0, total = (uint64_t)(n - 1) * TASKS_PER_RANK;
  // Every task of every rank in flight at once (the ranks answer as they come).
  for (uint64_t k = 0; k < TASKS_PER_RANK; ++k) {
    for (int32_t r = 1; r < n; ++r) send_task(c, r, k + 1, (uint64_t)r * 1000 + k);
  }
  while (answered < total) {
    if (g_fault_rank == 0 && answered == 8 && strcmp(g_fault_kind, "kill") == 0) {
      raise(SIGKILL);
    }
    int32_t from = -1;
    void *buf = NULL;
    size_t bytes = 0;
    lw_error_t err;
    lw_status_t st = lw__l4_comm_recv(c, -1, &from, &buf, &bytes, lw__now_ns() + SECOND / 10,
                                      &err);
    if (st == LW_NOT_FOUND) {
      // Nothing for a while: a rank may have ended.
      for (int32_t r = 1; r < n; ++r) {
        char why[LW_ERROR_MESSAGE_BYTES];
        if (lw__l4_comm_peer_ended(c, r, why, sizeof(why))) {
          printf("rank 0: lost: %s\n", why);
          fflush(stdout);
          _exit(3);
        }
      }
      continue;
    }
    if (st != LW_OK) fail(0, "receive", &err);
    lw_l4_wire_msg_t m;
    if (lw__l4_wire_decode(buf, bytes, from, ++next_seq_from[from], &m, &err) != LW_OK) {
      fail(0, "decode", &err);
    }
    if (m.header.kind != LW_L4_WIRE_DONE || m.u.done.status != LW_OK ||
        m.u.done.identity.task_id / 1000 != (uint64_t)from || m.u.done.n_produced != 1 ||
        m.u.done.produced[0].version != 2 ||
        *(const uint64_t *)m.u.done.produced[0].data != m.u.done.identity.task_id + 1) {
      printf("rank 0: FAILED wrong answer from rank %d for task %llu\n", (int)from,
             (unsigned long long)m.u.done.identity.task_id);
      _exit(2);
    }
    free(buf);
    answered++;
  }
  printf("rank 0: ok %llu tasks answered by %d ranks\n", (unsigned long long)answered,
         (int)n - 1);
  // A tensor from rank 1 to rank 2, directly: rank 2 checks every byte and answers.
  send_task_named(c, 2, TASKS_PER_RANK + 1, 9002, "recv_tensor");
  send_task_named(c, 1, TASKS_PER_RANK + 1, 9001, "send_tensor");
  int32_t from = -1;
  void *buf = NULL;
  size_t bytes = 0;
  lw_error_t err;
  if (lw__l4_comm_recv(c, 2, &from, &buf, &bytes, lw__now_ns() + 30 * SECOND, &err) != LW_OK) {
    fail(0, "receive the tensor's answer", &err);
  }
  lw_l4_wire_msg_t m;
  if (lw__l4_wire_decode(buf, bytes, 2, ++next_seq_from[2], &m, &err) != LW_OK) {
    fail(0, "decode", &err);
  }
  free(buf);
  if (m.u.done.status != LW_OK) {
    printf("rank 0: FAILED the tensor: %s\n", m.u.done.error);
    _exit(2);
  }
  printf("rank 0: ok a %u-byte tensor moved rank 1 -> rank 2\n", TENSOR_BYTES);
  fflush(stdout);
  free(next_seq_from);
  return 0;
}

static int run_rank(lw_l4_comm_t *c) {
  int32_t me = lw__l4_comm_rank(c);
  uint64_t seq_in = 0, seq_out = 0, got = 0;
  for (;;) {
    void *buf = NULL;
    size_t bytes = 0;
    int32_t from = -1;
    lw_error_t err;
    lw_status_t st = lw__l4_comm_recv(c, 0, &from, &buf, &bytes, lw__now_ns() + SECOND / 10,
                                      &err);
    if (st == LW_NOT_FOUND) continue;
    if (st == LW_UNAVAILABLE) {
      char why[LW_ERROR_MESSAGE_BYTES] = "";
      (void)lw__l4_comm_peer_ended(c, 0, why, sizeof(why));
      if (strstr(why, "said goodbye")) {
        printf("rank %d: the L4 said goodbye after %llu tasks\n", (int)me,
               (unsigned long long)got);
        fflush(stdout);
        return 0;
      }
      printf("rank %d: lost the L4: %s\n", (int)me, why);
      fflush(stdout);
      _exit(4);
    }
    if (st != LW_OK) fail(me, "receive", &err);
    lw_l4_wire_msg_t m;
    if (lw__l4_wire_decode(buf, bytes, 0, ++seq_in, &m, &err) != LW_OK) fail(me, "decode", &err);
    if (m.header.kind != LW_L4_WIRE_TASK) fail(me, "a message that is not a task", NULL);
    if (strcmp(m.u.task.name, "send_tensor") == 0 || strcmp(m.u.task.name, "recv_tensor") == 0) {
      bool send = m.u.task.name[0] == 's';
      int32_t peer = me == 1 ? 2 : 1;
      uint8_t *t = malloc(TENSOR_BYTES);
      for (size_t i = 0; send && i < TENSOR_BYTES; ++i) t[i] = tensor_byte(i);
      lw_status_t ts = send ? lw__l4_comm_send_tensor(c, peer, t, TENSOR_BYTES,
                                                      lw__now_ns() + 30 * SECOND, &err)
                            : lw__l4_comm_recv_tensor(c, peer, t, TENSOR_BYTES,
                                                      lw__now_ns() + 30 * SECOND, &err);
      if (ts != LW_OK) fail(me, send ? "tensor send" : "tensor receive", &err);
      free(buf);
      if (send) {
        free(t);
        continue;
      }
      lw_l4_done_t d;
      memset(&d, 0, sizeof(d));
      d.identity = m.u.task.identity;
      d.frame = m.u.task.frame;
      d.status = LW_OK;
      for (size_t i = 0; i < TENSOR_BYTES; ++i) {
        if (t[i] != tensor_byte(i)) {
          d.status = LW_INTERNAL;
          snprintf(d.error, sizeof(d.error), "byte %zu is %u, not %u", i, t[i], tensor_byte(i));
          break;
        }
      }
      free(t);
      uint8_t reply[1024];
      size_t n = 0;
      if (lw__l4_wire_done_encode(&d, me, ++seq_out, reply, sizeof(reply), &n, &err) != LW_OK ||
          lw__l4_comm_send(c, 0, reply, n, lw__now_ns() + 10 * SECOND, &err) != LW_OK) {
        fail(me, "answer the tensor", &err);
      }
      continue;
    }
    if (++got == 3 && g_fault_rank == me) {
      raise(strcmp(g_fault_kind, "stop") == 0 ? SIGSTOP : SIGKILL);
    }
    const uint64_t *in = m.u.task.tensor[0].data;
    uint64_t out[4] = {in[0] + 1, in[1], in[2], in[3]};
    lw_l4_done_t d;
    memset(&d, 0, sizeof(d));
    d.identity = m.u.task.identity;
    d.frame = m.u.task.frame;
    d.status = LW_OK;
    d.n_produced = 1;
    d.produced[0] = (lw_l4_tensor_t){.tensor_id = m.u.task.tensor[0].tensor_id,
                                     .version = m.u.task.tensor[0].version + 1,
                                     .bytes = sizeof(out), .home_rank = -1,
                                     .flags = LW_L4_TENSOR_INLINE, .data = out};
    free(buf);
    uint8_t reply[1024];
    size_t n = 0;
    if (lw__l4_wire_done_encode(&d, me, ++seq_out, reply, sizeof(reply), &n, &err) != LW_OK) {
      fail(me, "encode", &err);
    }
    st = lw__l4_comm_send(c, 0, reply, n, lw__now_ns() + 10 * SECOND, &err);
    if (st == LW_UNAVAILABLE) {
      printf("rank %d: lost the L4: %s\n", (int)me, err.message);
      fflush(stdout);
      _exit(4);
    }
    if (st != LW_OK) fail(me, "send", &err);
  }
}

int main(int argc, char **argv) {
  parse_fault();
  lw_l4_comm_config_t cfg = {.startup_deadline_ns = lw__now_ns() + 20 * SECOND,
                             .period_ns = SECOND / 20, .hung_ns = SECOND / 2,
                             .advertise = "127.0.0.1"};
  lw_l4_comm_t *c = NULL;
  lw_error_t err;
  if (lw__l4_comm_open(&argc, &argv, &cfg, &c, &err) != LW_OK) fail(-1, "open", &err);
  int rc = lw__l4_comm_rank(c) == 0 ? run_l4(c) : run_rank(c);
  bool finalized = lw__l4_comm_close(c, true);
  if (!finalized) {
    printf("rank: MPI not finalized\n");
    fflush(stdout);
    _exit(5);
  }
  return rc;
}
