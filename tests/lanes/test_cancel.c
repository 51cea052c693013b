// tests/lanes/test_cancel.c — the seed 000 cancel-word protocol.
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lanes/cancel.h"
#include "lanework/kernel.h"

Test(cancel, begin_gives_even_strictly_increasing_generations) {
  lw_cancel_word_t word = 0;
  uint64_t prev = 0;
  for (int i = 0; i < 100; ++i) {
    uint64_t g = lw__cancel_begin(&word);
    cr_assert_eq(g % 2, 0, "generation %llu is odd", (unsigned long long)g);
    cr_assert_gt(g, prev);
    cr_assert_eq(atomic_load(&word), g);
    prev = g;
  }
}

Test(cancel, begin_after_a_cancelled_run_steps_past_the_cancel_bit) {
  lw_cancel_word_t word = 0;
  uint64_t g1 = lw__cancel_begin(&word);
  cr_assert(lw__cancel_request(&word, g1));
  uint64_t g2 = lw__cancel_begin(&word);
  cr_assert_eq(g2 % 2, 0);
  cr_assert_gt(g2, g1 | 1u);
  cr_assert_not(lw__cancel_is_requested(&word, g2));
}

Test(cancel, request_with_current_generation_sets_bit0_and_the_kernel_sees_it) {
  lw_cancel_word_t word = 0;
  uint64_t g = lw__cancel_begin(&word);
  lw_kernel_ctx_t ctx = {.abi_version = LW_KERNEL_ABI_VERSION, .cancel_word = &word,
                         .generation = g};
  cr_assert_not(lw_kernel_should_stop(&ctx));
  cr_assert_not(lw__cancel_is_requested(&word, g));

  cr_assert(lw__cancel_request(&word, g));
  cr_assert_eq(atomic_load(&word), g | 1u);
  cr_assert(lw__cancel_is_requested(&word, g));
  cr_assert(lw_kernel_should_stop(&ctx));
}

Test(cancel, stale_cancel_of_an_earlier_run_hits_nothing) {
  lw_cancel_word_t word = 0;
  uint64_t old_gen = lw__cancel_begin(&word);
  uint64_t cur_gen = lw__cancel_begin(&word);
  cr_assert_not(lw__cancel_request(&word, old_gen));
  cr_assert_eq(atomic_load(&word), cur_gen);
  cr_assert_not(lw__cancel_is_requested(&word, cur_gen));
}

Test(cancel, second_cancel_of_the_same_run_returns_false) {
  lw_cancel_word_t word = 0;
  uint64_t g = lw__cancel_begin(&word);
  cr_assert(lw__cancel_request(&word, g));
  cr_assert_not(lw__cancel_request(&word, g));
  cr_assert_not(lw__cancel_request(&word, g | 1u), "an odd (cancelled) value is never live");
  cr_assert_eq(atomic_load(&word), g | 1u);
}

typedef struct racer {
  lw_cancel_word_t *word;
  uint64_t gen;
  pthread_barrier_t *barrier;
  bool won;
} racer_t;

static void *racer_main(void *p) {
  racer_t *r = p;
  pthread_barrier_wait(r->barrier);
  r->won = lw__cancel_request(r->word, r->gen);
  return NULL;
}

#define N_RACERS 8

Test(cancel, exactly_one_of_many_racing_cancellers_wins, .timeout = 10) {
  lw_cancel_word_t word = 0;
  uint64_t g = lw__cancel_begin(&word);
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, N_RACERS);
  pthread_t th[N_RACERS];
  racer_t r[N_RACERS];
  for (int i = 0; i < N_RACERS; ++i) {
    r[i] = (racer_t){&word, g, &barrier, false};
    cr_assert_eq(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
  }
  int winners = 0;
  for (int i = 0; i < N_RACERS; ++i) {
    pthread_join(th[i], NULL);
    winners += r[i].won ? 1 : 0;
  }
  pthread_barrier_destroy(&barrier);
  cr_assert_eq(winners, 1);
  cr_assert(lw__cancel_is_requested(&word, g));
}

typedef struct nap_arg {
  lw_cancel_word_t *word;
  uint64_t gen;
  _Atomic pid_t tid;
} nap_arg_t;

static void *nap_a_minute(void *p) {
  nap_arg_t *a = p;
  atomic_store(&a->tid, (pid_t)syscall(SYS_gettid));
  // A signal or a spurious wake may end a nap early: nap until the word says cancelled.
  while (!lw__cancel_is_requested(a->word, a->gen)) {
    lw__cancel_nap(a->word, a->gen, 60ll * 1000 * 1000 * 1000);
  }
  return NULL;
}

// The nap of a run lane waiting on a device: a request ends it (the test's timeout is far
// below the nap's minute), from this process or, through the shared futex, from another.
Test(cancel, a_request_ends_a_nap_on_the_word, .timeout = 10) {
  static lw_cancel_word_t word;
  nap_arg_t a = {.word = &word, .gen = lw__cancel_begin(&word)};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, nap_a_minute, &a), 0);
  while (!atomic_load(&a.tid)) sched_yield();
  // Asleep ('S': the nap is the thread's only sleep) before the request, so the wake is what
  // ends it rather than the word's change seen before it slept.
  char path[64], stat[256];
  snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)atomic_load(&a.tid));
  for (;;) {
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *state = strrchr(stat, ')');
    if (state && state[1] == ' ' && state[2] == 'S') break;
    sched_yield();
  }
  cr_assert(lw__cancel_request(&word, a.gen));
  cr_assert_eq(pthread_join(t, NULL), 0);
}

Test(cancel, a_nap_on_a_cancelled_run_returns_at_once, .timeout = 10) {
  static lw_cancel_word_t word;
  uint64_t gen = lw__cancel_begin(&word);
  cr_assert(lw__cancel_request(&word, gen));
  lw__cancel_nap(&word, gen, 60ll * 1000 * 1000 * 1000);
  lw__cancel_nap(&word, lw__cancel_begin(&word) - 2, 60ll * 1000 * 1000 * 1000);  // stale
}
