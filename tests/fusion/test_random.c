/* Randomized elementwise DAGs (issue #16): each DAG is recorded with fusion on, some of its
 * results released before the realize, the rest read back; then the same calls run eagerly
 * (ct__fusion_override = 0) and every kept result must agree bit for bit.
 *
 * The DAGs (fixed seeds) draw from the op table (src/elementwise/ops.def: unary, binary, the
 * scalar forms with the scalar on either side, comparisons, logical and bitwise ops, where,
 * clamp with one or both bounds, leaky_relu), to a depth of up to 12 calls; operands broadcast
 * (size-1 dims, missing leading dims, 0-d tensors); dtypes mix (f32, f16, bf16, i32, i64, bool,
 * and f64 where the device has it), which promotes and splits a DAG into several kernels;
 * nodes are shared; views of pending results (transpose, slice, flatten, a leading 1, expand)
 * are inputs; inputs hold NaN, infinities, signed zeros, and integer extremes. A call the op
 * refuses for its dtypes (bitwise ops on floats, sub on bool, a scalar an integer can't hold)
 * is drawn again.
 *
 * A NaN matches any NaN (fz_assert_bits says why); every other bit must agree.
 *
 * Cost: each DAG is a new fused program or several (one per compute dtype and shape), and the
 * eager replay needs the per-op program of each call's op, dtypes and layout: about 7 programs
 * a DAG, ~0.5 s each cold on PoCL (measured: 28 DAGs build ~200 programs, ~2 min of CPU).
 * Hence few DAGs (N_F32, N_INT, N_MIX below), ops drawn least-used first so that they still
 * cover the table, broadcasting in a third of the f32 DAGs, shorter mixed ones; two DAGs above
 * the CPU group target (the unchecked whole-group kernel and its tail launch), one on strided
 * leaves and two with an empty dim. FZ_ONLY_DAG=<id> runs one DAG (debugging). */
#include "../elementwise/ew_fns.h"
#include "fz_util.h"

/* DAGs per group: the knobs of this test's cost (see the top). */
#define N_F32 13
#define N_INT 4
#define N_MIX 6

#define MAXD 4
#define MAXLEAF 5
#define MAXSTEP 14
#define MAXNODE (MAXLEAF + MAXSTEP)

/* ---- the op lists, from the op table ---- */

/* Every public form of every row: the row's kind says which it has. */
static const struct form {
  const char *name, *sname, *rname; /* ct_<name>, ct_<name>_scalar, ct_r<name>_scalar */
  un_fn un;
  bin_fn bin;
  sc_fn sc, rsc, unp;
} forms[] = {
#define F_BIN(op) .bin = ct_##op
#define F_BINS(op) F_BIN(op), .sc = ct_##op##_scalar, .sname = "ct_" #op "_scalar"
#define F_BINSR(op) F_BINS(op), .rsc = ct_r##op##_scalar, .rname = "ct_r" #op "_scalar"
#define F_UN(op) .un = ct_##op
#define F_UNP(op) .unp = ct_##op
#define F_WHERE(op) .un = NULL /* where and clamp: their own steps */
#define F_CLAMP(op) .un = NULL
#define CT__EW_OP(NAME, op, kind, rule, no_bool, fn, ref, bwd) {.name = "ct_" #op, F_##kind(op)},
#include "elementwise/ops.def"
#undef CT__EW_OP
};
#define N_FORMS ((int)(sizeof forms / sizeof forms[0]))

/* The unary ops, binary ops, and (tensor, double) forms: a op s, s op a, leaky_relu(x, slope). */
static struct {
  const char *name;
  un_fn fn;
} un_ops[N_FORMS];
static struct {
  const char *name;
  bin_fn fn;
} bin_ops[N_FORMS];
static struct {
  const char *name;
  sc_fn fn;
} sc_ops[3 * N_FORMS];
static int N_UN, N_BIN, N_SC;

static void op_lists(void) {
  N_UN = N_BIN = N_SC = 0;
  for (int i = 0; i < N_FORMS; i++) {
    const struct form *f = &forms[i];
    if (f->un) un_ops[N_UN].name = f->name, un_ops[N_UN++].fn = f->un;
    if (f->bin) bin_ops[N_BIN].name = f->name, bin_ops[N_BIN++].fn = f->bin;
    if (f->sc) sc_ops[N_SC].name = f->sname, sc_ops[N_SC++].fn = f->sc;
    if (f->rsc) sc_ops[N_SC].name = f->rname, sc_ops[N_SC++].fn = f->rsc;
    if (f->unp) sc_ops[N_SC].name = f->name, sc_ops[N_SC++].fn = f->unp;
  }
}

/* ---- deterministic choices ---- */

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static int rndi(int n) { return (int)(rnd() % (uint64_t)n); }
static double rndu(void) { return (double)(rnd() >> 11) * 0x1p-53; }

/* ---- a DAG: leaves, then steps, each step's result a node ---- */

enum { K_UN, K_BIN, K_SC, K_WHERE, K_CLAMP, K_VIEW };
enum { V_TRANSPOSE, V_SLICE, V_FLATTEN, V_LEAD1, V_EXPAND, V_COUNT };

struct step {
  int kind, op, in[3];
  double s[2];
  int nd;                 /* views: the target shape (V_EXPAND), the slice's dim */
  int64_t shape[MAXD];
  int64_t start, step;    /* V_SLICE */
};

struct dag {
  int id;
  int nleaf, nstep;
  ct_tensor *node[MAXNODE]; /* leaves, then steps' results (NULL once released) */
  struct step st[MAXSTEP];
  bool keep[MAXNODE];
  char log[4096];          /* the calls, for failure messages */
};

static const char *const view_name[V_COUNT] = {"ct_transpose", "ct_slice", "ct_reshape(flat)", "ct_reshape(1, ...)",
                                               "ct_expand"};

static ct_status exec_step(const struct step *s, ct_tensor *const *node, ct_tensor **out) {
  const ct_tensor *a = node[s->in[0]];
  switch (s->kind) {
  case K_UN: return un_ops[s->op].fn(out, a);
  case K_BIN: return bin_ops[s->op].fn(out, a, node[s->in[1]]);
  case K_SC: return sc_ops[s->op].fn(out, a, s->s[0]);
  case K_WHERE: return ct_where(out, a, node[s->in[1]], node[s->in[2]]);
  case K_CLAMP: return ct_clamp(out, a, s->s[0], s->s[1]);
  default: break;
  }
  int nd = ct_tensor_ndim(a);
  switch (s->op) {
  case V_TRANSPOSE: return ct_transpose(out, a, -1, -2);
  case V_SLICE: return ct_slice(out, a, s->nd, s->start, ct_tensor_shape(a)[s->nd], s->step);
  case V_FLATTEN: {
    int64_t n = ct_numel(a);
    return ct_reshape(out, a, 1, &n);
  }
  case V_LEAD1: {
    int64_t sh[MAXD + 1] = {1};
    for (int i = 0; i < nd; i++) sh[i + 1] = ct_tensor_shape(a)[i];
    return ct_reshape(out, a, nd + 1, sh);
  }
  default: return ct_expand(out, a, s->nd, s->shape);
  }
}

static void step_text(char *buf, size_t size, const struct dag *g, const struct step *s, int idx) {
  const char *nm = s->kind == K_UN    ? un_ops[s->op].name
                   : s->kind == K_BIN ? bin_ops[s->op].name
                   : s->kind == K_SC  ? sc_ops[s->op].name
                   : s->kind == K_WHERE ? "ct_where"
                   : s->kind == K_CLAMP ? "ct_clamp"
                                        : view_name[s->op];
  int nin = s->kind == K_BIN ? 2 : s->kind == K_WHERE ? 3 : 1;
  int w = snprintf(buf, size, "n%d = %s(", idx, nm);
  for (int j = 0; j < nin && w < (int)size; j++) w += snprintf(buf + w, size - (size_t)w, "%sn%d", j ? ", " : "", s->in[j]);
  if (w < (int)size && (s->kind == K_SC || s->kind == K_CLAMP))
    w += snprintf(buf + w, size - (size_t)w, ", %g", s->s[0]);
  if (w < (int)size && s->kind == K_CLAMP) w += snprintf(buf + w, size - (size_t)w, ", %g", s->s[1]);
  if (w < (int)size) snprintf(buf + w, size - (size_t)w, ")%s; ", g->keep[idx] ? "" : " released");
}

static bool bcast(int na, const int64_t *a, int nb, const int64_t *b, int *nd, int64_t *sh) {
  int n = na > nb ? na : nb;
  for (int i = 0; i < n; i++) {
    int64_t x = i < n - na ? 1 : a[i - (n - na)], y = i < n - nb ? 1 : b[i - (n - nb)];
    if (x != y && x != 1 && y != 1) return false;
    sh[i] = x == 1 ? y : x;
  }
  *nd = n;
  return true;
}

static bool compatible(const ct_tensor *a, const ct_tensor *b) {
  int nd;
  int64_t sh[2 * MAXD];
  if (ct_tensor_ndim(a) > MAXD || ct_tensor_ndim(b) > MAXD) return false;
  return bcast(ct_tensor_ndim(a), ct_tensor_shape(a), ct_tensor_ndim(b), ct_tensor_shape(b), &nd, sh) && nd <= MAXD;
}

/* Calls so far of each op form (this process: one test). Ops are drawn among the least used
 * ones most of the time, so that a few DAGs cover the whole table; a refused draw counts, so
 * that an op a DAG's dtypes refuse (bitwise ops on floats) doesn't hold the draw. */
static int use_un[N_FORMS], use_bin[N_FORMS], use_sc[3 * N_FORMS];

static int least_used(int *use, int n) {
  int op = rndi(n);
  if (rndi(4)) {
    int lo = use[0], cand[3 * N_FORMS], nc = 0;
    for (int i = 1; i < n; i++)
      if (use[i] < lo) lo = use[i];
    for (int i = 0; i < n; i++)
      if (use[i] == lo) cand[nc++] = i;
    op = cand[rndi(nc)];
  }
  use[op]++;
  return op;
}

/* A node, the most recent one half of the time (deep chains), else any. */
static int pick(int n) { return rndi(2) ? n - 1 : rndi(n); }

/* A node compatible with node a (broadcasting), preferring recent ones; a itself if none. */
static int pick_partner(const struct dag *g, int n, int a) {
  int cand[MAXNODE], nc = 0;
  for (int i = 0; i < n; i++)
    if (compatible(g->node[a], g->node[i])) cand[nc++] = i;
  if (nc == 0) return a;
  return rndi(3) == 0 ? cand[nc - 1] : cand[rndi(nc)];
}

static const double scalars[] = {2, -3, 0.5, -1.25, 0, 7, 1, 100, 1e-3, NAN, -INFINITY, 1e20, 3e9, -0.0};
static const double bounds[] = {-1, 0.5, 0, 2, -0.25, 3, NAN};

static void propose(struct dag *g, int n, struct step *s) {
  memset(s, 0, sizeof *s);
  int r = rndi(100);
  s->in[0] = pick(n);
  const ct_tensor *a = g->node[s->in[0]];
  if (r < 34) {
    s->kind = K_UN;
    s->op = least_used(use_un, N_UN);
  } else if (r < 62) {
    s->kind = K_BIN;
    s->op = least_used(use_bin, N_BIN);
    s->in[1] = pick_partner(g, n, s->in[0]);
    if (rndi(2)) { /* either side */
      int t = s->in[0];
      s->in[0] = s->in[1];
      s->in[1] = t;
    }
  } else if (r < 78) {
    s->kind = K_SC;
    s->op = least_used(use_sc, N_SC);
    s->s[0] = scalars[rndi((int)(sizeof scalars / sizeof scalars[0]))];
    if (strcmp(sc_ops[s->op].name, "ct_leaky_relu") == 0) s->s[0] = rndi(2) ? 0.1 : -2;
  } else if (r < 84) {
    s->kind = K_WHERE;
    /* The condition: a bool node when there is one, most of the time. */
    int bools[MAXNODE], nb = 0;
    for (int i = 0; i < n; i++)
      if (ct_tensor_dtype(g->node[i]) == CT_BOOL) bools[nb++] = i;
    if (nb && rndi(4)) s->in[0] = bools[rndi(nb)];
    s->in[1] = pick_partner(g, n, s->in[0]);
    s->in[2] = pick_partner(g, n, s->in[1]);
    if (!compatible(g->node[s->in[0]], g->node[s->in[2]])) s->in[2] = s->in[1];
  } else if (r < 91) {
    s->kind = K_CLAMP;
    int nbd = (int)(sizeof bounds / sizeof bounds[0]);
    s->s[0] = bounds[rndi(nbd)];
    s->s[1] = bounds[rndi(nbd)];
    if (isnan(s->s[0]) && isnan(s->s[1])) s->s[1] = 1;
  } else {
    s->kind = K_VIEW;
    /* a view of a step's result (pending, unless a realize came since) */
    if (n > g->nleaf) s->in[0] = g->nleaf + rndi(n - g->nleaf);
    a = g->node[s->in[0]];
    int nd = ct_tensor_ndim(a);
    const int64_t *sh = ct_tensor_shape(a);
    s->op = rndi(V_COUNT);
    if (s->op == V_TRANSPOSE && nd < 2) s->op = V_LEAD1;
    if (s->op == V_SLICE) {
      int d = -1;
      for (int i = 0; i < nd; i++)
        if (sh[i] >= 2 && (d < 0 || rndi(2))) d = i;
      if (d < 0) {
        s->op = V_FLATTEN;
      } else {
        s->nd = d;
        s->start = rndi(2);
        s->step = 1 + rndi(2);
      }
    }
    if (s->op == V_LEAD1 && nd >= MAXD) s->op = V_FLATTEN;
    if (s->op == V_EXPAND) {
      /* every size-1 dim to 2 or 3, and a leading 2 where there is room */
      int lead = nd < MAXD && rndi(2) ? 1 : 0;
      s->nd = nd + lead;
      s->shape[0] = 2;
      for (int i = 0; i < nd; i++) s->shape[i + lead] = sh[i] == 1 ? 2 + rndi(2) : sh[i];
    }
  }
}

/* ---- leaves ---- */

enum { M_F32, M_INT, M_MIX };

static void fill_value(ct_dtype t, void *p, int64_t i) {
  static const double fspecial[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1e30, -1e-30, 65504, 0.5, -1.5, 2.5, 1};
  static const int64_t ispecial[] = {0, 1, -1, 2, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, 255, -128, 7, -7};
  bool special = rndi(4) == 0;
  double v = special ? fspecial[rndi(12)] : ldexp(rndu() * 2 - 1, rndi(6) - 2);
  if (!special && rndi(3) == 0) v = floor(v * 8) / 4; /* exact halves and quarters: rounding ties */
  int64_t iv = special ? ispecial[rndi(12)] : (int64_t)rndi(21) - 10;
  (void)i;
  switch (t) {
  case CT_F32: *(float *)p = (float)v; break;
  case CT_F64: *(double *)p = v; break;
  case CT_F16: *(uint16_t *)p = ct_f32_to_f16((float)v); break;
  case CT_BF16: *(uint16_t *)p = ct_f32_to_bf16((float)v); break;
  case CT_I32: *(int32_t *)p = (int32_t)iv; break;
  case CT_I64: *(int64_t *)p = iv; break;
  case CT_BOOL: *(uint8_t *)p = (uint8_t)rndi(2); break;
  default: ck_abort_msg("no data for %s", ct_dtype_name(t));
  }
}

static ct_dtype leaf_dtype(int mode, bool fp64) {
  static const ct_dtype ints[] = {CT_I32, CT_I64, CT_BOOL, CT_I32};
  static const ct_dtype mix[] = {CT_F32, CT_F16, CT_BF16, CT_I32, CT_I64, CT_BOOL, CT_F64};
  if (mode == M_F32) return CT_F32;
  if (mode == M_INT) return ints[rndi(4)];
  ct_dtype t = mix[rndi(fp64 ? 7 : 6)];
  return t;
}

/* A leaf of shape sh (nd dims) and dtype t; strided: stored transposed (or with every other
 * element) and viewed back, so the kernel reads it through strides. */
static ct_tensor *make_leaf(ct_device *d, ct_dtype t, int nd, const int64_t *sh, bool strided) {
  int64_t n = 1;
  for (int i = 0; i < nd; i++) n *= sh[i];
  size_t es = ct_dtype_size(t);
  int kind = strided ? (nd >= 2 && sh[nd - 1] > 1 && sh[nd - 2] > 1 ? 1 : 2) : 0;
  int64_t total = kind == 2 ? 2 * n : n;
  char *h = malloc((size_t)(total ? total : 1) * es);
  ck_assert_ptr_nonnull(h);
  for (int64_t i = 0; i < total; i++) fill_value(t, h + i * (int64_t)es, i);
  ct_tensor *x = NULL, *v = NULL;
  if (kind == 0) {
    x = fz_from(d, t, nd, sh, h);
  } else if (kind == 1) {
    int64_t tsh[MAXD];
    memcpy(tsh, sh, (size_t)nd * sizeof *sh);
    tsh[nd - 1] = sh[nd - 2];
    tsh[nd - 2] = sh[nd - 1];
    v = fz_from(d, t, nd, tsh, h);
    ck_assert_ct_ok(ct_transpose(&x, v, -1, -2));
  } else {
    int64_t tsh[MAXD + 1];
    memcpy(tsh, sh, (size_t)nd * sizeof *sh);
    int64_t last = nd ? sh[nd - 1] : 1;
    if (nd) tsh[nd - 1] = 2 * last;
    else tsh[0] = 2;
    v = fz_from(d, t, nd ? nd : 1, tsh, h);
    ck_assert_ct_ok(ct_slice(&x, v, nd ? nd - 1 : 0, 1, nd ? 2 * last : 2, 2));
    if (!nd) {
      ct_tensor *s = NULL;
      ck_assert_ct_ok(ct_reshape(&s, x, 0, NULL));
      ct_release(x);
      x = s;
    }
  }
  ct_release(v);
  free(h);
  return x;
}

/* ---- one DAG: record and read with fusion on, replay eagerly, compare ---- */

struct dag_spec {
  int mode;
  int nd;
  int64_t shape[MAXD]; /* the main shape; leaves broadcast to it */
  int nleaf, nstep;
  bool strided;        /* every leaf of >= 1 dim read through strides */
  bool bcast;          /* leaves with fewer dims and size-1 dims (else the main shape) */
};

static void run_dag(ct_device *d, int id, const struct dag_spec *sp) {
  if (N_UN == 0) op_lists();
  const char *only = getenv("FZ_ONLY_DAG"); /* debugging: run one DAG */
  if (only && atoi(only) != id) return;
  static struct dag g;
  memset(&g, 0, sizeof g);
  g.id = id;
  rng_state = 0x9e3779b97f4a7c15ull ^ ((uint64_t)(id + 1) * 0x2545f4914f6cdd1dull);
  for (int i = 0; i < 8; i++) rnd();
  bool fp64 = ct_device_properties(d)->fp64;
  int w = snprintf(g.log, sizeof g.log, "dag %d: ", id);

  /* Leaves: the main shape with leading dims dropped and some dims 1; sometimes 0-d. */
  g.nleaf = sp->nleaf;
  for (int l = 0; l < g.nleaf; l++) {
    ct_dtype t = leaf_dtype(sp->mode, fp64);
    int drop = sp->bcast && sp->nd && rndi(3) == 0 ? rndi(sp->nd + 1) : 0;
    if (l == 0) drop = 0; /* the first leaf has the full shape */
    int nd = sp->nd - drop;
    int64_t sh[MAXD];
    for (int i = 0; i < nd; i++) sh[i] = l && sp->bcast && rndi(4) == 0 ? 1 : sp->shape[drop + i];
    g.node[l] = make_leaf(d, t, nd, sh, sp->strided || (nd >= 2 && rndi(6) == 0));
    char shs[64];
    int o = 0;
    for (int i = 0; i < nd; i++) o += snprintf(shs + o, sizeof shs - (size_t)o, "%s%" PRId64, i ? ", " : "", sh[i]);
    shs[o] = '\0';
    w += snprintf(g.log + w, sizeof g.log - (size_t)w, "n%d = %s[%s]%s; ", l, ct_dtype_name(t), shs,
                  ct_tensor_is_contiguous(g.node[l]) ? "" : " strided");
    g.keep[l] = true;
  }

  /* Record with fusion on; a call the op refuses is drawn again. */
  fz_mode(d, 1);
  int n = g.nleaf;
  for (int k = 0; k < sp->nstep; k++) {
    struct step s;
    ct_tensor *out = NULL;
    ct_status st = CT_ERR_INVALID_ARGUMENT;
    for (int attempt = 0; attempt < 40 && st != CT_OK; attempt++) {
      propose(&g, n, &s);
      st = exec_step(&s, g.node, &out);
      if (st != CT_OK) {
        ck_assert_msg(st == CT_ERR_DTYPE_MISMATCH || st == CT_ERR_INVALID_ARGUMENT, "%s; refused with %s: %s", g.log,
                      ct_status_name(st), ct_last_error());
        ck_assert_ptr_null(out);
      }
    }
    if (st != CT_OK) continue;
    g.st[g.nstep++] = s;
    g.node[n] = out;
    g.keep[n] = rndi(2) == 0;
    n++;
  }
  g.keep[n - 1] = true;
  for (int i = g.nleaf; i < n; i++) {
    char buf[160];
    step_text(buf, sizeof buf, &g, &g.st[i - g.nleaf], i);
    w += snprintf(g.log + w, sizeof g.log - (size_t)w, "%s", buf);
    if (w >= (int)sizeof g.log) w = (int)sizeof g.log - 1;
  }
  /* Release the others before anything realizes them. */
  for (int i = g.nleaf; i < n; i++)
    if (!g.keep[i]) {
      ct_release(g.node[i]);
      g.node[i] = NULL;
    }
  ck_assert_ct_ok(ct_device_synchronize(d));
  ck_assert_uint_eq(fz_pending(), 0);
  void *fused[MAXNODE] = {0};
  for (int i = g.nleaf; i < n; i++)
    if (g.keep[i]) fused[i] = fz_read(g.node[i]);
  for (int i = g.nleaf; i < n; i++) {
    ct_release(g.node[i]);
    g.node[i] = NULL;
  }

  /* The same calls eagerly. */
  fz_mode(d, 0);
  for (int i = g.nleaf; i < n; i++) {
    ct_status st = exec_step(&g.st[i - g.nleaf], g.node, &g.node[i]);
    ck_assert_msg(st == CT_OK, "%s; eager n%d: %s: %s", g.log, i, ct_status_name(st), ct_last_error());
  }
  for (int i = g.nleaf; i < n; i++) {
    if (!g.keep[i]) continue;
    void *e = fz_read(g.node[i]);
    size_t bytes = ct_tensor_nbytes(g.node[i]);
    if (memcmp(fused[i], e, bytes) != 0) {
      char what[4200];
      snprintf(what, sizeof what, "%s; n%d", g.log, i);
      fz_assert_bits(fused[i], e, bytes, ct_tensor_dtype(g.node[i]), what);
    }
    free(e);
    free(fused[i]);
  }
  for (int i = 0; i < n; i++) ct_release(g.node[i]);
  fz_mode(d, 1);
}

/* Small DAGs: a main shape of up to 3 dims of 1..5 (0-d sometimes, size-1 dims often). */
static void small_spec(struct dag_spec *sp, int id, int mode) {
  rng_state = 0x51ed27a5f00dull + (uint64_t)id * 7919;
  for (int i = 0; i < 4; i++) rnd();
  memset(sp, 0, sizeof *sp);
  sp->mode = mode;
  sp->nd = rndi(10) == 0 ? 0 : 1 + rndi(3);
  static const int64_t sizes[] = {1, 2, 3, 4, 5, 3};
  for (int i = 0; i < sp->nd; i++) sp->shape[i] = sizes[rndi(6)];
  /* square last dims now and then, so that a transpose keeps broadcasting with the rest */
  if (sp->nd >= 2 && rndi(2)) sp->shape[sp->nd - 1] = sp->shape[sp->nd - 2];
  sp->nleaf = 2 + rndi(3);
  sp->nstep = 3 + rndi(10);
  /* Broadcasting and mixed dtypes multiply the per-op programs the eager replay builds: a DAG
   * in three broadcasts, and mixed DAGs are shorter. */
  sp->bcast = mode != M_F32 || rndi(3) == 0;
  if (mode != M_F32) sp->nstep = 3 + rndi(6);
}

START_TEST(random_f32) {
  ct_device *d = ct_test_device();
  for (int id = 0; id < N_F32; id++) {
    struct dag_spec sp;
    small_spec(&sp, id, M_F32);
    run_dag(d, id, &sp);
  }
}
END_TEST

START_TEST(random_int_bool) {
  ct_device *d = ct_test_device();
  for (int id = 100; id < 100 + N_INT; id++) {
    struct dag_spec sp;
    small_spec(&sp, id, M_INT);
    run_dag(d, id, &sp);
  }
}
END_TEST

START_TEST(random_mixed_dtypes) {
  ct_device *d = ct_test_device();
  for (int id = 200; id < 200 + N_MIX; id++) {
    struct dag_spec sp;
    small_spec(&sp, id, M_MIX);
    run_dag(d, id, &sp);
  }
}
END_TEST

/* Above the CPU group target (1024 work-items): the unchecked kernel over whole groups and one
 * more group ending at n; 2085 and 3 x 700 are no multiples of any group size. */
START_TEST(random_large) {
  ct_device *d = ct_test_device();
  struct dag_spec a = {.mode = M_F32, .nd = 1, .shape = {2085}, .nleaf = 3, .nstep = 10, .bcast = true};
  run_dag(d, 300, &a);
  struct dag_spec b = {.mode = M_MIX, .nd = 2, .shape = {3, 700}, .nleaf = 3, .nstep = 8, .bcast = true};
  run_dag(d, 301, &b);
}
END_TEST

/* Every leaf read through strides (transposed, every other element), and empty shapes (nothing
 * is recorded: the calls run at once). */
START_TEST(random_strided_and_empty) {
  ct_device *d = ct_test_device();
  struct dag_spec a = {.mode = M_F32, .nd = 3, .shape = {2, 4, 4}, .nleaf = 3, .nstep = 10, .strided = true, .bcast = true};
  run_dag(d, 400, &a);
  struct dag_spec e1 = {.mode = M_MIX, .nd = 2, .shape = {3, 0}, .nleaf = 2, .nstep = 5};
  run_dag(d, 401, &e1);
  struct dag_spec e2 = {.mode = M_F32, .nd = 1, .shape = {0}, .nleaf = 2, .nstep = 5};
  run_dag(d, 402, &e2);
}
END_TEST

static void add(Suite *s, const char *name, const TTest *t) {
  TCase *tc = tcase_create(name);
  tcase_add_checked_fixture(tc, NULL, ct_test_finish);
  tcase_set_timeout(tc, 900);
  tcase_add_test(tc, t);
  suite_add_tcase(s, tc);
}

int main(void) {
  /* One case per group (CK_RUN_CASE=f32 runs one; FZ_ONLY_DAG=<id> one DAG, for debugging). */
  Suite *s = suite_create("fusion-random");
  add(s, "f32", random_f32);
  add(s, "int", random_int_bool);
  add(s, "mixed", random_mixed_dtypes);
  add(s, "large", random_large);
  add(s, "strided", random_strided_and_empty);
  return ct_test_run(s);
}
