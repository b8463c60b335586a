/* Child processes: this binary re-executed in a hidden mode, its stdout a pipe of fixed-size
 * messages (parent and child are the same executable, so the struct layout matches). */
#ifndef _XOPEN_SOURCE
#define _XOPEN_SOURCE 700 /* nftw() and its flags */
#endif
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

extern char **environ;

enum { MSG_FIG = 1, MSG_READY = 2, MSG_PROGRESS = 3 };

typedef struct bench_msg {
  int kind;
  char text[160];
  bench_fig fig;
} bench_msg;

struct bench_child {
  pid_t pid;
  int fd;
};

static void send_msg(const bench_opts *o, const bench_msg *m) {
  const char *p = (const char *)m;
  size_t left = sizeof *m;
  while (left > 0) {
    ssize_t w = write(o->child_fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; /* the parent went away; nobody is left to tell */
    p += w;
    left -= (size_t)w;
  }
}

void bench_child_send_fig(const bench_opts *o, const bench_fig *f) {
  bench_msg m;
  memset(&m, 0, sizeof m);
  m.kind = MSG_FIG;
  m.fig = *f;
  send_msg(o, &m);
}

void bench_child_send_progress(const bench_opts *o, const char *text) {
  bench_msg m;
  memset(&m, 0, sizeof m);
  m.kind = MSG_PROGRESS;
  snprintf(m.text, sizeof m.text, "%s", text);
  send_msg(o, &m);
}

void bench_child_ready(const bench_opts *o) {
  bench_msg m;
  memset(&m, 0, sizeof m);
  m.kind = MSG_READY;
  send_msg(o, &m);
}

/* Our environment with `extra` entries added, replacing any of the same name; an entry without
 * '=' only removes that name. */
static char **make_env(char *const extra[]) {
  size_t n = 0, k = 0;
  while (environ[n]) n++;
  while (extra && extra[k]) k++;
  char **env = calloc(n + k + 1, sizeof *env);
  if (!env) return NULL;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    int replaced = 0;
    for (size_t j = 0; j < k && !replaced; j++) {
      size_t len = strcspn(extra[j], "=");
      replaced = strncmp(environ[i], extra[j], len) == 0 && environ[i][len] == '=';
    }
    if (!replaced) env[m++] = environ[i];
  }
  for (size_t j = 0; j < k; j++)
    if (strchr(extra[j], '=')) env[m++] = extra[j];
  env[m] = NULL;
  return env;
}

bench_child *bench_child_start(const bench_opts *o, char *const args[], char *const env_extra[]) {
  size_t na = 0;
  while (args[na]) na++;
  char **argv = calloc(na + 2, sizeof *argv);
  char **env = make_env(env_extra);
  bench_child *c = calloc(1, sizeof *c);
  int fds[2] = {-1, -1};
  posix_spawn_file_actions_t fa;
  int have_fa = 0;
  if (!argv || !env || !c) {
    bench_fail("out of host memory starting a child process");
    goto fail;
  }
  argv[0] = (char *)o->self;
  for (size_t i = 0; i < na; i++) argv[i + 1] = args[i];
  if (pipe(fds) != 0) {
    bench_fail("pipe: %s", strerror(errno));
    goto fail;
  }
  /* The read end must not leak into later children: they would keep each other's pipes open. */
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  int err = posix_spawn_file_actions_init(&fa);
  if (err == 0) {
    have_fa = 1;
    err = posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  }
  if (err == 0) err = posix_spawn_file_actions_addclose(&fa, fds[1]);
  if (err == 0) err = posix_spawn(&c->pid, o->self, &fa, NULL, argv, env);
  if (err != 0) {
    bench_fail("cannot start %s: %s", o->self, strerror(err));
    goto fail;
  }
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  c->fd = fds[0];
  free(argv);
  free(env);
  return c;
fail:
  if (have_fa) posix_spawn_file_actions_destroy(&fa);
  if (fds[0] >= 0) close(fds[0]);
  if (fds[1] >= 0) close(fds[1]);
  free(argv);
  free(env);
  free(c);
  return NULL;
}

int bench_child_next(const bench_opts *o, bench_child *c, bench_fig *f) {
  for (;;) {
    bench_msg m;
    char *p = (char *)&m;
    size_t got = 0;
    while (got < sizeof m) {
      ssize_t r = read(c->fd, p + got, sizeof m - got);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return bench_fail("reading from the child process: %s", strerror(errno));
      if (r == 0) {
        if (got == 0) return 0;
        return bench_fail("the child process sent a truncated message");
      }
      got += (size_t)r;
    }
    switch (m.kind) {
      case MSG_FIG:
        *f = m.fig;
        return 1;
      case MSG_READY:
        return 2;
      case MSG_PROGRESS:
        m.text[sizeof m.text - 1] = '\0';
        bench_progress(o, "%s", m.text);
        break;
      default:
        return bench_fail("the child process sent an unknown message (kind %d)", m.kind);
    }
  }
}

int bench_child_finish(bench_child *c) {
  if (!c) return -1;
  close(c->fd);
  int status = 0;
  pid_t r;
  do r = waitpid(c->pid, &status, 0);
  while (r < 0 && errno == EINTR);
  free(c);
  if (r < 0) return bench_fail("waitpid: %s", strerror(errno));
  if (WIFSIGNALED(status)) return bench_fail("the child process died of signal %d", WTERMSIG(status));
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

char *bench_mkdtemp(void) {
  const char *tmp = getenv("TMPDIR");
  if (!tmp || !*tmp) tmp = "/tmp";
  size_t n = strlen(tmp) + 32;
  char *path = malloc(n);
  if (!path) return NULL;
  snprintf(path, n, "%s/cltensor-bench-XXXXXX", tmp);
  if (!mkdtemp(path)) {
    bench_fail("mkdtemp %s: %s", path, strerror(errno));
    free(path);
    return NULL;
  }
  return path;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  remove(path);
  return 0;
}

void bench_rmtree(const char *path) {
  if (path) nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
