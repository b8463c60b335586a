/* A main() for the fuzz harnesses in builds without libFuzzer: feeds every file named on the
 * command line (folders: every file in them, in name order) to LLVMFuzzerTestOneInput once.
 * So the seed corpus, and every crash reproducer committed to it, is a regression test in the
 * normal build and under the asan and valgrind setups. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 0;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) break;
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *grown = realloc(buf, cap * 2);
    if (!grown) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = grown;
    cap *= 2;
  }
  fclose(f);
  if (!buf) {
    fprintf(stderr, "replay: out of memory reading %s\n", path);
    return 0;
  }
  /* An exact-size copy, so that a read one past the input trips ASan and valgrind as it would
   * under libFuzzer. */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    return 0;
  }
  memcpy(exact, buf, n);
  free(buf);
  LLVMFuzzerTestOneInput(exact, n);
  free(exact);
  return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv) {
  int files = 0, failed = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: no such file or folder: %s\n", argv[i]);
      failed = 1;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (replay_file(argv[i])) files++; else failed = 1;
      continue;
    }
    struct dirent **names = NULL;
    int n = scandir(argv[i], &names, NULL, by_name);
    if (n < 0) {
      fprintf(stderr, "replay: cannot list %s\n", argv[i]);
      failed = 1;
      continue;
    }
    for (int j = 0; j < n; j++) {
      if (names[j]->d_name[0] != '.') {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[i], names[j]->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
          if (replay_file(path)) files++; else failed = 1;
        }
      }
      free(names[j]);
    }
    free(names);
  }
  printf("replayed %d inputs\n", files);
  if (files == 0) {
    fprintf(stderr, "replay: no inputs\n");
    return EXIT_FAILURE;
  }
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
