/* Randomized differential test against PyTorch: runs every case gen.py wrote (manifest.txt and
 * the in_/want_ .npy pools; format in gen.py's docstring) and compares the library's result with
 * PyTorch's, element by element, with the tolerance the case gives.
 *
 *   test_differential <groups>     groups: comma-separated (binary, scalar, unary, where, clamp,
 *                                  tensor, reduce, linalg); each runs as one forked Check test
 *   $CT_DIFF_DIR                   the case folder (default: the committed tests/differential/cases)
 *   $CT_DIFF_BIG_POOLS=1           place every input inside a device storage of over 2 MiB (at an
 *                                  odd element offset), the caching allocator's large-block path
 *
 * Every input is built here from a contiguous base loaded with ct_npy_load, by the views the
 * case names (ct_transpose, ct_permute, ct_slice, ct_expand), so the library computes on real
 * strided inputs. A mismatch prints the case, op, dtypes, shapes, strides, the first bad index,
 * got and want; all mismatches of a group are printed before the test fails. Cases marked as a
 * deliberate divergence pass with the library's documented result (`alt`); one that now gives
 * PyTorch's result passes too, with a note that its divergence is gone. */
#include <math.h>
#include <stdint.h>

#include "ct_test.h"

#ifndef CT_DIFF_DEFAULT_DIR
#error "meson defines CT_DIFF_DEFAULT_DIR (the committed case folder)"
#endif

#define MAX_IN 3
#define MAX_TOK 32

/* A parsed case line: key=value fields after "case <id> <group> <op>". */
struct dcase {
  char *line; /* for messages; owned by the manifest */
  const char *id, *group, *op;
  int ntok;
  char *key[MAX_TOK], *val[MAX_TOK];
};

struct pool {
  ct_dtype dt;
  ct_tensor *in;      /* on the device, in dtype dt */
  unsigned char *want; /* host copy of want_<dt>.npy, in dtype dt */
  int64_t want_n;
};

static struct pool pools[CT_DTYPE_COUNT + 8];
static int npools;
static ct_device *dev;
static const char *dir;
static bool big_pools; /* $CT_DIFF_BIG_POOLS: the input pools inside storage of over 2 MiB */

static const char *field(const struct dcase *c, const char *key) {
  for (int i = 0; i < c->ntok; i++)
    if (strcmp(c->key[i], key) == 0) return c->val[i];
  return NULL;
}

static struct pool *pool_of(ct_dtype dt) {
  for (int i = 0; i < npools; i++)
    if (pools[i].dt == dt) return &pools[i];
  return NULL;
}

/* "2.3.4" or "-" (0 dims). Returns ndim, or -1 when malformed. */
static int parse_shape(const char *s, int64_t *shape) {
  if (strcmp(s, "-") == 0) return 0;
  int n = 0;
  while (*s && n < CT_MAX_DIMS) {
    char *end;
    shape[n++] = strtoll(s, &end, 10);
    if (end == s) return -1;
    s = *end == '.' ? end + 1 : end;
    if (*end != '.' && *end) return -1;
  }
  return *s ? -1 : n;
}

/* Integers separated by ','. Returns the count. */
static int parse_ints(const char *s, int64_t *v, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    v[n++] = strtoll(s, &end, 10);
    if (end == s) break;
    s = *end == ',' ? end + 1 : end;
  }
  return n;
}

static const char *dims_text(int ndim, const int64_t *v, char *buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < ndim && n < size; i++) n += (size_t)snprintf(buf + n, size - n, i ? ", %lld" : "%lld", (long long)v[i]);
  if (n < size) snprintf(buf + n, size - n, "]");
  return buf;
}

/* Builds the input a tensor spec names: <dtype>:<offset>:<shape>[/view...]. */
static ct_status build_input(ct_tensor **out, const char *spec, char *err, size_t errsize) {
  char buf[256], name[16];
  int64_t off, shape[CT_MAX_DIMS];
  *out = NULL;
  snprintf(buf, sizeof buf, "%s", spec);
  char *p1 = strchr(buf, ':'), *p2 = p1 ? strchr(p1 + 1, ':') : NULL;
  if (!p2) goto bad;
  *p1 = *p2 = '\0';
  snprintf(name, sizeof name, "%.15s", buf);
  off = strtoll(p1 + 1, NULL, 10);
  char *views = strchr(p2 + 1, '/');
  if (views) *views++ = '\0';
  int ndim = parse_shape(p2 + 1, shape);
  ct_dtype dt;
  if (ndim < 0 || ct_dtype_from_name(&dt, name) != CT_OK || !pool_of(dt)) goto bad;
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  ct_tensor *sl = NULL, *t = NULL;
  ct_status st = ct_slice(&sl, pool_of(dt)->in, 0, off, off + n, 1);
  if (st == CT_OK) st = ct_view(&t, sl, ndim, shape);
  ct_release(sl);
  while (st == CT_OK && views && *views) {
    char *next = strchr(views, '/');
    if (next) *next++ = '\0';
    int64_t v[CT_MAX_DIMS + 1];
    ct_tensor *r = NULL;
    int k;
    switch (views[0]) {
    case 't':
      parse_ints(views + 1, v, 2);
      st = ct_transpose(&r, t, (int)v[0], (int)v[1]);
      break;
    case 'p': {
      int perm[CT_MAX_DIMS];
      k = parse_ints(views + 1, v, CT_MAX_DIMS);
      for (int i = 0; i < k; i++) perm[i] = (int)v[i];
      st = ct_permute(&r, t, perm);
      break;
    }
    case 's':
      parse_ints(views + 1, v, 4);
      st = ct_slice(&r, t, (int)v[0], v[1], v[2], v[3]);
      break;
    case 'e':
      k = parse_shape(views + 1, v);
      st = k < 0 ? CT_ERR_INVALID_ARGUMENT : ct_expand(&r, t, k, v);
      break;
    default:
      st = CT_ERR_INVALID_ARGUMENT;
    }
    ct_release(t);
    t = r;
    views = next;
  }
  if (st != CT_OK) {
    snprintf(err, errsize, "building input %s: %s: %s", spec, ct_status_name(st), ct_last_error());
    ct_release(t);
    return st;
  }
  *out = t;
  return CT_OK;
bad:
  snprintf(err, errsize, "malformed tensor spec '%s'", spec);
  return CT_ERR_INVALID_ARGUMENT;
}

/* ---- the ops ---- */

typedef ct_status (*bin_fn)(ct_tensor **, const ct_tensor *, const ct_tensor *);
typedef ct_status (*un_fn)(ct_tensor **, const ct_tensor *);
typedef ct_status (*sc_fn)(ct_tensor **, const ct_tensor *, double);

static const struct {
  const char *name;
  bin_fn fn;
} binary_ops[] = {
    {"add", ct_add}, {"sub", ct_sub}, {"mul", ct_mul}, {"div", ct_div}, {"pow", ct_pow},
    {"maximum", ct_maximum}, {"minimum", ct_minimum}, {"floor_divide", ct_floor_divide},
    {"remainder", ct_remainder}, {"eq", ct_eq}, {"ne", ct_ne}, {"lt", ct_lt}, {"le", ct_le},
    {"gt", ct_gt}, {"ge", ct_ge}, {"logical_and", ct_logical_and}, {"logical_or", ct_logical_or},
    {"matmul", ct_matmul},
};

static const struct {
  const char *name;
  un_fn fn;
} unary_ops[] = {
    {"neg", ct_neg}, {"abs", ct_abs}, {"relu", ct_relu}, {"floor", ct_floor}, {"ceil", ct_ceil},
    {"round", ct_round}, {"exp", ct_exp}, {"log", ct_log}, {"sqrt", ct_sqrt}, {"rsqrt", ct_rsqrt},
    {"sin", ct_sin}, {"cos", ct_cos}, {"tanh", ct_tanh}, {"sigmoid", ct_sigmoid}, {"gelu", ct_gelu},
    {"logical_not", ct_logical_not}, {"contiguous", ct_contiguous},
};

static const struct {
  const char *name;
  sc_fn fn;
} scalar_ops[] = {
    {"add", ct_add_scalar}, {"sub", ct_sub_scalar}, {"mul", ct_mul_scalar}, {"div", ct_div_scalar},
    {"pow", ct_pow_scalar}, {"maximum", ct_maximum_scalar}, {"minimum", ct_minimum_scalar},
    {"floor_divide", ct_floor_divide_scalar}, {"remainder", ct_remainder_scalar}, {"eq", ct_eq_scalar},
    {"ne", ct_ne_scalar}, {"lt", ct_lt_scalar}, {"le", ct_le_scalar}, {"gt", ct_gt_scalar},
    {"ge", ct_ge_scalar}, {"rsub", ct_rsub_scalar}, {"rdiv", ct_rdiv_scalar}, {"rpow", ct_rpow_scalar},
};

#define FIND(table, nm)                                                                      \
  for (size_t i_ = 0; i_ < sizeof table / sizeof table[0]; i_++)                             \
    if (strcmp(table[i_].name, nm) == 0)

static double num(const struct dcase *c, const char *key) {
  const char *v = field(c, key);
  return v ? strtod(v, NULL) : NAN;
}

/* The reduction dims of "dims=0,-1" or "dims=all" (ndims 0). */
static int red_dims(const struct dcase *c, int *dims) {
  const char *v = field(c, "dims");
  int64_t d[CT_MAX_DIMS];
  int n = (!v || strcmp(v, "all") == 0) ? 0 : parse_ints(v, d, CT_MAX_DIMS);
  for (int i = 0; i < n; i++) dims[i] = (int)d[i];
  return n;
}

/* Runs the case's op on in[]; *handled false for an op this test does not know. */
static ct_status run_op(ct_tensor **r, const struct dcase *c, ct_tensor **in, bool *handled) {
  const char *op = c->op, *g = c->group;
  *handled = true;
  if (strcmp(g, "scalar") == 0) {
    FIND(scalar_ops, op) return scalar_ops[i_].fn(r, in[0], num(c, "s"));
  } else if (strcmp(g, "binary") == 0 || strcmp(op, "matmul") == 0) {
    FIND(binary_ops, op) return binary_ops[i_].fn(r, in[0], in[1]);
  } else if (strcmp(g, "unary") == 0 || strcmp(op, "contiguous") == 0) {
    FIND(unary_ops, op) return unary_ops[i_].fn(r, in[0]);
  } else if (strcmp(op, "where") == 0) {
    return ct_where(r, in[0], in[1], in[2]);
  } else if (strcmp(op, "clamp") == 0) {
    return ct_clamp(r, in[0], num(c, "lo"), num(c, "hi"));
  } else if (strcmp(op, "linear") == 0) {
    return ct_linear(r, in[0], in[1], in[2]);
  } else if (strcmp(op, "addmm") == 0) {
    return ct_addmm(r, in[0], in[1], in[2], num(c, "beta"), num(c, "alpha"));
  } else if (strcmp(g, "tensor") == 0) {
    ct_dtype to = (ct_dtype)-1;
    int64_t shape[CT_MAX_DIMS];
    const char *tv = field(c, "to");
    if (!tv || ct_dtype_from_name(&to, tv) != CT_OK) {
      *handled = false;
      return CT_ERR_INVALID_ARGUMENT;
    }
    if (strcmp(op, "cast") == 0) return ct_cast(r, in[0], to);
    if (strcmp(op, "full") == 0) {
      int nd = parse_shape(field(c, "shape"), shape);
      return ct_full(r, dev, to, nd, shape, num(c, "value"));
    }
    if (strcmp(op, "arange") == 0) return ct_arange(r, dev, to, num(c, "start"), num(c, "end"), num(c, "step"));
    if (strcmp(op, "eye") == 0) return ct_eye(r, dev, to, (int64_t)num(c, "n"), (int64_t)num(c, "m"));
  } else if (strcmp(g, "reduce") == 0) {
    int dims[CT_MAX_DIMS], nd = red_dims(c, dims);
    bool keep = num(c, "keep") != 0;
    if (strcmp(op, "sum") == 0) return ct_sum(r, in[0], nd, dims, keep);
    if (strcmp(op, "mean") == 0) return ct_mean(r, in[0], nd, dims, keep);
    if (strcmp(op, "prod") == 0) return ct_prod(r, in[0], nd, dims, keep);
    if (strcmp(op, "max") == 0) return ct_max(r, in[0], nd, dims, keep);
    if (strcmp(op, "min") == 0) return ct_min(r, in[0], nd, dims, keep);
    if (strcmp(op, "var") == 0) return ct_var(r, in[0], nd, dims, (int)num(c, "corr"), keep);
    if (strcmp(op, "std") == 0) return ct_std(r, in[0], nd, dims, (int)num(c, "corr"), keep);
    if (strcmp(op, "argmax") == 0 || strcmp(op, "argmin") == 0) {
      const char *dv = field(c, "dim");
      int dim = (!dv || strcmp(dv, "none") == 0) ? CT_DIM_NONE : atoi(dv);
      return (op[3] == 'm' && op[4] == 'a' ? ct_argmax : ct_argmin)(r, in[0], dim, keep);
    }
    if (strcmp(op, "softmax") == 0) return ct_softmax(r, in[0], (int)num(c, "dim"));
    if (strcmp(op, "log_softmax") == 0) return ct_log_softmax(r, in[0], (int)num(c, "dim"));
  }
  *handled = false;
  return CT_ERR_INVALID_ARGUMENT;
}

/* ---- comparison ---- */

static bool is_unsigned(ct_dtype dt) {
  return dt == CT_BOOL || ct_dtype_name(dt)[0] == 'u';
}

static double to_double(ct_dtype dt, const unsigned char *p) {
  switch (dt) {
  case CT_F16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return ct_f16_to_f32(h);
  }
  case CT_BF16: {
    uint16_t h;
    memcpy(&h, p, 2);
    return ct_bf16_to_f32(h);
  }
  case CT_F32: {
    float f;
    memcpy(&f, p, 4);
    return f;
  }
  default: {
    double d;
    memcpy(&d, p, 8);
    return d;
  }
  }
}

static void elem_text(char *buf, size_t size, ct_dtype dt, const unsigned char *p) {
  size_t es = ct_dtype_size(dt);
  if (ct_dtype_is_floating_point(dt)) {
    snprintf(buf, size, "%.17g", to_double(dt, p));
    return;
  }
  uint64_t u = 0;
  memcpy(&u, p, es); /* little-endian hosts (as the .npy pools) */
  if (!is_unsigned(dt) && es < 8 && (u >> (8 * es - 1)) & 1) u |= ~(uint64_t)0 << (8 * es);
  if (is_unsigned(dt))
    snprintf(buf, size, "%llu", (unsigned long long)u);
  else
    snprintf(buf, size, "%lld", (long long)(int64_t)u);
}

/* Spacing of dtype dt's values at x (the subnormal spacing near 0). */
static double ulp_of(ct_dtype dt, double x) {
  int mant = dt == CT_F16 ? 11 : dt == CT_BF16 ? 8 : dt == CT_F32 ? 24 : 53;
  int emin = dt == CT_F16 ? -14 : dt == CT_F64 ? -1022 : -126;
  int e = 0;
  if (x != 0 && isfinite(x)) {
    frexp(x, &e);
    e -= 1;
  }
  if (e < emin) e = emin;
  return ldexp(1.0, e - mant + 1);
}

static bool elem_ok(ct_dtype dt, const unsigned char *g, const unsigned char *w, double ulps, double atol) {
  if (!ct_dtype_is_floating_point(dt)) return memcmp(g, w, ct_dtype_size(dt)) == 0;
  double a = to_double(dt, g), b = to_double(dt, w);
  if (isnan(b) || isnan(a)) return isnan(a) && isnan(b);
  if (isinf(b) || isinf(a)) return a == b;
  if (ulps == 0 && atol == 0) return a == b && signbit(a) == signbit(b);
  return fabs(a - b) <= ulps * ulp_of(dt, b) + atol;
}

/* Compares result r with result spec s ("dt:off:shape"); NULL when equal, else a description of
 * the first difference in msg. */
static const char *compare(const ct_tensor *r, const char *s, double ulps, double atol, char *msg, size_t size) {
  char name[16], b1[160], b2[160];
  int64_t off, shape[CT_MAX_DIMS];
  const char *p1 = strchr(s, ':'), *p2 = p1 ? strchr(p1 + 1, ':') : NULL;
  if (!p2 || (size_t)(p1 - s) >= sizeof name) return snprintf(msg, size, "malformed result spec '%s'", s), msg;
  memcpy(name, s, (size_t)(p1 - s));
  name[p1 - s] = '\0';
  off = strtoll(p1 + 1, NULL, 10);
  int ndim = parse_shape(p2 + 1, shape);
  ct_dtype dt;
  if (ndim < 0) return snprintf(msg, size, "malformed result spec '%s'", s), msg;
  if (ct_dtype_from_name(&dt, name) != CT_OK || !pool_of(dt)) /* e.g. PyTorch's i16 for u8 + i8 */
    return snprintf(msg, size, "result is %s, want %s (a dtype this library or device lacks)",
                    ct_dtype_name(ct_tensor_dtype(r)), name), msg;
  ct_dtype rdt = ct_tensor_dtype(r);
  int rnd = ct_tensor_ndim(r);
  const int64_t *rs = ct_tensor_shape(r);
  bool shape_eq = rnd == ndim;
  for (int i = 0; shape_eq && i < ndim; i++) shape_eq = rs[i] == shape[i];
  if (rdt != dt || !shape_eq) {
    snprintf(msg, size, "result is %s %s, want %s %s", ct_dtype_name(rdt), dims_text(rnd, rs, b1, sizeof b1), name,
             dims_text(ndim, shape, b2, sizeof b2));
    return msg;
  }
  size_t es = ct_dtype_size(dt), nb = ct_tensor_nbytes(r);
  int64_t n = ct_numel(r);
  struct pool *pl = pool_of(dt);
  if (off < 0 || off + n > pl->want_n) return snprintf(msg, size, "result spec '%s' runs past want_%s", s, name), msg;
  unsigned char *got = malloc(nb ? nb : 1);
  ck_assert_ptr_nonnull(got);
  ct_status st = ct_to_host(r, got, nb);
  if (st != CT_OK) {
    free(got);
    return snprintf(msg, size, "ct_to_host: %s: %s", ct_status_name(st), ct_last_error()), msg;
  }
  const unsigned char *want = pl->want + (size_t)off * es;
  const char *res = NULL;
  for (int64_t i = 0; i < n; i++) {
    if (elem_ok(dt, got + i * (int64_t)es, want + i * (int64_t)es, ulps, atol)) continue;
    int64_t idx[CT_MAX_DIMS], k = i;
    for (int d = ndim - 1; d >= 0; d--) {
      idx[d] = shape[d] ? k % shape[d] : 0;
      k = shape[d] ? k / shape[d] : 0;
    }
    char gt[64], wt[64];
    elem_text(gt, sizeof gt, dt, got + i * (int64_t)es);
    elem_text(wt, sizeof wt, dt, want + i * (int64_t)es);
    snprintf(msg, size, "first bad index %s (flat %lld): got %s, want %s (%s; tolerance %g ulp + %g)",
             dims_text(ndim, idx, b1, sizeof b1), (long long)i, gt, wt, name, ulps, atol);
    res = msg;
    break;
  }
  free(got);
  return res;
}

/* ---- loading ---- */

static char *manifest;

static void load_manifest(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/manifest.txt", dir);
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s (set CT_DIFF_DIR to a folder gen.py wrote)", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  manifest = malloc((size_t)n + 1);
  ck_assert_ptr_nonnull(manifest);
  ck_assert_int_eq(fread(manifest, 1, (size_t)n, f), n);
  manifest[n] = '\0';
  fclose(f);
}

static void load_pool(const char *dname, const char *fname) {
  char path[1024];
  ct_dtype dt, fdt;
  ck_assert_msg(ct_dtype_from_name(&dt, dname) == CT_OK, "manifest: unknown dtype %s", dname);
  ck_assert_msg(ct_dtype_from_name(&fdt, fname) == CT_OK, "manifest: unknown dtype %s", fname);
  if (dt == CT_F64 && !ct_device_properties(dev)->fp64) return; /* its cases are skipped */
  struct pool *p = &pools[npools++];
  p->dt = dt;
  ct_tensor *t[2] = {NULL, NULL};
  for (int w = 0; w < 2; w++) {
    snprintf(path, sizeof path, "%s/%s_%s.npy", dir, w ? "want" : "in", dname);
    ck_assert_ct_ok(ct_npy_load(&t[w], path, dev));
    ck_assert_msg(ct_tensor_dtype(t[w]) == fdt, "%s holds %s, the manifest says %s", path,
                  ct_dtype_name(ct_tensor_dtype(t[w])), fname);
    if (fdt != dt) {
      ct_tensor *c = NULL;
      ck_assert_ct_ok(ct_cast(&c, t[w], dt));
      ct_release(t[w]);
      t[w] = c;
    }
  }
  if (big_pools) {
    /* The inputs then live at an odd offset inside a storage of more than 2 MiB, which the
     * caching allocator serves from its large-block path rather than the small one. */
    int64_t n = ct_numel(t[0]), pad = (int64_t)((2u << 20) / ct_dtype_size(dt)) + 3, total = n + pad;
    ct_tensor *big = NULL, *view = NULL;
    ck_assert_ct_ok(ct_zeros(&big, dev, dt, 1, &total));
    ck_assert_ct_ok(ct_slice(&view, big, 0, 3, 3 + n, 1));
    ck_assert_ct_ok(ct_copy(view, t[0]));
    ct_release(big);
    ct_release(t[0]);
    t[0] = view;
  }
  p->in = t[0];
  p->want_n = ct_numel(t[1]);
  size_t nb = ct_tensor_nbytes(t[1]);
  p->want = malloc(nb ? nb : 1);
  ck_assert_ptr_nonnull(p->want);
  ck_assert_ct_ok(ct_to_host(t[1], p->want, nb));
  ct_release(t[1]);
}

/* Splits a case line into c (modifies the line). Returns false for other lines. */
static bool parse_case(char *line, struct dcase *c) {
  static char copy[4096];
  snprintf(copy, sizeof copy, "%s", line);
  c->line = copy;
  char *save = NULL, *tok = strtok_r(line, " \t", &save);
  if (!tok || strcmp(tok, "case") != 0) return false;
  c->id = strtok_r(NULL, " \t", &save);
  c->group = strtok_r(NULL, " \t", &save);
  c->op = strtok_r(NULL, " \t", &save);
  c->ntok = 0;
  while ((tok = strtok_r(NULL, " \t", &save)) && c->ntok < MAX_TOK) {
    char *eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = '\0';
    c->key[c->ntok] = tok;
    c->val[c->ntok++] = eq + 1;
  }
  return c->id && c->group && c->op;
}

static char group_list[16][32];
static int ngroups;

/* Prints what the library computed on: each input's dtype, shape and strides. */
static void describe(FILE *f, const struct dcase *c, ct_tensor **in, int nin) {
  char b1[160], b2[160];
  fprintf(f, "  case %s: %s %s", c->id, c->group, c->op);
  for (int i = 0; i < nin; i++) {
    if (!in[i]) continue;
    fprintf(f, "%s %s %s strides %s offset %lld", i ? "," : " on", ct_dtype_name(ct_tensor_dtype(in[i])),
            dims_text(ct_tensor_ndim(in[i]), ct_tensor_shape(in[i]), b1, sizeof b1),
            dims_text(ct_tensor_ndim(in[i]), ct_tensor_strides(in[i]), b2, sizeof b2),
            (long long)ct_tensor_offset(in[i]));
  }
  fprintf(f, "\n    %s\n", c->line);
}

START_TEST(test_group) {
  const char *group = group_list[_i];
  dev = ct_test_device();
  load_manifest();
  char *save = NULL;
  /* Pools first: every line is read once to find them. */
  char *text = strdup(manifest);
  ck_assert_ptr_nonnull(text);
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char d1[32], d2[32];
    if (sscanf(line, "pool %31s %31s", d1, d2) == 2) load_pool(d1, d2);
  }
  free(text);
  int ncases = 0, nbad = 0, ndiv = 0, ngone = 0, nskip = 0;
  save = NULL;
  for (char *line = strtok_r(manifest, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    struct dcase c;
    if (!parse_case(line, &c) || strcmp(c.group, group) != 0) continue;
    ncases++;
    ct_tensor *in[MAX_IN] = {NULL, NULL, NULL}, *r = NULL;
    char err[512] = "", msg[512];
    const char *roles[MAX_IN] = {"a", "b", "c"};
    int nin = 0;
    bool skip = false;
    ct_status st = CT_OK;
    for (int i = 0; i < MAX_IN && st == CT_OK; i++) {
      const char *spec = field(&c, roles[i]);
      if (!spec) break;
      ct_dtype dt;
      char nm[16];
      snprintf(nm, sizeof nm, "%.*s", (int)strcspn(spec, ":"), spec);
      if (ct_dtype_from_name(&dt, nm) == CT_OK && !pool_of(dt)) skip = true;
      if (skip) break;
      st = build_input(&in[i], spec, err, sizeof err);
      nin = i + 1;
    }
    const char *want = field(&c, "want"), *alt = field(&c, "alt"), *div = field(&c, "div");
    if (!skip && want && strchr(want, ':')) {
      ct_dtype dt;
      char nm[16];
      snprintf(nm, sizeof nm, "%.*s", (int)strcspn(want, ":"), want);
      if (ct_dtype_from_name(&dt, nm) == CT_OK && !pool_of(dt)) skip = true;
    }
    if (skip) {
      nskip++;
      for (int i = 0; i < MAX_IN; i++) ct_release(in[i]);
      continue;
    }
    if (st != CT_OK) {
      fprintf(stderr, "FAIL %s\n", err);
      describe(stderr, &c, in, nin);
      nbad++;
      for (int i = 0; i < MAX_IN; i++) ct_release(in[i]);
      continue;
    }
    bool handled;
    st = run_op(&r, &c, in, &handled);
    ck_assert_msg(handled, "case %s: unknown op %s %s", c.id, c.group, c.op);
    double ulps = field(&c, "ulp") ? num(&c, "ulp") : 0, atol = field(&c, "atol") ? num(&c, "atol") : 0;
    /* Against PyTorch, then against the documented divergence. */
    const char *why = NULL;
    bool want_err = want && strcmp(want, "error") == 0, alt_err = alt && strcmp(alt, "error") == 0;
    if (st != CT_OK) {
      snprintf(err, sizeof err, "the library returned %s (%s)", ct_status_name(st), ct_last_error());
      why = want_err ? NULL : err;
    } else {
      why = want_err ? "PyTorch raises; the library returned a result"
                     : compare(r, want, ulps, atol, msg, sizeof msg);
    }
    if (why && alt) {
      char amsg[512];
      const char *awhy = st != CT_OK ? (alt_err ? NULL : err)
                                     : alt_err ? "the divergence says error; the library returned a result"
                                               : compare(r, alt, ulps, atol, amsg, sizeof amsg);
      if (!awhy) {
        ndiv++;
        why = NULL;
      } else {
        fprintf(stderr, "FAIL (neither PyTorch's result nor the documented divergence %s)\n  vs PyTorch: %s\n"
                        "  vs divergence: %s\n", div ? div : "?", why, awhy);
        describe(stderr, &c, in, nin);
        nbad++;
        why = NULL;
        alt = NULL;
      }
    } else if (!why && alt && !(st != CT_OK ? alt_err
                                          : !alt_err && !compare(r, alt, ulps, atol, msg, sizeof msg))) {
      /* PyTorch's result, and not the documented one (within the tolerance both may pass) */
      fprintf(stderr, "note: case %s (%s %s) now gives PyTorch's result: divergence %s is gone here\n", c.id,
              c.group, c.op, div ? div : "?");
      ngone++;
    }
    if (why) {
      fprintf(stderr, "FAIL %s\n", why);
      describe(stderr, &c, in, nin);
      nbad++;
    }
    ct_release(r);
    for (int i = 0; i < MAX_IN; i++) ct_release(in[i]);
  }
  fprintf(stderr, "differential %s: %d cases, %d failed, %d gave the documented divergence, %d divergences gone, "
                  "%d skipped (dtype not on this device)\n",
          group, ncases, nbad, ndiv, ngone, nskip);
  for (int i = 0; i < npools; i++) {
    ct_release(pools[i].in);
    free(pools[i].want);
  }
  free(manifest);
  ck_assert_msg(ncases > 0, "no %s cases in %s/manifest.txt", group, dir);
  ck_assert_msg(nbad == 0, "%d of %d %s cases differ from PyTorch (listed on stderr)", nbad, ncases, group);
}
END_TEST

int main(int argc, char **argv) {
  dir = getenv("CT_DIFF_DIR");
  if (!dir || !*dir) dir = CT_DIFF_DEFAULT_DIR;
  const char *bp = getenv("CT_DIFF_BIG_POOLS");
  big_pools = bp && *bp && strcmp(bp, "0") != 0;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", argc > 1 ? argv[1] : "binary,scalar,unary,where,clamp,tensor,reduce,linalg");
  char *save = NULL;
  for (char *g = strtok_r(buf, ",", &save); g && ngroups < 16; g = strtok_r(NULL, ",", &save))
    snprintf(group_list[ngroups++], sizeof group_list[0], "%s", g);
  Suite *s = suite_create("differential");
  TCase *tc = tcase_create("differential");
  tcase_set_timeout(tc, 1800);
  tcase_add_loop_test(tc, test_group, 0, ngroups);
  suite_add_tcase(s, tc);
  return ct_test_run(s);
}
