// parent/fs_wire.c — messages, requests and fd helpers of the fork server's rooms (fs_wire.h).
#include "parent/fs_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lanes/error.h"
#include "lanes/sys.h"

int lw__forkserver_fd_above_stdio(int fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int e = errno;
  close(fd);
  return moved < 0 ? -e : moved;
}

int lw__fs_socketpair(int sv[2]) {
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return -errno;
  sv[0] = lw__forkserver_fd_above_stdio(sv[0]);
  sv[1] = lw__forkserver_fd_above_stdio(sv[1]);
  if (sv[0] >= 0 && sv[1] >= 0) return 0;
  int e = sv[0] < 0 ? -sv[0] : -sv[1];
  if (sv[0] >= 0) close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
  sv[0] = sv[1] = -1;
  return -e;
}

int lw__fs_pidfd_open(pid_t pid) {
  int fd = lw__sys_pidfd_open(pid);  // the kernel makes every pidfd close-on-exec
  return fd < 0 ? fd : lw__forkserver_fd_above_stdio(fd);
}

int lw__fs_send(int fd, const lw_fs_msg_t *m) {
  for (;;) {
    ssize_t n = send(fd, m, sizeof(*m), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == (ssize_t)sizeof(*m)) return 0;
    if (n >= 0) return -EMSGSIZE;  // SOCK_SEQPACKET sends whole messages or nothing
    if (errno != EINTR) return -errno;
  }
}

int lw__fs_recv(int fd, lw_fs_msg_t *m) {
  for (;;) {
    ssize_t n = recv(fd, m, sizeof(*m), MSG_DONTWAIT | MSG_TRUNC);
    if (n == (ssize_t)sizeof(*m)) return 1;
    if (n == 0) return 0;
    if (n > 0) return -EBADMSG;
    if (errno != EINTR) return -errno;
  }
}

int lw__fs_wait_readable(int fd, int64_t deadline_ns) {
  for (;;) {
    struct timespec ts;
    const struct timespec *tsp = NULL;
    if (deadline_ns != LW_DEADLINE_NEVER) {
      int64_t left = deadline_ns - lw__now_ns();
      if (left <= 0) return 0;
      ts.tv_sec = (time_t)(left / 1000000000LL);
      ts.tv_nsec = (long)(left % 1000000000LL);
      tsp = &ts;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc = ppoll(&p, 1, tsp, NULL);
    if (rc > 0) return 1;
    if (rc < 0 && errno != EINTR) return -errno;
  }
}

int lw__fs_status_from_siginfo(const siginfo_t *si) {
  switch (si->si_code) {
    case CLD_EXITED:
      return (si->si_status & 0xff) << 8;
    case CLD_KILLED:
      return si->si_status & 0x7f;
    case CLD_DUMPED:
      return (si->si_status & 0x7f) | 0x80;
    default:
      return 0;
  }
}

int lw__fs_memfd_with(const char *name, const void *data, size_t bytes) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -errno;
  fd = lw__forkserver_fd_above_stdio(fd);
  if (fd < 0) return fd;
  if (ftruncate(fd, (off_t)bytes) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  if (data != NULL) {
    const uint8_t *p = data;
    size_t left = bytes;
    off_t off = 0;
    while (left > 0) {
      ssize_t n = pwrite(fd, p, left, off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int e = n < 0 ? errno : EIO;
        close(fd);
        return -e;
      }
      p += n;
      left -= (size_t)n;
      off += n;
    }
  }
  return fd;
}

int lw__fs_req_send(int sock, const lw_fs_req_t *rq, const int *fds, int n, int64_t deadline_ns) {
  union {
    char buf[CMSG_SPACE(sizeof(int) * LW_FS_REQ_MAX_FDS)];
    struct cmsghdr align;
  } cm;
  if (n < 0 || n > LW_FS_REQ_MAX_FDS) return -EINVAL;
  memset(&cm, 0, sizeof(cm));
  struct iovec iov = {.iov_base = (void *)rq, .iov_len = sizeof(*rq)};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                      .msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n)};
  struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
  memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
  for (;;) {
    if (sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) return 0;
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return -errno;
    // The peer's queue is full: wait for room, not past the deadline.
    struct timespec ts;
    const struct timespec *tsp = NULL;
    if (deadline_ns != LW_DEADLINE_NEVER) {
      int64_t left = deadline_ns - lw__now_ns();
      if (left <= 0) return -ETIMEDOUT;
      ts.tv_sec = (time_t)(left / 1000000000LL);
      ts.tv_nsec = (long)(left % 1000000000LL);
      tsp = &ts;
    }
    struct pollfd p = {.fd = sock, .events = POLLOUT};
    if (ppoll(&p, 1, tsp, NULL) < 0 && errno != EINTR) return -errno;
  }
}

int lw__fs_req_recv(int sock, lw_fs_req_t *rq, int *fds, int *n_fds) {
  *n_fds = 0;
  union {
    char buf[CMSG_SPACE(sizeof(int) * LW_FS_REQ_MAX_FDS)];
    struct cmsghdr align;
  } cm;
  struct iovec iov = {.iov_base = rq, .iov_len = sizeof(*rq)};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
                      .msg_controllen = sizeof(cm.buf)};
  ssize_t n;
  while ((n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0) return -errno;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int got = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    if (got > LW_FS_REQ_MAX_FDS - *n_fds) got = LW_FS_REQ_MAX_FDS - *n_fds;
    memcpy(fds + *n_fds, CMSG_DATA(c), (size_t)got * sizeof(int));
    *n_fds += got;
  }
  if (n == 0) return 0;
  if (n >= (ssize_t)(2 * sizeof(uint32_t)) && rq->magic == LW_FS_REQ_MAGIC &&
      rq->version != LW_FS_REQ_VERSION) {
    return -EPROTO;
  }
  bool ok = n == (ssize_t)sizeof(*rq) && (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 &&
            rq->magic == LW_FS_REQ_MAGIC && rq->n_shares <= LW_FS_MAX_SHARES &&
            rq->n_fds <= LW_FS_MAX_FDS && rq->n_slots >= 1 &&
            rq->n_slots <= LW_FS_MAX_CHILDREN &&
            *n_fds == 3 + (rq->arg_bytes > 0) + (int)rq->n_shares + (int)rq->n_fds;
  return ok ? 1 : -EBADMSG;
}
