/* The gradient tests against the differentiable-op tables (issue #29): every row of
 * src/tensor/grad_ops.def names, in its check column, the Check test of tests/autograd that
 * checks its formula; that test must exist (START_TEST), be registered (tcase_add_test or
 * tcase_add_loop_test) and check gradients (its file calls gc_check or ct_backward). Every
 * differentiable row of src/elementwise/ops.def (bwd other than 0), which shares the EW row,
 * must be called by the elementwise gradient tests (test_ew.c, test_engine.c: ct_<name>, or a
 * form of it, ct_<name>_scalar). So a new row with a formula and no gradient check fails here.
 *
 * The tables are included as the library includes them, so a row cannot be missed; the test
 * sources are read as text from CLTENSOR_SOURCE_ROOT (meson sets it). No device is used. */
#include <ctype.h>

#include "ct_test.h"

static const struct gop_row {
  const char *name, *check;
} gop_rows[] = {
#define CT__GOP(NAME, formula, rec, check) {#NAME, #check},
#include "tensor/grad_ops.def"
#undef CT__GOP
};

/* The bwd column as a string ("0" when never differentiable). */
static const struct ew_row {
  const char *name, *bwd;
} ew_rows[] = {
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) {#name, #bwd},
#include "elementwise/ops.def"
#undef CT__EW_OP
};

/* The gradient test sources (one per op family), as text. */
static const char *const files[] = {"engine", "ew",   "reduce", "view", "shape",     "linalg", "index",
                                    "conv",   "nn",   "autocast", "composite", "review"};
enum { NFILES = sizeof files / sizeof files[0] };
static char *text[NFILES];

static char *slurp(const char *name) {
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  ck_assert_msg(root != NULL, "CLTENSOR_SOURCE_ROOT is not set (meson sets it)");
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/autograd/test_%s.c", root, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL; /* a family's file joins when it exists (meson.build) */
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(s);
  ck_assert_int_eq(fread(s, 1, (size_t)n, f), (size_t)n);
  s[n] = 0;
  fclose(f);
  return s;
}

static void load(void) {
  for (int i = 0; i < NFILES; i++) text[i] = slurp(files[i]);
}

static void unload(void) {
  for (int i = 0; i < NFILES; i++) {
    free(text[i]);
    text[i] = NULL;
  }
}

/* Whether word occurs in s as a whole identifier, followed by one of the characters in next. */
static bool has_ident(const char *s, const char *word, const char *next) {
  size_t n = strlen(word);
  for (const char *p = strstr(s, word); p; p = strstr(p + 1, word)) {
    bool start = p == s || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
    if (start && p[n] && strchr(next, p[n])) return true;
  }
  return false;
}

START_TEST(every_formula_row_names_a_registered_gradient_test) {
  for (size_t r = 0; r < sizeof gop_rows / sizeof gop_rows[0]; r++) {
    const struct gop_row *row = &gop_rows[r];
    char def[160], add[160], loop[160];
    snprintf(def, sizeof def, "START_TEST(%s)", row->check);
    snprintf(add, sizeof add, "tcase_add_test(tc, %s)", row->check);
    snprintf(loop, sizeof loop, "tcase_add_loop_test(tc, %s,", row->check);
    int found = -1;
    for (int i = 0; i < NFILES && found < 0; i++)
      if (text[i] && strstr(text[i], def)) found = i;
    ck_assert_msg(found >= 0, "grad_ops.def row %s: its check %s is no START_TEST of tests/autograd/test_*.c", row->name,
                  row->check);
    const char *t = text[found];
    ck_assert_msg(strstr(t, add) || strstr(t, loop), "grad_ops.def row %s: test %s of test_%s.c is never registered",
                  row->name, row->check, files[found]);
    ck_assert_msg(strstr(t, "gc_check(") || strstr(t, "ct_backward("),
                  "grad_ops.def row %s: test_%s.c, which holds %s, checks no gradient", row->name, files[found],
                  row->check);
  }
}
END_TEST

START_TEST(every_differentiable_elementwise_op_is_gradchecked) {
  const char *ew = text[1], *engine = text[0];
  ck_assert_msg(ew && engine, "tests/autograd/test_ew.c and test_engine.c must exist");
  int checked = 0;
  for (size_t r = 0; r < sizeof ew_rows / sizeof ew_rows[0]; r++) {
    const struct ew_row *row = &ew_rows[r];
    if (strcmp(row->bwd, "0") == 0) continue;
    char fn[96], fs[96];
    snprintf(fn, sizeof fn, "ct_%s", row->name);
    snprintf(fs, sizeof fs, "ct_%s_scalar", row->name);
    /* called, or named in a case table (a function pointer followed by ',') */
    bool hit = has_ident(ew, fn, "(,") || has_ident(engine, fn, "(,") || has_ident(ew, fs, "(,") ||
               has_ident(engine, fs, "(,");
    ck_assert_msg(hit,
                  "ops.def row %s has a backward formula (bwd %s) but no gradient test calls %s: add it to a "
                  "gradcheck of tests/autograd/test_ew.c",
                  row->name, row->bwd, fn);
    checked++;
  }
  ck_assert_int_gt(checked, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("autograd-table");
  TCase *tc = tcase_create("table");
  tcase_add_checked_fixture(tc, load, unload);
  tcase_add_test(tc, every_formula_row_names_a_registered_gradient_test);
  tcase_add_test(tc, every_differentiable_elementwise_op_is_gradchecked);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
