// parent/l4_liveness.c — the L4's liveness channel: heartbeats over one TCP connection per L3
// rank, both ways, on threads that never call MPI. Contract in parent/l4_liveness.h.
#include "parent/l4_liveness.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lanes/error.h"
#include "lanes/log.h"
#include "lanes/sys.h"
#include "parent/forkserver.h"
#include "parent/thread.h"

// The wire is little-endian and these are the only hosts lanework builds for.
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "lw_l4_msg_t is little-endian");

#define MSG_BYTES sizeof(lw_l4_msg_t)
#define CONNECT_RETRY_NS 10000000LL  // 10 ms between tries while the L4 is not listening yet

// ---------------------------------------------------------------------------------------------
// Messages and connections (both sides)

static void host_name(char *out, size_t bytes) {
  if (gethostname(out, bytes) != 0) snprintf(out, bytes, "unknown-host");
  out[bytes - 1] = '\0';
}

static void msg_make(lw_l4_msg_t *m, lw_l4_msg_kind_t kind, int32_t rank, uint64_t seq) {
  memset(m, 0, sizeof(*m));
  m->magic = LW_L4_MSG_MAGIC;
  m->version = LW_L4_MSG_VERSION;
  m->kind = (uint16_t)kind;
  m->rank = rank;
  m->pid = (int32_t)getpid();
  m->seq = seq;
  if (kind == LW_L4_MSG_HELLO) host_name(m->host, sizeof(m->host));
}

// One end of a liveness connection: a message being read and one being written, each possibly
// in parts (the socket is non-blocking).
typedef struct link {
  int fd;
  uint8_t in[MSG_BYTES];
  size_t in_off;
  lw_l4_msg_t out;
  size_t out_off;     // bytes of out already sent
  bool out_pending;   // out is not all sent
  int64_t last_rx;    // when a whole message last arrived (lw__now_ns)
  bool hello;         // its HELLO arrived
  bool bye;           // its BYE arrived: the EOF after it is a goodbye
} link_t;

// Sends what is pending, then m (NULL: only what is pending). 0: done or queued behind a full
// socket (the peer is slow; its silence is the other side's to judge); -errno: broken.
static int link_send(link_t *l, const lw_l4_msg_t *m) {
  for (;;) {
    if (!l->out_pending) {
      if (!m) return 0;
      l->out = *m;
      l->out_off = 0;
      l->out_pending = true;
      m = NULL;
    }
    ssize_t n = send(l->fd, (const uint8_t *)&l->out + l->out_off, MSG_BYTES - l->out_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      // A beat that does not fit is dropped, not queued: the next period sends a fresh one.
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      return -errno;
    }
    l->out_off += (size_t)n;
    if (l->out_off == MSG_BYTES) l->out_pending = false;
  }
}

typedef enum { READ_AGAIN, READ_MSG, READ_EOF, READ_ERROR } read_result_t;

// Reads until one whole message (READ_MSG, in *m), nothing more for now (READ_AGAIN), the end
// of the stream (READ_EOF) or an error (READ_ERROR, errno in *e).
static read_result_t link_read(link_t *l, lw_l4_msg_t *m, int *e) {
  for (;;) {
    ssize_t n = recv(l->fd, l->in + l->in_off, MSG_BYTES - l->in_off, MSG_DONTWAIT);
    if (n == 0) return READ_EOF;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return READ_AGAIN;
      *e = errno;
      return READ_ERROR;
    }
    l->in_off += (size_t)n;
    if (l->in_off == MSG_BYTES) {
      memcpy(m, l->in, MSG_BYTES);
      l->in_off = 0;
      m->host[sizeof(m->host) - 1] = '\0';  // the peer's text: terminated here
      return READ_MSG;
    }
  }
}

// What is wrong with m from the peer, or NULL: the checks both sides make.
static const char *msg_problem(const lw_l4_msg_t *m, bool hello_seen) {
  if (m->magic != LW_L4_MSG_MAGIC) return "a message without the liveness magic";
  if (m->version != LW_L4_MSG_VERSION) return "a message of another protocol version";
  if (m->kind != LW_L4_MSG_HELLO && m->kind != LW_L4_MSG_BEAT && m->kind != LW_L4_MSG_BYE) {
    return "a message of unknown kind";
  }
  if (!hello_seen && m->kind != LW_L4_MSG_HELLO) return "a message before its HELLO";
  if (hello_seen && m->kind == LW_L4_MSG_HELLO) return "a second HELLO";
  return NULL;
}

static int64_t ms_of(int64_t ns) { return ns / 1000000; }

// poll/epoll timeout in ms for a deadline: rounded up, so a wake-up is never early.
static int timeout_ms(int64_t deadline, int64_t now) {
  if (deadline <= now) return 0;
  int64_t ms = (deadline - now + 999999) / 1000000;
  return ms > 60000 ? 60000 : (int)ms;
}

static int64_t period_or_default(int64_t v) { return v > 0 ? v : LW_L4_PERIOD_NS_DEFAULT; }
static int64_t hung_or_default(int64_t v, int64_t period) {
  int64_t h = v > 0 ? v : LW_L4_HUNG_NS_DEFAULT;
  return h < 2 * period ? 2 * period : h;
}

static void tcp_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// How a peer's connection ended without its BYE (link_read gave rr, with errno e for an
// error), as the end's message words it after "<who> ".
static void died_what(read_result_t rr, int e, char *out, size_t bytes) {
  snprintf(out, bytes,
           rr == READ_EOF ? "died: its liveness connection closed without a goodbye "
                            "(the process exited or was killed)"
                          : "died: its liveness connection failed (%s)",
           strerror(e));
}

// lw__thread_stop's wake: the thread's stop eventfd (ctx points at it).
static void wake_stop_fd(void *ctx) {
  uint64_t one = 1;
  ssize_t n = write(*(const int *)ctx, &one, sizeof(one));
  (void)n;
}

// ---------------------------------------------------------------------------------------------
// The L4's side

typedef enum { RANK_WAITING = 0, RANK_READY, RANK_LOST, RANK_GONE } rank_state_t;

typedef struct rank_rec {
  rank_state_t state;              // under w->mu
  lw_l4_rank_info_t info;          // under w->mu
  char lost[LW_ERROR_MESSAGE_BYTES];  // how it ended (RANK_LOST, RANK_GONE), under w->mu
} rank_rec_t;

typedef struct conn {
  link_t link;
  int32_t rank;  // -1 until its HELLO
  bool closed;
} conn_t;

struct lw_l4_watch {
  uint32_t n_ranks;
  int64_t period_ns, hung_ns;
  lw_l4_end_fn end;
  void *ctx;
  char address[LW_L4_ADDRESS_BYTES];
  int listen_fd, stop_fd, epoll_fd;
  lw_thread_t thread;
  uint64_t seq;
  // Connections, the thread's own: at most max_conns at once (every rank, and as many
  // strangers that have not said HELLO yet).
  conn_t **conns;
  uint32_t n_conns, max_conns;
  pthread_mutex_t mu;  // ranks[] (a leaf)
  pthread_cond_t cv;   // a rank became READY or LOST
  rank_rec_t *ranks;   // n_ranks, index rank - 1
};

#define TAG_LISTEN ((uint64_t)1)
#define TAG_STOP ((uint64_t)2)

static void conn_close(lw_l4_watch_t *w, conn_t *c) {
  if (c->closed) return;
  c->closed = true;
  (void)epoll_ctl(w->epoll_fd, EPOLL_CTL_DEL, c->link.fd, NULL);
  close(c->link.fd);
}

// Reports the end of c's rank (once), closes its connection, and tells waiters.
static void rank_end(lw_l4_watch_t *w, conn_t *c, lw_l4_end_t why, const char *what) {
  int32_t rank = c->rank;
  conn_close(w, c);
  if (rank < 1) return;  // a stranger: nothing to report
  char msg[LW_ERROR_MESSAGE_BYTES];
  pthread_mutex_lock(&w->mu);
  rank_rec_t *r = &w->ranks[rank - 1];
  if (r->state == RANK_LOST || r->state == RANK_GONE) {
    pthread_mutex_unlock(&w->mu);
    return;
  }
  snprintf(msg, sizeof(msg), "rank %d (host %s, pid %d) %s", rank,
           r->info.host[0] ? r->info.host : "?", (int)r->info.pid, what);
  r->state = why == LW_L4_END_GOODBYE ? RANK_GONE : RANK_LOST;
  snprintf(r->lost, sizeof(r->lost), "%s", msg);
  pthread_cond_broadcast(&w->cv);
  pthread_mutex_unlock(&w->mu);
  if (w->end) w->end(w->ctx, rank, why, msg);
}

static void stranger_problem(lw_l4_watch_t *w, conn_t *c, const char *problem) {
  // Before its HELLO a connection names no rank: it is closed and counts for nothing.
  lw__log(LW_LOG_WARN, "l4: a liveness connection sent %s; closed", problem);
  conn_close(w, c);
}

static void on_hello(lw_l4_watch_t *w, conn_t *c, const lw_l4_msg_t *m) {
  char what[160];
  if (m->rank < 1 || (uint32_t)m->rank > w->n_ranks) {
    snprintf(what, sizeof(what), "a HELLO from rank %d (ranks are 1..%u)", (int)m->rank,
             w->n_ranks);
    stranger_problem(w, c, what);
    return;
  }
  pthread_mutex_lock(&w->mu);
  rank_rec_t *r = &w->ranks[m->rank - 1];
  bool taken = r->state != RANK_WAITING;
  if (!taken) {
    r->state = RANK_READY;
    r->info.pid = m->pid;
    snprintf(r->info.host, sizeof(r->info.host), "%s", m->host);
    pthread_cond_broadcast(&w->cv);
  }
  pthread_mutex_unlock(&w->mu);
  if (taken) {
    snprintf(what, sizeof(what), "a HELLO for rank %d, which connected before", (int)m->rank);
    stranger_problem(w, c, what);
    return;
  }
  c->rank = m->rank;
  c->link.hello = true;
  lw_l4_msg_t hello;
  msg_make(&hello, LW_L4_MSG_HELLO, 0, 0);
  if (link_send(&c->link, &hello) < 0) {
    rank_end(w, c, LW_L4_END_DIED, "died: its liveness connection broke");
  }
}

static void on_readable(lw_l4_watch_t *w, conn_t *c, int64_t now) {
  for (;;) {
    lw_l4_msg_t m;
    int e = 0;
    read_result_t rr = link_read(&c->link, &m, &e);
    if (rr == READ_AGAIN) return;
    if (rr == READ_EOF || rr == READ_ERROR) {
      if (c->link.bye) {
        rank_end(w, c, LW_L4_END_GOODBYE, "said goodbye and closed its liveness connection");
      } else if (c->rank < 1) {
        conn_close(w, c);  // a stranger that left
      } else {
        char what[160];
        died_what(rr, e, what, sizeof(what));
        rank_end(w, c, LW_L4_END_DIED, what);
      }
      return;
    }
    const char *problem = msg_problem(&m, c->link.hello);
    if (!problem && c->link.hello && m.rank != c->rank) problem = "a message naming another rank";
    if (problem) {
      if (c->rank < 1) {
        stranger_problem(w, c, problem);
      } else {
        char what[200];
        snprintf(what, sizeof(what), "broke the liveness protocol: it sent %s", problem);
        rank_end(w, c, LW_L4_END_VIOLATION, what);
      }
      return;
    }
    c->link.last_rx = now;
    if (m.kind == LW_L4_MSG_HELLO) {
      on_hello(w, c, &m);
      if (c->closed) return;
    } else if (m.kind == LW_L4_MSG_BYE) {
      c->link.bye = true;
    }
  }
}

static void accept_all(lw_l4_watch_t *w, int64_t now) {
  for (;;) {
    int fd = accept4(w->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;  // EAGAIN, or a connection that failed before we took it
    }
    fd = lw__forkserver_fd_above_stdio(fd);
    if (fd < 0) continue;
    // Forget closed connections first; refuse beyond the bound.
    uint32_t k = 0;
    for (uint32_t i = 0; i < w->n_conns; ++i) {
      if (w->conns[i]->closed) {
        free(w->conns[i]);
      } else {
        w->conns[k++] = w->conns[i];
      }
    }
    w->n_conns = k;
    conn_t *c = w->n_conns < w->max_conns ? calloc(1, sizeof(*c)) : NULL;
    if (!c) {
      close(fd);
      continue;
    }
    tcp_nodelay(fd);
    c->link.fd = fd;
    c->link.last_rx = now;
    c->rank = -1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
    if (epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      free(c);
      continue;
    }
    w->conns[w->n_conns++] = c;
  }
}

static void beat_all(lw_l4_watch_t *w) {
  lw_l4_msg_t m;
  msg_make(&m, LW_L4_MSG_BEAT, 0, ++w->seq);
  for (uint32_t i = 0; i < w->n_conns; ++i) {
    conn_t *c = w->conns[i];
    if (c->closed || !c->link.hello) continue;
    int rc = link_send(&c->link, &m);
    if (rc < 0) {
      char what[160];
      snprintf(what, sizeof(what), "died: its liveness connection failed (%s)", strerror(-rc));
      rank_end(w, c, LW_L4_END_DIED, what);
    }
  }
}

static void check_silence(lw_l4_watch_t *w, int64_t now) {
  for (uint32_t i = 0; i < w->n_conns; ++i) {
    conn_t *c = w->conns[i];
    if (c->closed || now - c->link.last_rx <= w->hung_ns) continue;
    if (c->rank < 1) {
      conn_close(w, c);  // a stranger that never said HELLO
      continue;
    }
    char what[160];
    snprintf(what, sizeof(what), "hung: no heartbeat for %" PRId64 " ms (the bound is %" PRId64
             " ms)", ms_of(now - c->link.last_rx), ms_of(w->hung_ns));
    rank_end(w, c, LW_L4_END_HUNG, what);
  }
}

static void *watch_main(void *arg) {
  lw_l4_watch_t *w = arg;
  int64_t next_beat = lw__now_ns() + w->period_ns;
  for (;;) {
    int64_t now = lw__now_ns();
    int64_t wake = next_beat;
    for (uint32_t i = 0; i < w->n_conns; ++i) {
      conn_t *c = w->conns[i];
      if (!c->closed && c->link.last_rx + w->hung_ns + 1 < wake) {
        wake = c->link.last_rx + w->hung_ns + 1;
      }
    }
    struct epoll_event evs[16];
    int n = epoll_wait(w->epoll_fd, evs, 16, timeout_ms(wake, now));
    now = lw__now_ns();
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u64 == TAG_STOP) return NULL;
      if (evs[i].data.u64 == TAG_LISTEN) {
        accept_all(w, now);
        continue;
      }
      conn_t *c = evs[i].data.ptr;
      if (c->closed) continue;
      if (evs[i].events & EPOLLOUT) (void)link_send(&c->link, NULL);
      on_readable(w, c, now);  // also sees the EOF or error behind EPOLLRDHUP/HUP/ERR
    }
    if (now >= next_beat) {
      beat_all(w);
      next_beat = now + w->period_ns;
    }
    check_silence(w, now);
  }
}

static lw_status_t listen_on(lw_l4_watch_t *w, const char *bind_host, const char *advertise,
                             lw_error_t *err) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE};
  struct addrinfo *ai = NULL;
  int rc = getaddrinfo(bind_host, "0", &hints, &ai);
  if (rc != 0) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0, "l4: cannot resolve %s to listen on: %s",
                         bind_host ? bind_host : "(any)", gai_strerror(rc));
  }
  int fd = -1, last = 0;
  for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = errno;
      continue;
    }
    fd = lw__forkserver_fd_above_stdio(fd);
    if (fd < 0) {
      last = -fd;
      continue;
    }
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      last = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(ai);
  if (fd < 0) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "l4: cannot listen for liveness connections: %s", strerror(last));
  }
  struct sockaddr_storage ss;
  socklen_t len = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    int e = errno;
    close(fd);
    return lw__error_set(err, LW_INTERNAL, -1, 0, "l4: getsockname failed: %s", strerror(e));
  }
  unsigned port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  char host[LW_L4_HOST_BYTES];
  if (advertise) {
    snprintf(host, sizeof(host), "%s", advertise);
  } else {
    host_name(host, sizeof(host));
  }
  int n = snprintf(w->address, sizeof(w->address), "%s:%u", host, port);
  if (n < 0 || (size_t)n >= sizeof(w->address)) {
    close(fd);
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "l4: the advertised host \"%s\" is too long for an address", host);
  }
  w->listen_fd = fd;
  return LW_OK;
}

static void watch_free(lw_l4_watch_t *w) {
  for (uint32_t i = 0; i < w->n_conns; ++i) {
    conn_close(w, w->conns[i]);
    free(w->conns[i]);
  }
  free(w->conns);
  free(w->ranks);
  if (w->listen_fd >= 0) close(w->listen_fd);
  if (w->stop_fd >= 0) close(w->stop_fd);
  if (w->epoll_fd >= 0) close(w->epoll_fd);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
}

lw_status_t lw__l4_watch_open(const lw_l4_watch_config_t *cfg, lw_l4_watch_t **out,
                              lw_error_t *err) {
  *out = NULL;
  if (!cfg || cfg->n_ranks == 0 || cfg->n_ranks > 65536) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "l4: the liveness watch needs 1..65536 ranks (got %u)",
                         cfg ? cfg->n_ranks : 0);
  }
  lw_l4_watch_t *w = calloc(1, sizeof(*w));
  if (!w) return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  w->listen_fd = w->stop_fd = w->epoll_fd = -1;
  pthread_mutex_init(&w->mu, NULL);
  lw__cond_init_monotonic(&w->cv);
  w->n_ranks = cfg->n_ranks;
  w->period_ns = period_or_default(cfg->period_ns);
  w->hung_ns = hung_or_default(cfg->hung_ns, w->period_ns);
  w->end = cfg->end;
  w->ctx = cfg->ctx;
  w->max_conns = 2 * cfg->n_ranks + 8;
  w->ranks = calloc(cfg->n_ranks, sizeof(*w->ranks));
  w->conns = calloc(w->max_conns, sizeof(*w->conns));
  if (!w->ranks || !w->conns) {
    watch_free(w);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  }
  for (uint32_t i = 0; i < cfg->n_ranks; ++i) w->ranks[i].info.rank = (int32_t)i + 1;
  lw_status_t st = listen_on(w, cfg->bind_host, cfg->advertise, err);
  if (st != LW_OK) {
    watch_free(w);
    return st;
  }
  w->stop_fd = lw__forkserver_fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  w->epoll_fd = lw__forkserver_fd_above_stdio(epoll_create1(EPOLL_CLOEXEC));
  struct epoll_event lev = {.events = EPOLLIN, .data.u64 = TAG_LISTEN};
  struct epoll_event sev = {.events = EPOLLIN, .data.u64 = TAG_STOP};
  if (w->stop_fd < 0 || w->epoll_fd < 0 ||
      epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->listen_fd, &lev) != 0 ||
      epoll_ctl(w->epoll_fd, EPOLL_CTL_ADD, w->stop_fd, &sev) != 0) {
    watch_free(w);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0,
                         "l4: cannot set up the liveness watch's epoll");
  }
  lw_status_t started =
      lw__thread_start(&w->thread, "lw-l4-watch", "L4 liveness watch", watch_main, w, err);
  if (started != LW_OK) {
    watch_free(w);
    return started;
  }
  *out = w;
  return LW_OK;
}

const char *lw__l4_watch_address(const lw_l4_watch_t *w) { return w->address; }

lw_status_t lw__l4_watch_wait_ready(lw_l4_watch_t *w, int64_t deadline_ns, lw_error_t *err) {
  pthread_mutex_lock(&w->mu);
  for (;;) {
    uint32_t ready = 0;
    for (uint32_t i = 0; i < w->n_ranks; ++i) {
      if (w->ranks[i].state == RANK_LOST || w->ranks[i].state == RANK_GONE) {
        lw_status_t st = lw__error_set(err, LW_UNAVAILABLE, -1, 0, "l4: %s", w->ranks[i].lost);
        pthread_mutex_unlock(&w->mu);
        return st;
      }
      if (w->ranks[i].state == RANK_READY) ready++;
    }
    if (ready == w->n_ranks) break;
    if (lw__now_ns() >= deadline_ns) {
      char missing[128] = "";
      size_t at = 0;
      uint32_t n_missing = 0;
      for (uint32_t i = 0; i < w->n_ranks; ++i) {
        if (w->ranks[i].state != RANK_WAITING) continue;
        if (n_missing++ < 8 && at < sizeof(missing)) {
          int k = snprintf(missing + at, sizeof(missing) - at, "%s%u", at ? ", " : "", i + 1);
          if (k > 0) at += (size_t)k;
        }
      }
      lw_status_t st = lw__error_set(err, LW_DEADLINE_EXCEEDED, -1, 0,
                                     "l4: startup deadline passed: %u of %u ranks never "
                                     "connected to %s (ranks %s%s)",
                                     n_missing, w->n_ranks, w->address, missing,
                                     n_missing > 8 ? ", ..." : "");
      pthread_mutex_unlock(&w->mu);
      return st;
    }
    lw__cond_wait_until(&w->cv, &w->mu, deadline_ns);
  }
  pthread_mutex_unlock(&w->mu);
  return LW_OK;
}

bool lw__l4_watch_rank_info(lw_l4_watch_t *w, int32_t rank, lw_l4_rank_info_t *out) {
  if (rank < 1 || (uint32_t)rank > w->n_ranks) return false;
  pthread_mutex_lock(&w->mu);
  *out = w->ranks[rank - 1].info;
  pthread_mutex_unlock(&w->mu);
  return true;
}

void lw__l4_watch_close(lw_l4_watch_t *w) {
  if (!w) return;
  lw__thread_stop(&w->thread, wake_stop_fd, &w->stop_fd);
  // The thread is gone: its connections are this thread's now. A BYE to each, so a rank
  // reads the EOF after it as a goodbye, not as the L4's death.
  lw_l4_msg_t bye;
  msg_make(&bye, LW_L4_MSG_BYE, 0, 0);
  for (uint32_t i = 0; i < w->n_conns; ++i) {
    conn_t *c = w->conns[i];
    if (!c->closed && c->link.hello) (void)link_send(&c->link, &bye);
  }
  watch_free(w);
}

// ---------------------------------------------------------------------------------------------
// A rank's side

struct lw_l4_beat {
  int32_t rank;
  int64_t period_ns, hung_ns;
  lw_l4_end_fn end;
  void *ctx;
  link_t link;
  int stop_fd;
  lw_thread_t thread;
  uint64_t seq;
  char address[LW_L4_ADDRESS_BYTES];
  int32_t l4_pid;                 // from the L4's HELLO (0 before)
  char l4_host[LW_L4_HOST_BYTES];
};

static void beat_end(lw_l4_beat_t *b, lw_l4_end_t why, const char *what) {
  char msg[LW_ERROR_MESSAGE_BYTES];
  int n = snprintf(msg, sizeof(msg), "the L4 (rank 0, host %s, pid %d, at %s) %s",
                   b->l4_host[0] ? b->l4_host : "?", (int)b->l4_pid, b->address, what);
  // A message longer than the buffer is cut (and terminated); only an encoding error leaves
  // nothing to say.
  if (n < 0) snprintf(msg, sizeof(msg), "the L4 (rank 0) ended");
  if (b->end) b->end(b->ctx, 0, why, msg);
}

static void *beat_main(void *arg) {
  lw_l4_beat_t *b = arg;
  int64_t next_beat = lw__now_ns();
  for (;;) {
    int64_t now = lw__now_ns();
    if (now >= next_beat) {
      lw_l4_msg_t m;
      msg_make(&m, LW_L4_MSG_BEAT, b->rank, ++b->seq);
      int rc = link_send(&b->link, &m);
      if (rc < 0) {
        char what[160];
        snprintf(what, sizeof(what), "died: the liveness connection failed (%s)", strerror(-rc));
        beat_end(b, LW_L4_END_DIED, what);
        return NULL;
      }
      next_beat = now + b->period_ns;
    }
    if (now - b->link.last_rx > b->hung_ns) {
      char what[160];
      snprintf(what, sizeof(what), "hung: no heartbeat for %" PRId64 " ms (the bound is %" PRId64
               " ms)", ms_of(now - b->link.last_rx), ms_of(b->hung_ns));
      beat_end(b, LW_L4_END_HUNG, what);
      return NULL;
    }
    int64_t wake = next_beat;
    if (b->link.last_rx + b->hung_ns + 1 < wake) wake = b->link.last_rx + b->hung_ns + 1;
    struct pollfd p[2] = {{.fd = b->link.fd, .events = POLLIN},
                          {.fd = b->stop_fd, .events = POLLIN}};
    int n = poll(p, 2, timeout_ms(wake, now));
    if (n <= 0) continue;
    if (p[1].revents) return NULL;
    if (!p[0].revents) continue;
    now = lw__now_ns();
    for (;;) {
      lw_l4_msg_t m;
      int e = 0;
      read_result_t rr = link_read(&b->link, &m, &e);
      if (rr == READ_AGAIN) break;
      if (rr == READ_EOF || rr == READ_ERROR) {
        if (b->link.bye) {
          beat_end(b, LW_L4_END_GOODBYE, "said goodbye and closed the liveness connection");
          return NULL;
        }
        char what[160];
        died_what(rr, e, what, sizeof(what));
        beat_end(b, LW_L4_END_DIED, what);
        return NULL;
      }
      const char *problem = msg_problem(&m, b->link.hello);
      if (!problem && m.rank != 0) problem = "a message from a rank other than 0";
      if (problem) {
        char what[200];
        snprintf(what, sizeof(what), "broke the liveness protocol: it sent %s", problem);
        beat_end(b, LW_L4_END_VIOLATION, what);
        return NULL;
      }
      b->link.last_rx = now;
      if (m.kind == LW_L4_MSG_HELLO) {
        b->link.hello = true;
        b->l4_pid = m.pid;
        snprintf(b->l4_host, sizeof(b->l4_host), "%s", m.host);
      } else if (m.kind == LW_L4_MSG_BYE) {
        b->link.bye = true;
      }
    }
  }
}

// Splits "host:port" at its last colon (so "[::1]:80" and "::1:80" both work as getaddrinfo
// reads them once the brackets go).
static bool split_address(const char *address, char *host, size_t host_bytes, char *port,
                          size_t port_bytes) {
  const char *colon = strrchr(address, ':');
  if (!colon || colon == address || colon[1] == '\0') return false;
  const char *h = address;
  size_t hn = (size_t)(colon - address);
  if (hn >= 2 && h[0] == '[' && h[hn - 1] == ']') {
    h++;
    hn -= 2;
  }
  if (hn >= host_bytes || strlen(colon + 1) >= port_bytes) return false;
  memcpy(host, h, hn);
  host[hn] = '\0';
  snprintf(port, port_bytes, "%s", colon + 1);
  for (const char *p = port; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
  }
  return true;
}

// One non-blocking connect to a, waited until deadline. The connected fd, or -errno.
static int connect_one(const struct addrinfo *a, int64_t deadline) {
  int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
  if (fd < 0) return -errno;
  fd = lw__forkserver_fd_above_stdio(fd);
  if (fd < 0) return fd;
  if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    return -e;
  }
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int n;
  do {
    n = poll(&p, 1, timeout_ms(deadline, lw__now_ns()));
  } while (n < 0 && errno == EINTR);
  int e = n == 0 ? ETIMEDOUT : 0;
  socklen_t len = sizeof(e);
  if (n > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0) e = errno;
  if (e != 0) {
    close(fd);
    return -e;
  }
  return fd;
}

lw_status_t lw__l4_beat_open(const lw_l4_beat_config_t *cfg, lw_l4_beat_t **out,
                             lw_error_t *err) {
  *out = NULL;
  char host[LW_L4_ADDRESS_BYTES], port[16];
  if (!cfg || !cfg->address ||
      !split_address(cfg->address, host, sizeof(host), port, sizeof(port))) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "l4: liveness address \"%s\" is not host:port",
                         cfg && cfg->address ? cfg->address : "(null)");
  }
  if (cfg->rank < 1) {
    return lw__error_set(err, LW_INVALID_ARGUMENT, -1, 0,
                         "l4: a rank's liveness channel needs a rank >= 1 (got %d)",
                         (int)cfg->rank);
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  int rc = getaddrinfo(host, port, &hints, &ai);
  if (rc != 0) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0, "l4: cannot resolve the L4's address %s: %s",
                         cfg->address, gai_strerror(rc));
  }
  int fd = -1, last = 0;
  for (;;) {
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
      fd = connect_one(a, cfg->connect_deadline_ns);
      if (fd < 0) {
        last = -fd;
        fd = -1;
      }
    }
    if (fd >= 0 || lw__now_ns() >= cfg->connect_deadline_ns) break;
    int64_t nap = CONNECT_RETRY_NS;
    struct timespec ts = {0, nap};
    nanosleep(&ts, NULL);
  }
  freeaddrinfo(ai);
  if (fd < 0) {
    return lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                         "l4: rank %d cannot connect to the L4's liveness address %s before the "
                         "startup deadline: %s",
                         (int)cfg->rank, cfg->address, strerror(last));
  }
  tcp_nodelay(fd);
  lw_l4_beat_t *b = calloc(1, sizeof(*b));
  if (!b) {
    close(fd);
    return lw__error_set(err, LW_RESOURCE_EXHAUSTED, -1, 0, "l4: out of memory");
  }
  b->rank = cfg->rank;
  b->period_ns = period_or_default(cfg->period_ns);
  b->hung_ns = hung_or_default(cfg->hung_ns, b->period_ns);
  b->end = cfg->end;
  b->ctx = cfg->ctx;
  b->link.fd = fd;
  b->link.last_rx = lw__now_ns();
  snprintf(b->address, sizeof(b->address), "%s", cfg->address);
  b->stop_fd = lw__forkserver_fd_above_stdio(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  lw_l4_msg_t hello;
  msg_make(&hello, LW_L4_MSG_HELLO, b->rank, 0);
  int sent = link_send(&b->link, &hello);
  lw_status_t st = LW_OK;
  if (b->stop_fd < 0 || sent < 0) {
    st = lw__error_set(err, LW_UNAVAILABLE, -1, 0,
                       "l4: rank %d cannot start its liveness channel to %s%s%s",
                       (int)cfg->rank, cfg->address, sent < 0 ? ": " : "",
                       sent < 0 ? strerror(-sent) : "");
  } else {
    st = lw__thread_start(&b->thread, "lw-l4-beat", "L4 liveness beat", beat_main, b, err);
  }
  if (st != LW_OK) {
    if (b->stop_fd >= 0) close(b->stop_fd);
    close(fd);
    free(b);
    return st;
  }
  *out = b;
  return LW_OK;
}

void lw__l4_beat_close(lw_l4_beat_t *b) {
  if (!b) return;
  lw__thread_stop(&b->thread, wake_stop_fd, &b->stop_fd);
  lw_l4_msg_t bye;
  msg_make(&bye, LW_L4_MSG_BYE, b->rank, 0);
  (void)link_send(&b->link, &bye);
  close(b->link.fd);
  close(b->stop_fd);
  free(b);
}
