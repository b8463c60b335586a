/* The op table (src/elementwise/ops.def) against the public header: every public form a row
 * implies (by its kind) is declared, with its exact type, in include/cltensor/elementwise.h,
 * and every kernel function a row names is defined in kernels/ew_ops.cl (which elementwise.cl includes).
 *
 * The types are checked when this file compiles: it includes only the public umbrella header
 * (no internal one declares the wrappers) and assigns each function to a pointer of the form's
 * type, so a missing declaration or a wrong signature is a build error under -Werror. At run
 * time the text of elementwise.h and ew_ops.cl is searched, so a declaration must sit in
 * that header (not elsewhere) and a function in that kernel source. No device is used. */
#include "ct_test.h"
#include "ew_fns.h"

typedef ct_status (*where_fn)(ct_tensor **, const ct_tensor *, const ct_tensor *, const ct_tensor *);
typedef ct_status (*where_out_fn)(ct_tensor *, const ct_tensor *, const ct_tensor *, const ct_tensor *);
typedef ct_status (*clamp_fn)(ct_tensor **, const ct_tensor *, double, double);
typedef ct_status (*clamp_out_fn)(ct_tensor *, const ct_tensor *, double, double);

/* One entry per public function: its name and its address, stored in a pointer of the form's
 * type, so that a function of another type is a compile error (an initializer of incompatible
 * pointer type, under -Werror); a cast would hide it. */
typedef struct {
  const char *name;
  bin_fn bin;
  bin_out_fn bin_out;
  un_fn un;
  un_out_fn un_out;
  sc_fn sc;
  sc_out_fn sc_out;
  where_fn where;
  where_out_fn where_out;
  clamp_fn clamp;
  clamp_out_fn clamp_out;
} entry;

#define E(field, f) {.name = #f, .field = f},

#define F_BIN(name) E(bin, ct_##name) E(bin_out, ct_##name##_out)
#define F_SCALAR(name) E(sc, ct_##name) E(sc_out, ct_##name##_out)
#define F_K_BIN(name) F_BIN(name)
#define F_K_BINS(name) F_BIN(name) F_SCALAR(name##_scalar)
#define F_K_BINSR(name) F_K_BINS(name) F_SCALAR(r##name##_scalar)
#define F_K_UN(name) E(un, ct_##name) E(un_out, ct_##name##_out)
#define F_K_UNP(name) F_SCALAR(name)
#define F_K_WHERE(name) E(where, ct_##name) E(where_out, ct_##name##_out)
#define F_K_CLAMP(name) E(clamp, ct_##name) E(clamp_out, ct_##name##_out)


static const entry entries[] = {
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) F_K_##kind(name)
#include "elementwise/ops.def"
#undef CT__EW_OP
};

static const char *const kernel_fns[] = {
#define CT__EW_OP(NAME, name, kind, rule, no_bool, fn, ref, bwd) #fn,
#include "elementwise/ops.def"
#undef CT__EW_OP
};

static char *slurp(const char *rel) {
  const char *root = getenv("CLTENSOR_SOURCE_ROOT");
  ck_assert_msg(root != NULL, "CLTENSOR_SOURCE_ROOT is not set (meson sets it)");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
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

START_TEST(test_declared_in_header) {
  char *h = slurp("include/cltensor/elementwise.h");
  int n = (int)(sizeof entries / sizeof entries[0]);
  ck_assert_int_ge(n, 100);
  for (int i = 0; i < n; i++) {
    char want[128];
    snprintf(want, sizeof want, "CT_API ct_status %s(", entries[i].name);
    ck_assert_msg(strstr(h, want) != NULL, "include/cltensor/elementwise.h lacks \"%s\" (a row of ops.def implies it)",
                  want);
    const entry *e = &entries[i];
    bool any = e->bin || e->bin_out || e->un || e->un_out || e->sc || e->sc_out || e->where || e->where_out ||
               e->clamp || e->clamp_out;
    ck_assert_msg(any, "%s: no address", e->name);
  }
  free(h);
}
END_TEST

START_TEST(test_kernel_functions_defined) {
  char *k = slurp("kernels/ew_ops.cl");
  for (size_t i = 0; i < sizeof kernel_fns / sizeof kernel_fns[0]; i++) {
    /* "ew_add(" as a definition, or "(ew_add," as the name given to EW_DEF1V/EW_DEF2V/... */
    char def[96], gen[96];
    snprintf(def, sizeof def, " %s(", kernel_fns[i]);
    snprintf(gen, sizeof gen, "(%s,", kernel_fns[i]);
    ck_assert_msg(strstr(k, def) != NULL || strstr(k, gen) != NULL,
                  "kernels/ew_ops.cl does not define %s (named by ops.def)", kernel_fns[i]);
  }
  free(k);
}
END_TEST

int main(void) {
  Suite *s = suite_create("elementwise-table");
  TCase *tc = tcase_create("table");
  tcase_add_test(tc, test_declared_in_header);
  tcase_add_test(tc, test_kernel_functions_defined);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
