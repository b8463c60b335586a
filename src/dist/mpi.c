/* Every MPI call of the library (built when meson finds MPI; mpi_none.c otherwise).
 *
 * ct__mpi_open and ct__mpi_close run on the program's thread; everything else on the thread that
 * holds the group's busy flag (its communication thread, or a caller running a synchronous
 * collective itself, group.c), one at a time, so MPI_THREAD_SERIALIZED is enough. Each collective
 * is non-blocking MPI calls (the all-reduce of a power-of-two group: point-to-point exchanges)
 * plus MPI_Test in a loop until it completes, MPI reports an error (the
 * communicator has MPI_ERRORS_RETURN), or the work's deadline passes: a dead peer or a rank that
 * stopped calling collectives becomes CT_ERR_DIST instead of a hang. MPI 3 cannot cancel a
 * collective, so after a timeout the request is abandoned and the group is broken (group.c).
 *
 * To name the rank that died, open gathers every rank's pid and host name; after a timeout the
 * ranks on this host are checked with kill(pid, 0) and /proc (a zombie counts as dead). Ranks on
 * other hosts can't be checked from here, and the message says so. */
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "dist/dist.h"

struct ct__peer {
  int pid;
  char host[64];
};

struct ct__mpi {
  MPI_Comm comm;
  bool owns_mpi; /* MPI_Init_thread was ours */
  struct ct__peer *peers;
};

static ct_status ct__mpi_fail(int rc, const char *fn, const char *call) {
  char text[MPI_MAX_ERROR_STRING + 1] = "";
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error code %d", rc);
  return ct__error(CT_ERR_DIST, "%s: %s failed: %s", fn, call, text);
}

ct_status ct__mpi_open(struct ct_dist *d, int *argc, char ***argv, const void *comm, size_t comm_size,
                       const char *fn) {
  if (comm && comm_size != sizeof(MPI_Comm))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: comm_size is %zu but this library was built with an MPI whose MPI_Comm has %zu bytes "
                     "(Open MPI's is a pointer, MPICH's an int): build the program and the library with the same MPI",
                     fn, comm_size, sizeof(MPI_Comm));
  struct ct__mpi *m = calloc(1, sizeof *m);
  if (!m) return ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  m->comm = MPI_COMM_NULL;
  int inited = 0, finalized = 0, provided = MPI_THREAD_SINGLE, rc;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  ct_status st = CT_OK;
  if (finalized) {
    st = ct__error(CT_ERR_UNSUPPORTED, "%s: MPI was finalized already; it cannot start again", fn);
  } else if (!inited) {
    if (comm) {
      st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: MPI is not initialized, so comm can't be a communicator", fn);
    } else {
      rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
      if (rc != MPI_SUCCESS) st = ct__mpi_fail(rc, fn, "MPI_Init_thread");
      else m->owns_mpi = true;
    }
  } else {
    MPI_Query_thread(&provided);
  }
  if (st == CT_OK && provided < MPI_THREAD_SERIALIZED)
    st = ct__error(CT_ERR_UNSUPPORTED,
                   "%s: MPI provides thread level %d, below MPI_THREAD_SERIALIZED (%d): the group makes its MPI calls "
                   "from its own communication thread; initialize MPI with MPI_Init_thread(..., MPI_THREAD_SERIALIZED, "
                   "...) or higher",
                   fn, provided, MPI_THREAD_SERIALIZED);
  if (st == CT_OK) {
    MPI_Comm base = comm ? *(const MPI_Comm *)comm : MPI_COMM_WORLD;
    rc = MPI_Comm_dup(base, &m->comm);
    if (rc != MPI_SUCCESS) st = ct__mpi_fail(rc, fn, "MPI_Comm_dup");
  }
  if (st == CT_OK) {
    rc = MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(m->comm, &d->rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(m->comm, &d->size);
    if (rc != MPI_SUCCESS) st = ct__mpi_fail(rc, fn, "MPI_Comm_rank/size");
  }
  if (st == CT_OK) {
    MPI_Comm node = MPI_COMM_NULL;
    rc = MPI_Comm_split_type(m->comm, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(node, &d->local_rank);
    if (node != MPI_COMM_NULL) MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) st = ct__mpi_fail(rc, fn, "MPI_Comm_split_type");
  }
  if (st == CT_OK) {
    m->peers = calloc((size_t)d->size, sizeof *m->peers);
    if (!m->peers) st = ct__error(CT_ERR_OUT_OF_MEMORY, "%s: out of host memory", fn);
  }
  if (st == CT_OK) {
    struct ct__peer me = {.pid = (int)getpid()};
    gethostname(me.host, sizeof me.host - 1);
    rc = MPI_Allgather(&me, (int)sizeof me, MPI_BYTE, m->peers, (int)sizeof me, MPI_BYTE, m->comm);
    if (rc != MPI_SUCCESS) st = ct__mpi_fail(rc, fn, "MPI_Allgather of the ranks' pids");
  }
  if (st != CT_OK) {
    if (m->comm != MPI_COMM_NULL) MPI_Comm_free(&m->comm);
    /* MPI started by us and nothing came of it: finalize, so the program can exit cleanly. */
    if (m->owns_mpi) MPI_Finalize();
    free(m->peers);
    free(m);
    return st;
  }
  d->nlocal = 1;
  d->mpi = m;
  return CT_OK;
}

void ct__mpi_close(struct ct_dist *d, bool finalize) {
  struct ct__mpi *m = d->mpi;
  if (!m) return;
  /* A broken group has a request MPI can't cancel: freeing its communicator (or finalizing)
   * could wait for the dead rank, so a broken group leaves both to the process's exit. */
  if (finalize) {
    MPI_Comm_free(&m->comm);
    if (m->owns_mpi) MPI_Finalize();
  }
  free(m->peers);
  free(m);
  d->mpi = NULL;
}

/* Whether the rank's process on this host is gone: no such pid, or a zombie. */
static bool ct__peer_dead(const struct ct__peer *p) {
  if (kill((pid_t)p->pid, 0) != 0 && errno == ESRCH) return true;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", p->pid);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *close = strrchr(buf, ')');
  return close && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

static ct_status ct__mpi_timeout(struct ct_dist *d, const char *fn) {
  struct ct__mpi *m = d->mpi;
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  char dead[512] = "";
  size_t used = 0;
  int ndead = 0, remote = 0;
  for (int r = 0; r < d->size; r++) {
    if (r == d->rank) continue;
    if (strcmp(m->peers[r].host, host) != 0) {
      remote++;
      continue;
    }
    if (ct__peer_dead(&m->peers[r])) {
      ndead++;
      if (used < sizeof dead - 64)
        used += (size_t)snprintf(dead + used, sizeof dead - used, "%s%d (pid %d)", ndead > 1 ? ", " : "", r,
                                 m->peers[r].pid);
    }
  }
  char story[768];
  if (ndead)
    snprintf(story, sizeof story, "rank%s %s on %s %s exited", ndead > 1 ? "s" : "", dead, host,
             ndead > 1 ? "have" : "has");
  else
    snprintf(story, sizeof story,
             "no rank on this host (%s) has exited%s; a rank died%s, stopped calling collectives, or the ranks called "
             "different collectives",
             host, remote ? "" : " (all ranks are on it)", remote ? " on another host" : " without exiting");
  return ct__error(CT_ERR_DIST, "%s: %s did not complete within %d ms on rank %d of %d: %s", fn, d->what,
                   d->cur_timeout_ms, d->rank, d->size, story);
}

/* Drives req to completion, an MPI error, or the deadline. Open MPI progresses a non-blocking
 * collective only inside MPI_Test, so the polling decides its speed. While the program waits for
 * the group (ct_dist_wait), nothing else of this process needs the cores: MPI_Test runs back to
 * back, as MPI's blocking calls poll (a yielded core can go to another process for a whole time
 * slice), for up to 1 s, far more than a chunk takes, so that a dead peer does not keep a core
 * busy until the deadline. Otherwise (DDP's backward runs beside it) it spins yielding the core
 * for the first 2 ms, since most chunks finish within that, then sleeps 100 us between tests so
 * that a long wait leaves the cores to the backward pass. */
static ct_status ct__mpi_wait(struct ct_dist *d, MPI_Request *req, const char *fn, const char *call) {
  int64_t start = ct__dist_now_ns();
  for (;;) {
    int flag = 0;
    int rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, call);
    if (flag) return CT_OK;
    int64_t now = ct__dist_now_ns();
    if (now > d->deadline_ns) return ct__mpi_timeout(d, fn);
    if (now - start < 1000000000 && atomic_load_explicit(&d->waiting, memory_order_relaxed) > 0) continue;
    if (now - start < 2000000) {
      sched_yield();
    } else {
      struct timespec ts = {0, 100000};
      nanosleep(&ts, NULL);
    }
  }
}

static MPI_Datatype ct__mpi_type(ct_dtype w) {
  switch (w) {
    case CT_BOOL:
    case CT_U8: return MPI_UINT8_T;
    case CT_I8: return MPI_INT8_T;
    case CT_I16: return MPI_INT16_T;
    case CT_U16: return MPI_UINT16_T;
    case CT_I32: return MPI_INT32_T;
    case CT_U32: return MPI_UINT32_T;
    case CT_I64: return MPI_INT64_T;
    case CT_U64: return MPI_UINT64_T;
    case CT_F64: return MPI_DOUBLE;
    default: return MPI_FLOAT;
  }
}

static MPI_Op ct__mpi_op(ct_dtype w, ct_dist_op op) {
  if (w == CT_BOOL) return op == CT_DIST_MIN ? MPI_LAND : MPI_LOR;
  return op == CT_DIST_MAX ? MPI_MAX : op == CT_DIST_MIN ? MPI_MIN : MPI_SUM;
}

ct_status ct__mpi_agree(struct ct_dist *d, const int64_t *fields, const char *const *names, int n,
                        const char *fn) {
  struct ct__mpi *m = d->mpi;
  int64_t buf[32];
  if (n > 16) n = 16;
  for (int i = 0; i < n; i++) {
    buf[i] = fields[i];
    buf[n + i] = -fields[i];
  }
  MPI_Request req;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, 2 * n, MPI_INT64_T, MPI_MAX, m->comm, &req);
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Iallreduce (the agreement check)");
  CT__TRY(ct__mpi_wait(d, &req, fn, "MPI_Iallreduce (the agreement check)"));
  for (int i = 0; i < n; i++) {
    int64_t hi = buf[i], lo = -buf[n + i];
    if (hi == lo) continue;
    bool dt = strcmp(names[i], "dtype") == 0, kind = strcmp(names[i], "collective") == 0;
    char a[48], b[48], c[48];
    if (dt) {
      snprintf(a, sizeof a, "%s", ct_dtype_name((ct_dtype)lo));
      snprintf(b, sizeof b, "%s", ct_dtype_name((ct_dtype)hi));
      snprintf(c, sizeof c, "%s", ct_dtype_name((ct_dtype)fields[i]));
    } else if (kind) {
      snprintf(a, sizeof a, "%s", ct__dist_kind_name((enum ct__dist_kind)lo));
      snprintf(b, sizeof b, "%s", ct__dist_kind_name((enum ct__dist_kind)hi));
      snprintf(c, sizeof c, "%s", ct__dist_kind_name((enum ct__dist_kind)fields[i]));
    } else {
      snprintf(a, sizeof a, "%lld", (long long)lo);
      snprintf(b, sizeof b, "%lld", (long long)hi);
      snprintf(c, sizeof c, "%lld", (long long)fields[i]);
    }
    return ct__error(CT_ERR_DIST,
                     "%s: the ranks disagree on the %s of %s: it ranges from %s to %s (%s on rank %d); every rank must "
                     "call the same collectives in the same order with the same dtypes and sizes",
                     fn, names[i], d->what, a, b, c, d->rank);
  }
  return CT_OK;
}

/* Tags of the library's point-to-point messages: ct_dist_send/recv's, and the all-reduce's
 * exchanges, apart so that neither matches the other's. */
enum { CT__TAG = 31, CT__TAG_ALL_REDUCE = 32 };

/* Drops a request that will not be waited for: a failed or timed-out exchange must not leave a
 * receive posted into slot memory that ct_dist_free releases (a slow rather than dead peer
 * would write there later). A receive is cancelled first; a send is only freed. */
static void ct__mpi_abandon(MPI_Request *req, bool recv) {
  if (*req == MPI_REQUEST_NULL) return;
  if (recv) MPI_Cancel(req);
  MPI_Request_free(req);
}

/* Sends sbytes at send to peer and receives rbytes from it into recv, both bounded by the
 * deadline; a NULL send or recv leaves that side out. */
static ct_status ct__mpi_exchange(struct ct_dist *d, const void *send, size_t sbytes, void *recv, size_t rbytes,
                                  int peer, const char *fn) {
  struct ct__mpi *m = d->mpi;
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int rc = recv ? MPI_Irecv(recv, (int)rbytes, MPI_BYTE, peer, CT__TAG_ALL_REDUCE, m->comm, &req[0]) : MPI_SUCCESS;
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Irecv (all-reduce exchange)");
  rc = send ? MPI_Isend(send, (int)sbytes, MPI_BYTE, peer, CT__TAG_ALL_REDUCE, m->comm, &req[1]) : MPI_SUCCESS;
  ct_status st = rc != MPI_SUCCESS ? ct__mpi_fail(rc, fn, "MPI_Isend (all-reduce exchange)")
                 : recv            ? ct__mpi_wait(d, &req[0], fn, "MPI_Irecv (all-reduce exchange)")
                                   : CT_OK;
  if (st == CT_OK && send) st = ct__mpi_wait(d, &req[1], fn, "MPI_Isend (all-reduce exchange)");
  if (st != CT_OK) {
    ct__mpi_abandon(&req[0], true);
    ct__mpi_abandon(&req[1], false);
  }
  return st;
}

/* Combines the peer's partial result (in tmp) into buf, elements [lo, hi): the lower rank's
 * operand first on both sides, so that every rank computes the same bits. */
static void ct__mpi_combine(const struct ct_dist *d, int peer, unsigned char *buf, const unsigned char *tmp,
                            size_t lo, size_t hi, ct_dtype wire, ct_dist_op op) {
  size_t es = ct_dtype_size(wire);
  unsigned char *b = buf + lo * es;
  if (d->rank < peer) ct__dist_reduce3(wire, op, b, b, tmp, hi - lo);
  else ct__dist_reduce3(wire, op, b, tmp, b, hi - lo);
}

/* Rabenseifner's all-reduce among p2 (a power of two) of the group's ranks: v is this rank's
 * index among them, real(v) the rank of index v (below). A reduce-scatter by recursive halving
 * (at step k each rank keeps one half of its range, sends the other to index v ^ 2^k and combines
 * what it receives), then an all-gather by recursive doubling, the steps in reverse. Every
 * element is combined by one rank, in the tree ((x0 x1) (x2 x3)) ..., the lower rank's operand
 * first (real() keeps the order), so every rank gets the same bits. Each rank sends 2 (p2-1)/p2
 * of the buffer and combines (p2-1)/p2 of it. */
static int ct__mpi_real(int v, int rem) { return v < rem ? 2 * v + 1 : v + rem; }

static ct_status ct__mpi_rabenseifner(struct ct_dist *d, int v, int p2, int rem, unsigned char *buf,
                                      unsigned char *tmp, size_t count, ct_dtype wire, ct_dist_op op,
                                      const char *fn) {
  size_t es = ct_dtype_size(wire);
  size_t lo = 0, hi = count, los[32], his[32];
  int steps = 0;
  for (int mask = 1; mask < p2; mask <<= 1, steps++) {
    int peer = ct__mpi_real(v ^ mask, rem);
    size_t mid = lo + (hi - lo) / 2;
    bool low = (v & mask) == 0;
    size_t klo = low ? lo : mid, khi = low ? mid : hi; /* kept */
    size_t glo = low ? mid : lo, ghi = low ? hi : mid; /* given away */
    los[steps] = lo;
    his[steps] = hi;
    CT__TRY(ct__mpi_exchange(d, buf + glo * es, (ghi - glo) * es, tmp, (khi - klo) * es, peer, fn));
    ct__mpi_combine(d, peer, buf, tmp, klo, khi, wire, op);
    lo = klo;
    hi = khi;
  }
  for (int k = steps - 1; k >= 0; k--) {
    int peer = ct__mpi_real(v ^ (1 << k), rem);
    /* The peer holds the other half of [los[k], his[k]): its part follows ours or precedes it. */
    bool low = (v & (1 << k)) == 0;
    size_t plo = low ? hi : los[k], phi = low ? his[k] : lo;
    CT__TRY(ct__mpi_exchange(d, buf + lo * es, (hi - lo) * es, buf + plo * es, (phi - plo) * es, peer, fn));
    lo = los[k];
    hi = his[k];
  }
  return CT_OK;
}

/* The all-reduce. The library must poll a non-blocking call (a dead rank is a timeout, not a
 * hang), and Open MPI serves MPI_Iallreduce with libnbc's schedules, which took 1.2-2.2x as long
 * as the blocking MPI_Allreduce here (2 ranks, shared memory, 1 KiB-16 MiB). So the library runs
 * Rabenseifner's algorithm itself over MPI_Isend/MPI_Irecv (above); against recursive doubling
 * (log2(p) swaps of the whole buffer, each combined whole: what this did until session 19) it
 * sends as many bytes at 2 ranks but combines half as many, and at 1-64 KiB, where it sends twice
 * the messages, the two were alike within the noise, since the device's queue round trip (~45 us
 * on PoCL) dwarfs either. A group of another size folds first, as MPICH does: of the first
 * 2 rem ranks (rem = size - p2, p2 the largest power of two below it), each even one sends its
 * buffer to the odd one above, which combines the two (the even, lower rank's first), the p2
 * ranks left run Rabenseifner's, and each odd one sends the result back down. Callers without a
 * second buffer, and buffers past INT_MAX bytes, use MPI_Iallreduce. */
ct_status ct__mpi_all_reduce(struct ct_dist *d, void *buf, void *tmp, size_t count, ct_dtype wire, ct_dist_op op,
                             const char *fn) {
  struct ct__mpi *m = d->mpi;
  size_t bytes = count * ct_dtype_size(wire);
  if (tmp && d->size > 1 && bytes <= INT_MAX) {
    int p2 = 1;
    while (p2 <= d->size / 2) p2 *= 2;
    int rem = d->size - p2, r = d->rank;
    if (r < 2 * rem && r % 2 == 0) { /* folded: hand the values up, get the result back */
      CT__TRY(ct__mpi_exchange(d, buf, bytes, NULL, 0, r + 1, fn));
      return ct__mpi_exchange(d, NULL, 0, buf, bytes, r + 1, fn);
    }
    if (r < 2 * rem) {
      CT__TRY(ct__mpi_exchange(d, NULL, 0, tmp, bytes, r - 1, fn));
      ct__mpi_combine(d, r - 1, buf, tmp, 0, count, wire, op);
    }
    CT__TRY(ct__mpi_rabenseifner(d, r < 2 * rem ? r / 2 : r - rem, p2, rem, buf, tmp, count, wire, op, fn));
    if (r < 2 * rem) return ct__mpi_exchange(d, buf, bytes, NULL, 0, r - 1, fn);
    return CT_OK;
  }
  MPI_Request req;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, ct__mpi_type(wire), ct__mpi_op(wire, op), m->comm, &req);
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Iallreduce");
  return ct__mpi_wait(d, &req, fn, "MPI_Iallreduce");
}

ct_status ct__mpi_broadcast(struct ct_dist *d, void *buf, size_t bytes, int root, const char *fn) {
  struct ct__mpi *m = d->mpi;
  MPI_Request req;
  int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, m->comm, &req);
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Ibcast");
  return ct__mpi_wait(d, &req, fn, "MPI_Ibcast");
}

ct_status ct__mpi_all_gather(struct ct_dist *d, const void *send, void *recv, size_t bytes, const char *fn) {
  struct ct__mpi *m = d->mpi;
  MPI_Request req;
  int rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, m->comm, &req);
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Iallgather");
  return ct__mpi_wait(d, &req, fn, "MPI_Iallgather");
}

ct_status ct__mpi_reduce_scatter(struct ct_dist *d, const void *send, void *recv, size_t count, ct_dtype wire,
                                 ct_dist_op op, const char *fn) {
  struct ct__mpi *m = d->mpi;
  MPI_Request req;
  int rc = MPI_Ireduce_scatter_block(send, recv, (int)count, ct__mpi_type(wire), ct__mpi_op(wire, op), m->comm, &req);
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Ireduce_scatter_block");
  return ct__mpi_wait(d, &req, fn, "MPI_Ireduce_scatter_block");
}

ct_status ct__mpi_barrier(struct ct_dist *d, const char *fn) {
  struct ct__mpi *m = d->mpi;
  MPI_Request req;
  int rc = MPI_Ibarrier(m->comm, &req);
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Ibarrier");
  return ct__mpi_wait(d, &req, fn, "MPI_Ibarrier");
}

/* Point to point: one tag (CT__TAG) for every ct_dist_send/recv, so that messages between two
 * ranks match in the order they were queued (MPI keeps that order for one source, tag and
 * communicator). */
ct_status ct__mpi_send(struct ct_dist *d, const void *buf, size_t bytes, int dst, const char *fn) {
  struct ct__mpi *m = d->mpi;
  MPI_Request req;
  int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, dst, CT__TAG, m->comm, &req);
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Isend");
  return ct__mpi_wait(d, &req, fn, "MPI_Isend");
}

ct_status ct__mpi_recv(struct ct_dist *d, void *buf, size_t bytes, int src, const char *fn) {
  struct ct__mpi *m = d->mpi;
  MPI_Request req;
  int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, src, CT__TAG, m->comm, &req);
  if (rc != MPI_SUCCESS) return ct__mpi_fail(rc, fn, "MPI_Irecv");
  return ct__mpi_wait(d, &req, fn, "MPI_Irecv");
}
