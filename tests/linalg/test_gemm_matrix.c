/* The GEMM test matrix (issue #11): every float dtype x every shape class (plain, batched,
 * broadcast batch on either side, transposed views) x sizes on both sides of each threshold a
 * route has, with operands where the allocator puts them and in buffers of their own created
 * in the opposite order, each product compared with a double-precision host loop.
 *
 * meson runs it once per route: CLTENSOR_GEMM=clblast, =auto, =host, =host with native
 * kernels off ("mapped": map, CBLAS on the calling thread, unmap), and =host with every product
 * that can be cut run in parts on two threads ("split").
 *
 * Thresholds (m n k of one product, after batch folding):
 *   - OpenBLAS 0.3.21 runs a GEMM on one thread up to m n k = 65536 * 4 = 64^3 (interface/gemm.c,
 *     SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD), threaded above: 60^3 and 70^3.
 *   - CLBlast takes its direct kernel below XGEMM_MIN_INDIRECT_SIZE^3 and the indirect one (with
 *     copy/transpose kernels, and for batches the route's check of CLBlast's in-place shortcut)
 *     from there: 192 for f32 on PoCL (this library's shipped set) and for f16 (CLBlast's
 *     default); 190^3 and 194^3, and batches of products on either side. CLBlast's default for
 *     f64 is 1152, too large to test cheaply: test_f64_clblast_kernels installs an f64 set with a
 *     crossover of 64 instead, so both f64 kernels run at 60^3 and 70^3.
 *   - Batch folding ([.., m, k] @ [k, n] as one [b m, k] @ [k, n]) needs a shared b and a
 *     contiguous, untransposed a: cases that fold, and the same sizes that can't (b batched, a
 *     transposed, a broadcast).
 *   - The host route's native kernel: one command when a, b and c share a buffer (the
 *     allocator's usual case for small tensors), probe commands when they don't ("own buffers").
 *
 * Tolerances: linalg_util.h's bound, |got - exact| <= 2 (k + 2) u_acc sum|a||b| + u_out |exact|
 * (Higham's gamma_k for any summation order, doubled for its denominator and the reference's own
 * rounding), with u_acc the accumulation's unit roundoff (2^-24 f32, 2^-53 f64, 2^-11 where
 * CLBlast's half GEMM runs) and u_out the final rounding of f16/bf16 results formed in f32. Any
 * correct BLAS meets it; a swapped operand, wrong offset or stride misses it by orders of
 * magnitude. */
#include "ct_test.h"
#include "device/device.h"
#include "linalg/linalg.h"
#include "linalg_util.h"

/* One operand: its shape as the product sees it, and whether it is the transposed view of a
 * contiguous tensor (last two dims swapped). */
struct operand {
  int nd;
  int64_t shape[4];
  bool trans;
};

struct mcase {
  const char *name;
  struct operand a, b;
};

#define OP(nd, trans, ...) {nd, {__VA_ARGS__}, trans}

static const struct mcase cases[] = {
    /* plain */
    {"plain 60^3 (one BLAS thread)", OP(2, false, 60, 60), OP(2, false, 60, 60)},
    {"plain 70^3 (threaded BLAS)", OP(2, false, 70, 70), OP(2, false, 70, 70)},
    {"plain odd 67x45x71", OP(2, false, 67, 45), OP(2, false, 45, 71)},
    {"plain 190^3 (CLBlast direct)", OP(2, false, 190, 190), OP(2, false, 190, 190)},
    {"plain 194^3 (CLBlast indirect)", OP(2, false, 194, 194), OP(2, false, 194, 194)},
    {"matrix-vector", OP(2, false, 70, 70), OP(1, false, 70)},
    /* batched, both sides */
    {"batched 3x(40x30x50)", OP(3, false, 3, 40, 30), OP(3, false, 3, 30, 50)},
    {"batched 4x(100^3)", OP(3, false, 4, 100, 100), OP(3, false, 4, 100, 100)},
    {"batched 2x(200x196x198) (indirect)", OP(3, false, 2, 200, 196), OP(3, false, 2, 196, 198)},
    {"batched 4-D 2x3x(20x24x28)", OP(4, false, 2, 3, 20, 24), OP(4, false, 2, 3, 24, 28)},
    /* broadcast batch: b shared (folds into one product) */
    {"a batched, b shared 3x(30x20x10)", OP(3, false, 3, 30, 20), OP(2, false, 20, 10)},
    {"a batched, b shared 3x(300x200x64)", OP(3, false, 3, 300, 200), OP(2, false, 200, 64)},
    {"a batched, b shared 2x(256^3)", OP(3, false, 2, 256, 256), OP(2, false, 256, 256)},
    {"a batched, b [1, k, n] 2x(95x190x190) (folds to 190^3)", OP(3, false, 2, 95, 190), OP(3, false, 1, 190, 190)},
    {"a batched, b shared 2x(100x194x194) (folds past 192^3)", OP(3, false, 2, 100, 194), OP(2, false, 194, 194)},
    /* broadcast batch: a shared (never folds) */
    {"a shared, b batched 3x(40x30x20)", OP(2, false, 40, 30), OP(3, false, 3, 30, 20)},
    {"a [1, m, k], b batched 4x(50x40x30)", OP(3, false, 1, 50, 40), OP(3, false, 4, 40, 30)},
    {"a shared, b batched 2x(200x196x198) (indirect)", OP(2, false, 200, 196), OP(3, false, 2, 196, 198)},
    {"a shared, b batched 2x(60^3)", OP(2, false, 60, 60), OP(3, false, 2, 60, 60)},
    {"a shared, b batched 2x(70^3)", OP(2, false, 70, 70), OP(3, false, 2, 70, 70)},
    /* broadcast batch on both sides */
    {"a [2, 1, ..], b [3, ..] 6x(20x24x16)", OP(4, false, 2, 1, 20, 24), OP(3, false, 3, 24, 16)},
    /* transposed views */
    {"a^T 45x37x29", OP(2, true, 45, 37), OP(2, false, 37, 29)},
    {"b^T 45x37x29", OP(2, false, 45, 37), OP(2, true, 37, 29)},
    {"a^T b^T 45x37x29", OP(2, true, 45, 37), OP(2, true, 37, 29)},
    {"a^T b^T 194^3 (indirect)", OP(2, true, 194, 194), OP(2, true, 194, 194)},
    {"a^T b^T 190^3 (direct)", OP(2, true, 190, 190), OP(2, true, 190, 190)},
    {"batched a^T, b shared 3x(40x30x20) (no folding)", OP(3, true, 3, 40, 30), OP(2, false, 30, 20)},
    {"a batched, b^T shared 4x(50x60x70) (linear)", OP(3, false, 4, 50, 60), OP(2, true, 60, 70)},
    {"batched a^T b^T 2x(200x196x198) (indirect)", OP(3, true, 2, 200, 196), OP(3, true, 2, 196, 198)},
};

/* The operand as a tensor: random values in a contiguous tensor of the stored shape (last two
 * dims swapped for a transposed view), in its own buffer when own, then the view. */
static ct_tensor *make_operand(ct_device *d, ct_dtype t, const struct operand *o, bool own, uint64_t seed) {
  int64_t stored[4];
  memcpy(stored, o->shape, sizeof stored);
  if (o->trans) {
    stored[o->nd - 2] = o->shape[o->nd - 1];
    stored[o->nd - 1] = o->shape[o->nd - 2];
  }
  ct_tensor *base = lt_random(d, t, o->nd, stored, seed);
  if (own) {
    ct_tensor *mine = lt_own_buffer(d, t, o->nd, stored);
    ck_assert_ct_ok(ct_copy(mine, base));
    ct_release(base);
    base = mine;
  }
  if (!o->trans) return base;
  ct_tensor *v;
  ck_assert_ct_ok(ct_transpose(&v, base, o->nd - 2, o->nd - 1));
  ct_release(base);
  return v;
}

/* The product's shape, as ct_matmul defines it. */
static int result_shape(int64_t *out, const struct mcase *c) {
  const struct operand *a = &c->a, *b = &c->b;
  int anb = a->nd == 1 ? 0 : a->nd - 2, bnb = b->nd == 1 ? 0 : b->nd - 2, nb = anb > bnb ? anb : bnb, nd = 0;
  for (int i = 0; i < nb; i++) {
    int ia = i - (nb - anb), ib = i - (nb - bnb);
    int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
    out[nd++] = da == 1 ? db : da;
  }
  if (a->nd > 1) out[nd++] = a->shape[a->nd - 2];
  if (b->nd > 1) out[nd++] = b->shape[b->nd - 1];
  return nd;
}

/* One case in one dtype: with the allocator's blocks, then in buffers created c, b, a. */
static void run_case(ct_device *d, ct_dtype t, const struct mcase *c, uint64_t seed) {
  for (int own = 0; own < 2; own++) {
    char what[192];
    snprintf(what, sizeof what, "%s, %s", c->name, own ? "own buffers created c, b, a" : "allocator blocks");
    ct_tensor *out = NULL;
    if (own) {
      int64_t rs[4];
      int rn = result_shape(rs, c);
      out = lt_own_buffer(d, t, rn, rs);
    }
    ct_tensor *b = make_operand(d, t, &c->b, own, seed + 1), *a = make_operand(d, t, &c->a, own, seed);
    struct lt_ref r;
    lt_reference(&r, a, b, NULL, 1, 0);
    if (own) {
      ck_assert_ct_ok(ct_matmul_out(out, a, b));
    } else {
      ck_assert_ct_ok(ct_matmul(&out, a, b));
    }
    lt_check(out, &r, what);
    lt_ref_free(&r);
    ct_release(out);
    ct_release(a);
    ct_release(b);
  }
}

static void run_dtype(ct_dtype t) {
  ct_device *d = ct_test_device();
  if (t == CT_F64 && !ct_device_properties(d)->fp64) return;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(d, t, &cases[i], 100 * i + 1);
}

START_TEST(test_matrix_f32) { run_dtype(CT_F32); }
END_TEST

START_TEST(test_matrix_f64) { run_dtype(CT_F64); }
END_TEST

START_TEST(test_matrix_f16) { run_dtype(CT_F16); }
END_TEST

START_TEST(test_matrix_bf16) { run_dtype(CT_BF16); }
END_TEST

/* The issue's shapes in the order it ran them: the f64 batches went wrong on the host route
 * after the earlier products had left cached segments behind. */
START_TEST(test_issue_sequence) {
  ct_device *d = ct_test_device();
  const struct mcase seq[] = {
      {"issue [2,256,256] @ [256,256]", OP(3, false, 2, 256, 256), OP(2, false, 256, 256)},
      {"issue [3,300,200] @ [200,100]", OP(3, false, 3, 300, 200), OP(2, false, 200, 100)},
      {"issue [3,300,200] @ [200,64]", OP(3, false, 3, 300, 200), OP(2, false, 200, 64)},
      {"issue [3,30,20] @ [20,10]", OP(3, false, 3, 30, 20), OP(2, false, 20, 10)},
      {"issue [4,100,100] @ [100,100]", OP(3, false, 4, 100, 100), OP(2, false, 100, 100)},
  };
  for (size_t ti = 0; ti < 2; ti++) {
    ct_dtype t = ti ? CT_F32 : CT_F64;
    if (t == CT_F64 && !ct_device_properties(d)->fp64) continue;
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
      ct_tensor *a = make_operand(d, t, &seq[i].a, false, 2 * i + 1), *b = make_operand(d, t, &seq[i].b, false, 2 * i + 2);
      ct_tensor *c;
      ck_assert_ct_ok(ct_matmul(&c, a, b));
      struct lt_ref r;
      lt_reference(&r, a, b, NULL, 1, 0);
      lt_check(c, &r, seq[i].name);
      lt_ref_free(&r);
      ct_release(c);
      ct_release(a);
      ct_release(b);
    }
  }
}
END_TEST

/* CLBlast route, f64: a parameter set with a crossover of 64 (the shipped f32 set's kernels), so
 * that 60^3 takes the direct kernel and 70^3 the indirect one, and the route plans its batches
 * for parameters it knows. Other routes: nothing to do. */
START_TEST(test_f64_clblast_kernels) {
  ct_device *d = ct_test_device();
  ct_gemm_route route;
  ck_assert_ct_ok(ct_gemm_route_get(&route, d));
  if (route != CT_GEMM_ROUTE_CLBLAST || !ct_device_properties(d)->fp64) return;
  const ct__gemm_tuning *shipped = ct__gemm_shipped_tuning(d);
  if (!shipped || !shipped->has[CT__PREC_F32]) return;
  ct__gemm_params p = shipped->p[CT__PREC_F32];
  p.min_indirect = 64;
  char why[256];
  ck_assert_msg(ct__gemm_params_valid(&p, ct_device_properties(d), 8, why, sizeof why), "f64 set refused: %s", why);
  ck_assert_ct_ok(ct__gemm_use_params(d, CT__PREC_F64, &p));
  const struct mcase f64_cases[] = {
      {"f64 plain 60^3 (direct)", OP(2, false, 60, 60), OP(2, false, 60, 60)},
      {"f64 plain 70^3 (indirect)", OP(2, false, 70, 70), OP(2, false, 70, 70)},
      {"f64 a^T b^T 70^3 (indirect)", OP(2, true, 70, 70), OP(2, true, 70, 70)},
      {"f64 batched 3x(70^3)", OP(3, false, 3, 70, 70), OP(3, false, 3, 70, 70)},
      {"f64 batched 3x(60^3)", OP(3, false, 3, 60, 60), OP(3, false, 3, 60, 60)},
      {"f64 a shared, b batched 2x(70x68x66)", OP(2, false, 70, 68), OP(3, false, 2, 68, 66)},
      {"f64 a batched, b shared 2x(30x70x70) (folds past 64^3)", OP(3, false, 2, 30, 70), OP(2, false, 70, 70)},
      {"f64 batched a^T, b shared 2x(70^3)", OP(3, true, 2, 70, 70), OP(2, false, 70, 70)},
  };
  for (size_t i = 0; i < sizeof f64_cases / sizeof f64_cases[0]; i++) run_case(d, CT_F64, &f64_cases[i], 7 * i + 3);
}
END_TEST

/* ct_addmm and ct_linear with c one row repeated (a linear layer's bias): the host route sets C's
 * rows inside the product's command (gemm_host.c's bias), so its cases are the row's forms and
 * where the split cuts: along m (m >= n) and along n (the bias's offset moves), contiguous and
 * strided rows, a single element broadcast to the whole row (increment 0), c of shape [1, n],
 * beta 1 (copied) and 2.5 (scaled), the bias in a buffer of its own (probe commands), and a
 * batched result that folds. Every route runs them; only the host route takes the path. */
static void run_row_bias(ct_dtype t) {
  ct_device *d = ct_test_device();
  if (t == CT_F64 && !ct_device_properties(d)->fp64) return;
  const struct { const char *name; int64_t m, n, k; int form; double beta; bool own; } rb[] = {
      {"cut along m, row bias", 96, 40, 30, 0, 1, false},
      {"cut along n, row bias", 40, 96, 30, 0, 1, false},
      {"cut along n, strided row (step 3)", 40, 96, 30, 1, 1, false},
      {"cut along n, one element broadcast", 34, 70, 20, 2, 1, false},
      {"cut along m, c [1, n], beta 2.5", 70, 34, 20, 3, 2.5, false},
      {"cut along n, own buffers, beta 2.5", 40, 96, 30, 0, 2.5, true},
      {"odd 17x5x3, strided row", 17, 5, 3, 1, 1, false},
  };
  for (size_t i = 0; i < sizeof rb / sizeof rb[0]; i++) {
    uint64_t seed = 31 * i + 7;
    ct_tensor *a = lt_random(d, t, 2, (int64_t[]){rb[i].m, rb[i].k}, seed);
    ct_tensor *b = lt_random(d, t, 2, (int64_t[]){rb[i].k, rb[i].n}, seed + 1);
    ct_tensor *c = NULL;
    if (rb[i].form == 1) {
      ct_tensor *big = lt_random(d, t, 1, (int64_t[]){3 * rb[i].n}, seed + 2);
      ck_assert_ct_ok(ct_slice(&c, big, 0, 1, 3 * rb[i].n, 3));
      ct_release(big);
    } else if (rb[i].form == 2) {
      c = lt_random(d, t, 1, (int64_t[]){1}, seed + 2);
    } else {
      c = lt_random(d, t, rb[i].form == 3 ? 2 : 1, rb[i].form == 3 ? (int64_t[]){1, rb[i].n} : (int64_t[]){rb[i].n},
                    seed + 2);
    }
    if (rb[i].own) {
      ct_tensor *mine = lt_own_buffer(d, t, 1, (int64_t[]){rb[i].n}); /* form 0 */
      ck_assert_ct_ok(ct_copy(mine, c));
      ct_release(c);
      c = mine;
    }
    struct lt_ref r;
    lt_reference(&r, a, b, c, 1.5, rb[i].beta);
    ct_tensor *y;
    ck_assert_ct_ok(ct_addmm(&y, c, a, b, rb[i].beta, 1.5));
    lt_check(y, &r, rb[i].name);
    lt_ref_free(&r);
    ct_release(y);
    ct_release(a);
    ct_release(b);
    ct_release(c);
  }
  /* ct_linear on a batch [2, 48, 30] (folds into one 96x40x30 product), bias [40]. */
  ct_tensor *x = lt_random(d, t, 3, (int64_t[]){2, 48, 30}, 901), *w = lt_random(d, t, 2, (int64_t[]){40, 30}, 902);
  ct_tensor *bias = lt_random(d, t, 1, (int64_t[]){40}, 903), *wt, *y;
  ck_assert_ct_ok(ct_transpose(&wt, w, 0, 1));
  struct lt_ref r;
  lt_reference(&r, x, wt, bias, 1, 1);
  ck_assert_ct_ok(ct_linear(&y, x, w, bias));
  lt_check(y, &r, "linear [2, 48, 30] with bias");
  lt_ref_free(&r);
  ct_release(y);
  ct_release(wt);
  ct_release(x);
  ct_release(w);
  ct_release(bias);
}

START_TEST(test_row_bias_f32) { run_row_bias(CT_F32); }
END_TEST

START_TEST(test_row_bias_f64) { run_row_bias(CT_F64); }
END_TEST

/* "split": every host product that can be cut runs in parts shared with the device's second
 * worker (gemm_host.c, host_native.c), not only those of 2^20 multiply-adds and more. */
static void split_everything(void) {
  ct__gemm_split_min_madds = 1;
  /* Each product waits (up to 2 s, a woken worker's latency under load) for the helper to
   * join, so that its parts run on both threads: the parts' offsets are what this tests. */
  ct__team_share_wait_ns = 2000000000;
}

/* Split mode: the helper ran parts of the products above. */
START_TEST(test_split_helped) {
  ct_device *d = ct_test_device();
  ct_gemm_route route;
  ck_assert_ct_ok(ct_gemm_route_get(&route, d));
  if (route != CT_GEMM_ROUTE_HOST || ct_device_properties(d)->compute_units < 2) return;
  /* The parts run on the device's second worker through native kernels (rusticl has none: its
   * host route maps buffers and runs each product whole). */
  if (!ct_test_needs(d->native_kernels, "a split product's parts on the helper", "native kernels (CL_EXEC_NATIVE_KERNEL)", d))
    return;
  run_case(d, CT_F32, &cases[0], 1);
  ck_assert_msg(atomic_load(&ct__team_parts_helped) > 0, "no part of a split product ran on the helper");
}
END_TEST

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "native";
  Suite *s = suite_create("linalg-matrix");
  TCase *tc = tcase_create("gemm-matrix");
  tcase_set_timeout(tc, 600);
  if (strcmp(mode, "mapped") == 0) tcase_add_checked_fixture(tc, lt_without_native_kernels, NULL);
  if (strcmp(mode, "split") == 0) {
    tcase_add_checked_fixture(tc, split_everything, NULL);
    tcase_add_test(tc, test_split_helped);
  }
  tcase_add_test(tc, test_issue_sequence);
  tcase_add_test(tc, test_matrix_f32);
  tcase_add_test(tc, test_matrix_f64);
  tcase_add_test(tc, test_row_bias_f32);
  tcase_add_test(tc, test_row_bias_f64);
  /* The split cuts the f32/f64 product the other dtypes are computed by too: those, and
   * CLBlast's kernels, add nothing to it (and CI time under ASan). */
  if (strcmp(mode, "split") != 0) {
    tcase_add_test(tc, test_matrix_f16);
    tcase_add_test(tc, test_matrix_bf16);
    tcase_add_test(tc, test_f64_clblast_kernels);
  }
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
