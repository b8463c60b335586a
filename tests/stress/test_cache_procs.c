/* The on-disk kernel cache under concurrency: several processes build and load the same kernels
 * at once in a fresh CLTENSOR_CACHE_DIR. Every process must succeed with correct results
 * whether it finds the cache empty (all build and write at once), full (all load at once) or
 * half full (some write what others read) — so no process ever reads a partially written file
 * — and the folder must end up without stray temporary files.
 * The test body runs this executable again as the worker: `test_cache_procs worker SEED`. */
#include <dirent.h>
#include <errno.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ct_test.h"
#include "stress.h"

extern char **environ;

enum { PROCS = 4 };

static int worker(uint32_t seed) {
  ct_device *d;
  if (ct_device_default(&d) != CT_OK) {
    fprintf(stderr, "worker %u: no device: %s\n", seed, ct_last_error());
    return 1;
  }
  stress_why why = {{0}};
  long ops = 0;
  int ok = stress_workload(d, 9, 31, seed, NULL, 0, &ops, &why) &&
           stress_workload(d, 1, 5, seed + 1, NULL, 0, &ops, &why);
  if (!ok) fprintf(stderr, "worker %u: %s\n", seed, why.text);
  ct_shutdown();
  return ok ? 0 : 1;
}

/* Starts PROCS workers at once with CLTENSOR_CACHE_DIR=dir and waits for them all. */
static void run_wave(const char *dir, const char *what) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  ck_assert_msg(n > 0, "readlink(/proc/self/exe): %s", strerror(errno));
  self[n] = '\0';
  ck_assert_int_eq(setenv("CLTENSOR_CACHE_DIR", dir, 1), 0);
  pid_t pids[PROCS];
  for (int i = 0; i < PROCS; i++) {
    char seed[16];
    snprintf(seed, sizeof seed, "%d", i + 1);
    char *argv[] = {self, "worker", seed, NULL};
    int err = posix_spawn(&pids[i], self, NULL, NULL, argv, environ);
    ck_assert_msg(err == 0, "posix_spawn: %s", strerror(err));
  }
  for (int i = 0; i < PROCS; i++) {
    int status = 0;
    ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "%s: worker %d failed (status 0x%x; its message is on stderr)", what, i + 1, status);
  }
}

/* Calls fn on every regular file under dir (recursively). */
static int walk(const char *dir, void (*fn)(const char *path, const struct stat *st, void *ctx), void *ctx) {
  DIR *dp = opendir(dir);
  if (!dp) return 0;
  int files = 0;
  struct dirent *e;
  while ((e = readdir(dp)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      files += walk(path, fn, ctx);
    } else {
      fn(path, &st, ctx);
      files++;
    }
  }
  closedir(dp);
  return files;
}

struct census {
  int files, empty, temporary, removed;
  int remove_every_other;
};

static void count_file(const char *path, const struct stat *st, void *ctx) {
  struct census *c = ctx;
  c->files++;
  if (st->st_size == 0) c->empty++;
  /* Writers write a temporary name and rename it into place; whatever they call it, a leftover
   * has "tmp" or a mkstemp-style suffix in its name. */
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strstr(base, "tmp") || strstr(base, ".part") || strstr(base, "XXXXXX")) c->temporary++;
  if (c->remove_every_other && c->files % 2 == 0 && unlink(path) == 0) c->removed++;
}

static void remove_tree(const char *dir) {
  DIR *dp = opendir(dir);
  if (!dp) return;
  struct dirent *e;
  while ((e = readdir(dp)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) remove_tree(path);
    else unlink(path);
  }
  closedir(dp);
  rmdir(dir);
}

START_TEST(test_concurrent_cache) {
  const char *base = getenv("CLTENSOR_CACHE_DIR");
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/concurrency-XXXXXX", base && *base ? base : "/tmp");
  if (base && *base) mkdir(base, 0755);
  ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp(%s): %s", dir, strerror(errno));

  run_wave(dir, "cold cache (all build and write)");
  struct census c1 = {0, 0, 0, 0, 0};
  walk(dir, count_file, &c1);
  run_wave(dir, "warm cache (all load)");
  struct census c2 = {0, 0, 0, 0, 1};
  walk(dir, count_file, &c2);
  run_wave(dir, "half the entries removed (some write while others load)");
  struct census c3 = {0, 0, 0, 0, 0};
  walk(dir, count_file, &c3);
  printf("# %d processes per wave; cache files after waves: %d, %d (%d removed), %d\n", PROCS, c1.files,
         c2.files, c2.removed, c3.files);
  ck_assert_msg(c1.empty == 0 && c3.empty == 0, "empty cache files: %d, %d", c1.empty, c3.empty);
  ck_assert_msg(c1.temporary == 0 && c3.temporary == 0, "temporary files left in %s: %d, %d", dir,
                c1.temporary, c3.temporary);
  remove_tree(dir);
}
END_TEST

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "worker") == 0) return worker((uint32_t)strtoul(argv[2], NULL, 10));
  Suite *s = suite_create("cache-procs");
  TCase *tc = tcase_create("cache");
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, test_concurrent_cache);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
