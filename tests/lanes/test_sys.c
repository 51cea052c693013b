// tests/lanes/test_sys.c — the condvar deadline helper: condvars wait on CLOCK_MONOTONIC.
#include <errno.h>
#include <pthread.h>

#include "lanes/sys.h"
#include "test_util.h"

// The deadline is a CLOCK_MONOTONIC value (seconds since boot). A condvar on the default
// CLOCK_REALTIME would read it as a moment decades ago and time out at once.
Test(sys, cond_wait_until_honours_a_monotonic_deadline, .timeout = 30) {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv;
  cr_assert_eq(lw__cond_init_monotonic(&cv), 0);
  pthread_mutex_lock(&mu);
  int64_t deadline = lw__now_ns() + 20ll * 1000 * 1000;
  int rc = 0;
  while (rc != ETIMEDOUT) {
    rc = lw__cond_wait_until(&cv, &mu, deadline);
    cr_assert(rc == 0 || rc == ETIMEDOUT, "rc %d", rc);
  }
  cr_assert_geq(lw__now_ns(), deadline, "timed out before the deadline");
  pthread_mutex_unlock(&mu);
  pthread_cond_destroy(&cv);
}

Test(sys, cond_wait_until_in_the_past_times_out_at_once, .timeout = 30) {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv;
  cr_assert_eq(lw__cond_init_monotonic(&cv), 0);
  pthread_mutex_lock(&mu);
  cr_assert_eq(lw__cond_wait_until(&cv, &mu, lw__now_ns() - 1), ETIMEDOUT);
  cr_assert_eq(lw__cond_wait_until(&cv, &mu, 0), ETIMEDOUT);
  pthread_mutex_unlock(&mu);
  pthread_cond_destroy(&cv);
}
