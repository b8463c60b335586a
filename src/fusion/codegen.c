/* Code generation for the fusion graph (issue #16): the OpenCL source of one fused kernel from
 * its nodes, calling the op table's functions (kernels/ew_ops.cl). graph.c decides what goes in
 * a kernel; docs/FUSION.md shows a generated kernel and says why it looks the way it does. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fusion/fusion.h"

void ct__put(struct ct__buf *b, const char *fmt, ...) {
  if (b->skip) return;
  va_list ap;
  va_start(ap, fmt);
  ct__text_vadd(&b->t, fmt, ap);
  va_end(ap);
}

/* A trailing op's name: the table's row, or softmax's. */
static const char *ct__red_name(int red) {
#define CT__RED_NAME(NAME, name, ...) #name,
  static const char *const names[] = {CT_REDUCE_OPS(CT__RED_NAME) "softmax", "log_softmax"};
#undef CT__RED_NAME
  return names[red];
}

static int ct__dt_code(ct_dtype t) {
  switch (t) {
  case CT_BOOL: return 0;
  case CT_U8: return 1;
  case CT_I8: return 2;
  case CT_I32: return 3;
  case CT_I64: return 4;
  case CT_F16: return 5;
  case CT_BF16: return 6;
  case CT_F32: return 7;
  case CT_F64: return 8;
  case CT_I16: return 9;
  case CT_U16: return 10;
  case CT_U32: return 11;
  default: return 12; /* u64 */
  }
}

/* The operand index of a memory read (deduplicated: one load of each distinct operand). */
static int ct__op_add(struct ct__fgen *g, cl_mem mem, int64_t off, ct_dtype dt, int ndim, const int64_t *shape,
                      const int64_t *strides, bool cond) {
  struct ct__fop o;
  memset(&o, 0, sizeof o); /* compared with memcmp: no stray padding */
  o.mem = mem;
  o.off = off;
  o.dt = dt;
  o.cond = cond;
  /* Strides over the kernel's dims, right-aligned; 0 where the operand broadcasts. */
  bool lin = true, one = true;
  int64_t want = 1;
  for (int i = g->ndim - 1; i >= 0; i--) {
    int j = i - (g->ndim - ndim);
    int64_t s = (j >= 0 && shape[j] != 1) ? strides[j] : 0;
    o.st[i] = s;
    if (g->shape[i] != 1) {
      if (s != want) lin = false;
      if (s != 0) one = false;
    }
    want *= g->shape[i];
  }
  o.kind = lin ? 0 : one ? 1 : 2;
  if (o.kind != 2) memset(o.st, 0, sizeof o.st);
  for (int i = 0; i < g->nops; i++)
    if (memcmp(&g->ops[i], &o, sizeof o) == 0) return i;
  if (o.kind == 2) g->strided = true;
  g->ops[g->nops] = o;
  return g->nops++;
}

static const char *ct__node_var_type(const struct ct__fnode *nd) {
  /* Comparisons and the other bool-valued functions return a mask of the compute type's size. */
  return nd->odt == CT_BOOL && nd->l.k != CT_BOOL ? "EW_MT()" : "EW_WB";
}

/* Operand j of node nd as an expression (its value in the compute type, or for where's
 * condition a mask). */
static void ct__operand(struct ct__buf *b, struct ct__fgen *g, struct ct__fnode *nd, int j, int *nop,
                        int *opidx) {
  bool cond = nd->l.op == CT__EW_WHERE && j == 0;
  struct ct__fnode *p = nd->src[j];
  if (p && p->kern == g->kk) {
    if (cond)
      ct__put(b, "EW_M(, ((v%d) & 1) != 0)", p->var);
    else if (p->odt == CT_BOOL && g->k != CT_BOOL)
      ct__put(b, "((EW_WB)((v%d) & 1))", p->var);
    else
      ct__put(b, "v%d", p->var);
    return;
  }
  (void)nop;
  ct__put(b, "x%d", opidx[j]);
}

/* The OpenCL type of the accumulator of a reduction over dtype k's values
 * (ct__reduce_acc_dtype: double for f64, float for the other floats, long for integers and
 * bool). */
static const char *ct__acc_type(ct_dtype k) {
  ct_dtype a = ct__reduce_acc_dtype(k);
  return a == CT_F64 ? "double" : a == CT_F32 ? "float" : "long";
}
size_t ct__acc_size(ct_dtype k) { return ct_dtype_size(ct__reduce_acc_dtype(k)); }

/* reduce.cl picks the accumulator by the dtype it reads, the reduction's input (its producer's
 * result): a comparison computes in float but is reduced as bool, counted in a long. */
ct_dtype ct__red_acc_dtype(const struct ct__fnode *red) { return red->src[0]->odt; }

/* The accumulator type fz_acc for values of dtype k and, for a reduction (red, a row of
 * kernels/reduce_ops.h), its identity FZ_ID and combining step FZ_COMB: the table's, as
 * reduce.cl's kernels take them (the program includes the table and expands its rows for this
 * accumulator). */
static void ct__red_defs(struct ct__buf *b, int red, ct_dtype k) {
  ct__put(b, "typedef %s fz_acc;\n", ct__acc_type(k));
  if (CT__FR_IS_SOFTMAX(red)) return;
  bool lng = ct__reduce_acc_dtype(k) == CT_I64;
  ct__put(b, "//#include \"reduce_ops.h\"\n"
             "#define FZ_RULES(NAME, name, fid, fcomb, lid, lcomb, lcomb8) \\\n"
             "  inline fz_acc fz_id_##name(void) { return (fz_acc)(%s); } \\\n"
             "  inline fz_acc fz_comb_##name(fz_acc a, fz_acc b) { return %s; }\n"
             "CT_REDUCE_OPS(FZ_RULES)\n"
             "#define FZ_ID (fz_id_%s())\n"
             "#define FZ_COMB(a, v) fz_comb_%s((a), (v))\n",
          lng ? "lid" : "fid", lng ? "lcomb" : "fcomb", ct__red_name(red), ct__red_name(red));
}

/* The tree over a work-group's accumulators in lacc, then this group's result at *dst. */
static void ct__put_tree(struct ct__buf *b, const char *dst) {
  ct__put(b, "  lacc[t] = acc;\n  barrier(CLK_LOCAL_MEM_FENCE);\n"
             "  for (int s = L / 2; s > 0; s >>= 1) {\n"
             "    if (t < s) lacc[t] = FZ_COMB(lacc[t], lacc[t + s]);\n"
             "    barrier(CLK_LOCAL_MEM_FENCE);\n  }\n"
             "  if (t == 0) %s = lacc[0];\n", dst);
}

/* Division by a divisor d < 2^31 of indices r < 2^31 as a multiply and a shift (Granlund and
 * Montgomery's method, the round-up variant): with l = ceil(log2 d), s = 32 + l and m =
 * floor(2^s / d) + 1, m = 2^s / d + e for 0 < e <= 1, so r m / 2^s = r / d + r e / 2^s where
 * r e / 2^s < 2^31 / 2^(32 + l) <= 1 / (2 d): less than the distance from r / d to the next
 * integer (at least 1 / d), so the floor is r / d. m < 2^33 and r m < 2^64. The per-element 64-bit
 * divisions and remainders of the index arithmetic cost more than the rest of a broadcasting
 * kernel (a bias added to a [2048, 256] product: 7.5x an unbroadcast add; 2.5x with this). */
void ct__fuse_magic(int64_t d, int64_t *m, int64_t *s) {
  int l = 0;
  while (((int64_t)1 << l) < d) l++;
  *s = 32 + l;
  *m = (int64_t)(((uint64_t)1 << *s) / (uint64_t)d) + 1;
}

static void ct__gen_body(struct ct__buf *b, struct ct__fgen *g, struct ct__fnode **nodes, int nn,
                         int (*opidx)[3]) {
  if (ct__fgen_magic(g)) {
    ct__put(b, "  ulong r = (ulong)i, q;\n  long c;\n");
    for (int i = 0; i < g->nops; i++)
      if (g->ops[i].kind == 2) ct__put(b, "  long a%d_o = a%d_off;\n", i, i);
    for (int dd = g->ndim - 1; dd >= 0; dd--) {
      ct__put(b, "  q = (r * (ulong)shm.s%d) >> shs.s%d;\n  c = (long)(r - q * (ulong)shp.s%d);\n", dd, dd, dd);
      if (dd) ct__put(b, "  r = q;\n");
      for (int i = 0; i < g->nops; i++)
        if (g->ops[i].kind == 2 && g->ops[i].st[dd] != 0) ct__put(b, "  a%d_o += c * a%d_st.s%d;\n", i, i, dd);
    }
  } else if (g->strided) {
    ct__put(b, "  long r = i, c;\n");
    for (int i = 0; i < g->nops; i++)
      if (g->ops[i].kind == 2) ct__put(b, "  long a%d_o = a%d_off;\n", i, i);
    for (int dd = g->ndim - 1; dd >= 0; dd--) {
      ct__put(b, "  c = r %% shp.s%d;\n", dd);
      if (dd) ct__put(b, "  r /= shp.s%d;\n", dd);
      for (int i = 0; i < g->nops; i++)
        if (g->ops[i].kind == 2 && g->ops[i].st[dd] != 0) ct__put(b, "  a%d_o += c * a%d_st.s%d;\n", i, i, dd);
    }
  }
  for (int i = 0; i < g->nops; i++) {
    const struct ct__fop *o = &g->ops[i];
    char idx[48];
    if (o->kind == 0) snprintf(idx, sizeof idx, "a%d_off + i", i);
    else if (o->kind == 1) snprintf(idx, sizeof idx, "a%d_off", i);
    else snprintf(idx, sizeof idx, "a%d_o", i);
    if (o->cond)
      ct__put(b, "  const EW_MT() x%d = EW_NZ(%d, a%d, %s);\n", i, ct__dt_code(o->dt), i, idx);
    else
      ct__put(b, "  const EW_WB x%d = EW_LOAD(%d, a%d, %s);\n", i, ct__dt_code(o->dt), i, idx);
  }
  int nsc = 0;
  for (int a = 0; a < nn; a++) {
    struct ct__fnode *nd = nodes[a];
    if (nd->red >= 0) {
      /* The reduction's input, converted to the accumulator as reduce.cl loads it. */
      struct ct__fnode *p = nd->src[0];
      if (p && p->kern == g->kk && p->odt == CT_BOOL && g->k != CT_BOOL)
        ct__put(b, "  const fz_acc fz_in = (fz_acc)((v%d) & 1);\n", p->var);
      else if (p && p->kern == g->kk)
        ct__put(b, "  const fz_acc fz_in = (fz_acc)(v%d);\n", p->var);
      else
        ct__put(b, "  const fz_acc fz_in = (fz_acc)(x%d);\n", opidx[a][0]);
      continue;
    }
    ct__put(b, "  %s v%d = ", ct__node_var_type(nd), nd->var);
    if (nd->cast) {
      /* The input as the compute dtype (the result's) loads it: ct_cast's conversion. */
      ct__operand(b, g, nd, 0, NULL, opidx[a]);
      ct__put(b, ";\n");
    } else if (nd->l.op == CT__EW_CLAMP) {
      /* ew_clamp's steps, with the bounds the call gave (ew_clamp takes which at build time). */
      ct__operand(b, g, nd, 0, NULL, opidx[a]);
      ct__put(b, ";\n");
      if (nd->l.has_lo) {
        ct__put(b, "  v%d = EW_SEL(, v%d, s%d, v%d < s%d);\n", nd->var, nd->var, nsc, nd->var, nsc);
        g->sc[nsc++] = nd->l.s[0];
      }
      if (nd->l.has_hi) {
        ct__put(b, "  v%d = EW_SEL(, v%d, s%d, v%d > s%d);\n", nd->var, nd->var, nsc, nd->var, nsc);
        g->sc[nsc++] = nd->l.s[1];
      }
    } else {
      int np = ct__ew_op_nparams(nd->l.op);
      ct__put(b, "%s(", ct__ew_launch_fn(&nd->l));
      if (nd->l.spos == 1) {
        ct__put(b, "s%d, ", nsc);
        g->sc[nsc++] = nd->l.s[0];
        ct__operand(b, g, nd, 0, NULL, opidx[a]);
      } else {
        for (int j = 0; j < nd->l.nin; j++) {
          if (j) ct__put(b, ", ");
          ct__operand(b, g, nd, j, NULL, opidx[a]);
        }
        if (nd->l.spos == 2) {
          ct__put(b, ", s%d", nsc);
          g->sc[nsc++] = nd->l.s[0];
        } else if (np == 1) {
          ct__put(b, ", s%d", nsc);
          g->sc[nsc++] = nd->l.s[0];
        }
      }
      ct__put(b, ");\n");
    }
    /* A 16-bit result is rounded as its store and a later load would round it. */
    if (nd->odt == CT_F16)
      ct__put(b, "  v%d = ew_round_f16(v%d);\n", nd->var, nd->var);
    if (nd->odt == CT_BF16) ct__put(b, "  v%d = ew_round_bf16(v%d);\n", nd->var, nd->var);
  }
  g->nsc = nsc;
  for (int o = 0; o < g->nouts; o++) {
    struct ct__fnode *nd = g->outs[o];
    if (nd->odt == CT_BOOL)
      ct__put(b, "  o%d[o%d_off + i] = (uchar)((v%d) & 1);\n", o, o, nd->var);
    else if (nd->odt == CT_F16)
      ct__put(b, "  EW_STH(o%d, o%d_off + i, v%d);\n", o, o, nd->var);
    else if (nd->odt == CT_BF16)
      ct__put(b, "  EW_STBF(o%d, o%d_off + i, v%d);\n", o, o, nd->var);
    else
      ct__put(b, "  o%d[o%d_off + i] = v%d;\n", o, o, nd->var);
  }
}

/* g->sig for the kernel being generated: everything its text depends on. */
static void ct__signature(struct ct__fgen *g, struct ct__fnode **nodes, int nn, int (*opidx)[3], bool full,
                          const struct ct__fnode *red) {
  int64_t *q = g->sig;
  *q++ = full;
  *q++ = red ? red->red : -1;
  *q++ = red ? red->mean : 0; /* only the kernel's name differs: the mean divides in fz_final */
  *q++ = g->k;
  /* The dims reach the text only through strided operands: without them, a kernel over a [16]
   * bias and one over a [16, 1, 3, 3] weight are one text, one entry and one build (issue #30). */
  *q++ = g->strided ? g->ndim : 0;
  *q++ = g->cpu_red;
  *q++ = g->strided + ct__fgen_magic(g);
  *q++ = red ? (int64_t)red->odt : -1;
  *q++ = g->nops;
  for (int i = 0; i < g->nops; i++) {
    *q++ = g->ops[i].dt;
    *q++ = g->ops[i].kind;
    *q++ = g->ops[i].cond;
    /* A strided operand's offset sums only its dims of nonzero stride (below): which ones is
     * part of the source. */
    int64_t mask = 0;
    for (int dd = 0; dd < g->ndim; dd++) mask |= (int64_t)(g->ops[i].st[dd] != 0) << dd;
    *q++ = mask;
  }
  *q++ = g->nouts;
  for (int o = 0; o < g->nouts; o++) {
    *q++ = g->outs[o]->var;
    *q++ = g->outs[o]->odt;
  }
  *q++ = nn;
  for (int a = 0; a < nn; a++) {
    const struct ct__fnode *nd = nodes[a];
    *q++ = nd->cast | (int64_t)(nd->red + 1) << 1 | (int64_t)nd->l.op << 8 | (int64_t)nd->l.nin << 24 |
           (int64_t)nd->l.spos << 28 | (int64_t)nd->l.has_lo << 32 | (int64_t)nd->l.has_hi << 33 |
           (int64_t)nd->odt << 40 | (int64_t)nd->l.k << 48 | (int64_t)ct__ew_pow_special(&nd->l) << 56;
    for (int j = 0; j < nd->l.nin; j++) {
      const struct ct__fnode *p = nd->src[j];
      *q++ = p && p->kern == g->kk ? 100000 + p->var : opidx[a][j];
    }
  }
  g->nsig = (int)(q - g->sig);
}

/* The op functions of ew_ops.cl that the nodes call, so that the program defines those alone
 * (EW_ONLY; ew_ops.cl adds the functions they call): its build parses a few of the table's
 * functions rather than all of them (issue #30). Each name once, in node order: the text stays a
 * function of the signature (which holds each node's op and pow exponent). */
static void ct__put_wanted(struct ct__buf *b, struct ct__fnode **nodes, int nn) {
  ct__put(b, "#define EW_ONLY 1\n");
  for (int a = 0; a < nn; a++) {
    const struct ct__fnode *nd = nodes[a];
    if (nd->red >= 0 || nd->cast || nd->l.op == CT__EW_CLAMP) continue; /* no table function */
    const char *f = ct__ew_launch_fn(&nd->l);
    bool seen = false;
    for (int p = 0; p < a && !seen; p++) {
      const struct ct__fnode *q = nodes[p];
      seen = q->red < 0 && !q->cast && q->l.op != CT__EW_CLAMP && strcmp(ct__ew_launch_fn(&q->l), f) == 0;
    }
    if (!seen) ct__put(b, "#define EW_USE_%s 1\n", f);
  }
}

void ct__gen_kernel(struct ct__buf *b, struct ct__fgen *g, struct ct__fnode **nodes, int nn, const char *name,
                           bool full, struct ct__fnode *red) {
  /* Variables are numbered by position, so equal graphs give equal sources (one build). */
  for (int a = 0; a < nn; a++) nodes[a]->var = a;
  /* Operands first (their indices decide the parameter list). */
  int opidx[CT__FUSE_MAX_NODES][3];
  g->nops = 0;
  g->nsc = 0;
  g->nouts = 0;
  g->strided = false;
  for (int a = 0; a < nn; a++) {
    struct ct__fnode *nd = nodes[a];
    for (int j = 0; j < nd->l.nin; j++) {
      opidx[a][j] = -1;
      struct ct__fnode *p = nd->src[j];
      bool cond = nd->l.op == CT__EW_WHERE && j == 0 && nd->red < 0 && !nd->cast;
      if (p && p->kern == g->kk) continue;
      if (p) {
        int64_t st[CT_MAX_DIMS];
        ct__contiguous_strides(st, p->ndim, p->shape);
        ct_tensor *t = p->tmp;
        cl_mem mem = t ? ct__tensor_mem(t) : p->out->mem;
        int64_t off = p->out_off;
        if (t) ct__tensor_elem_offset(t, &off);
        opidx[a][j] = ct__op_add(g, mem, off, p->odt, p->ndim, p->shape, st, cond);
      } else {
        const ct_tensor *t = nd->leaf[j];
        int64_t off = 0;
        ct__tensor_elem_offset(t, &off);
        opidx[a][j] = ct__op_add(g, ct__tensor_mem(t), off, t->dtype, t->ndim, t->shape, t->strides, cond);
      }
    }
    if (nd->store && nd->red < 0) g->outs[g->nouts++] = nd;
  }

  ct__put(b, "/* generated by the fusion graph (src/fusion/) */\n");
  ct__put(b, "#define EW_K %d\n#define EW_O %d\n", ct__dt_code(g->k), ct__dt_code(g->k));
  ct__put_wanted(b, nodes, nn);
  ct__put(b, "//#include \"ew_ops.cl\"\n\n");
  if (red) ct__red_defs(b, red->red, CT__FR_IS_SOFTMAX(red->red) ? g->k : ct__red_acc_dtype(red));
  ct__put(b, "__kernel void %s(", name);
  for (int o = 0; o < g->nouts; o++) ct__put(b, "__global CT_T(%d) *o%d, long o%d_off, ", ct__dt_code(g->outs[o]->odt), o, o);
  for (int i = 0; i < g->nops; i++) {
    ct__put(b, "__global const CT_T(%d) *a%d, long a%d_off, ", ct__dt_code(g->ops[i].dt), i, i);
    if (g->ops[i].kind == 2) ct__put(b, "long8 a%d_st, ", i);
  }
  /* Scalars: one parameter per scalar of each node, in node order. */
  int nsc = 0;
  for (int a = 0; a < nn; a++) {
    struct ct__fnode *nd = nodes[a];
    if (nd->red >= 0 || nd->cast) continue;
    int np = ct__ew_op_nparams(nd->l.op);
    int cnt = nd->l.op == CT__EW_CLAMP ? (nd->l.has_lo + nd->l.has_hi) : (nd->l.spos ? 1 : 0) + (np == 1 ? 1 : 0);
    for (int c = 0; c < cnt; c++) ct__put(b, "EW_WB s%d, ", nsc++);
  }
  if (g->strided) ct__put(b, "long8 shp, ");
  if (ct__fgen_magic(g)) ct__put(b, "long8 shm, long8 shs, ");
  /* The work of one element i: index arithmetic, each memory operand loaded once (as the
   * per-op kernels load it), the nodes in call order, the stores and,
   * with a reduction, its input as fz_in. Written once, pasted where the layout needs it. */
  struct ct__buf body = {.skip = b->skip};
  ct__gen_body(&body, g, nodes, nn, opidx);
  if (body.t.oom) b->t.oom = true;
  const char *bt = body.t.s ? body.t.s : "";
  ct__signature(g, nodes, nn, opidx, full, red);
  if (red && CT__FR_IS_SOFTMAX(red->red)) {
    /* A work-item per row of ncols elements: the producer's values (and the results kept) in a
     * first pass, which also writes the values into the result (its dtype's rounding, as a
     * store and a load) and finds the row's max; then the sum of exp(x - max) (one serial sum:
     * the order differs from ct_softmax's own blocked sum); then the results. A NaN makes the
     * whole row NaN, as in softmax.cl. */
    int dc = ct__dt_code(red->odt);
    const char *ld = red->odt == CT_F16 ? "EW_LDH(so, so_off + i)" : red->odt == CT_BF16 ? "EW_LDBF(so, so_off + i)"
                                                                                       : "so[so_off + i]";
    char st1[96], st3[96];
    if (red->odt == CT_F16) {
      snprintf(st1, sizeof st1, "EW_STH(so, so_off + i, fz_in)");
      snprintf(st3, sizeof st3, "EW_STH(so, so_off + i, y)");
    } else if (red->odt == CT_BF16) {
      snprintf(st1, sizeof st1, "EW_STBF(so, so_off + i, fz_in)");
      snprintf(st3, sizeof st3, "EW_STBF(so, so_off + i, y)");
    } else {
      snprintf(st1, sizeof st1, "so[so_off + i] = fz_in");
      snprintf(st3, sizeof st3, "so[so_off + i] = y");
    }
    ct__put(b, "long ncols, long nrows, __global CT_T(%d) *so, long so_off) {\n"
               "  const long row = (long)get_global_id(0);\n"
               "  if (row >= nrows) return;\n"
               "  fz_acc m = (fz_acc)(-INFINITY);\n"
               "  for (long jj = 0; jj < ncols; jj++) {\n"
               "    const long i = row * ncols + jj;\n%s"
               "    %s;\n"
               "    const fz_acc x = %s;\n"
               "    m = (x > m || isnan(x)) ? x : m;\n"
               "  }\n"
               "  fz_acc sum = 0;\n"
               "  for (long jj = 0; jj < ncols; jj++) {\n"
               "    const long i = row * ncols + jj;\n"
               "    sum += exp(%s - m);\n"
               "  }\n"
               "  const fz_acc logs = log(sum);\n"
               "  for (long jj = 0; jj < ncols; jj++) {\n"
               "    const long i = row * ncols + jj;\n"
               "    const fz_acc x = %s;\n"
               "    const fz_acc y = %s;\n"
               "    %s;\n"
               "  }\n"
               "  (void)logs;\n}\n",
            dc, bt, st1, ld, ld, ld, red->red == CT__FR_LOG_SOFTMAX ? "(x - m) - logs" : "exp(x - m) / sum", st3);
  } else if (red && g->cpu_red) {
    /* CPUs: a work-item per chunk of contiguous elements, eight accumulators side by side
     * (the compiler vectorises the inner loop of eight), blocks of 1024 elements combined
     * pairwise into a running total: a few work-items keep every core busy without a
     * local-memory tree, whose barriers PoCL runs slowly. */
    ct__put(b, "long chunk, long n, __global fz_acc *part, long part_off) {\n"
               "  const long w = (long)get_global_id(0), lo = w * chunk, hi = min(n, lo + chunk);\n"
               "  fz_acc total = FZ_ID;\n"
               "  for (long blk = lo; blk < hi; blk += 1024) {\n"
               "    const long bhi = min(hi, blk + 1024);\n"
               "    fz_acc accs[8] = {FZ_ID, FZ_ID, FZ_ID, FZ_ID, FZ_ID, FZ_ID, FZ_ID, FZ_ID};\n"
               "    long j = blk;\n"
               "    for (; j + 8 <= bhi; j += 8) {\n"
               "      for (int u = 0; u < 8; u++) {\n"
               "        const long i = j + u;\n%s"
               "        accs[u] = FZ_COMB(accs[u], fz_in);\n"
               "      }\n"
               "    }\n"
               "    for (; j < bhi; j++) {\n"
               "      const long i = j;\n%s"
               "      accs[0] = FZ_COMB(accs[0], fz_in);\n"
               "    }\n"
               "    total = FZ_COMB(total, FZ_COMB(FZ_COMB(FZ_COMB(accs[0], accs[1]), FZ_COMB(accs[2], accs[3])),\n"
               "                                   FZ_COMB(FZ_COMB(accs[4], accs[5]), FZ_COMB(accs[6], accs[7]))));\n"
               "  }\n"
               "  part[part_off + w] = total;\n}\n", bt, bt);
  } else if (red) {
    /* Lanes (GPUs, rusticl): a grid-stride loop, each work-item accumulating the elements
     * i, i + G, i + 2G, ... (G the launch's work-items: neighbouring items read neighbouring
     * elements), then a tree per work-group into part[group]. The host sizes the grid
     * (ct__red_split): a few groups per compute unit, so that the tree's barriers and the
     * partials are paid once per group, not once per local-size elements (one element per item
     * ran at 0.39x the unfused ops on llvmpipe). */
    ct__put(b, "long n, __global fz_acc *part, long part_off, __local fz_acc *lacc) {\n"
               "  const int t = (int)get_local_id(0), L = (int)get_local_size(0);\n"
               "  const long G = (long)get_global_size(0);\n"
               "  fz_acc acc = FZ_ID;\n"
               "  for (long i = (long)get_global_id(0); i < n; i += G) {\n%s"
               "  acc = FZ_COMB(acc, fz_in);\n"
               "  }\n", bt);
    ct__put_tree(b, "part[part_off + get_group_id(0)]");
    ct__put(b, "}\n");
  } else {
    ct__put(b, "long base, long n) {\n  long i = base + (long)get_global_id(0);\n");
    if (!full) ct__put(b, "  if (i >= n) return;\n");
    else ct__put(b, "  (void)n;\n");
    ct__put(b, "%s}\n", bt);
  }
  free(body.t.s);
}

/* The second pass of a fused reduction: one work-group combines the parts and writes the
 * result (the mean divided by the count) in its dtype. */
void ct__gen_final(struct ct__buf *b, const struct ct__fnode *red, const char *name) {
  ct__put(b, "/* generated by the fusion graph (src/fusion/) */\n");
  ct__put(b, "#define EW_K %d\n#define EW_O %d\n#define EW_ONLY 1\n//#include \"ew_ops.cl\"\n\n", ct__dt_code(CT_F32),
          ct__dt_code(CT_F32));
  ct__red_defs(b, red->red, ct__red_acc_dtype(red));
  ct__put(b, "__kernel void %s(__global const fz_acc *part, long part_off, long nparts, __global CT_T(%d) *o, long o_off, "
             "long count, __local fz_acc *lacc) {\n"
             "  const int t = (int)get_local_id(0), L = (int)get_local_size(0);\n"
             "  fz_acc acc = FZ_ID;\n"
             "  for (long j = t; j < nparts; j += L) acc = FZ_COMB(acc, part[part_off + j]);\n",
          name, ct__dt_code(red->odt));
  ct__put(b, "  lacc[t] = acc;\n  barrier(CLK_LOCAL_MEM_FENCE);\n"
             "  for (int s = L / 2; s > 0; s >>= 1) {\n"
             "    if (t < s) lacc[t] = FZ_COMB(lacc[t], lacc[t + s]);\n"
             "    barrier(CLK_LOCAL_MEM_FENCE);\n  }\n"
             "  if (t != 0) return;\n  fz_acc r = lacc[0];\n");
  if (red->mean) ct__put(b, "  r = r / (fz_acc)count;\n");
  else ct__put(b, "  (void)count;\n");
  switch (red->odt) {
  case CT_F16: ct__put(b, "  EW_STH(o, o_off, (float)r);\n"); break;
  case CT_BF16: ct__put(b, "  EW_STBF(o, o_off, (float)r);\n"); break;
  case CT_BOOL: ct__put(b, "  o[o_off] = (uchar)(r != 0);\n"); break;
  default: ct__put(b, "  o[o_off] = (CT_T(%d))r;\n", ct__dt_code(red->odt)); break;
  }
  ct__put(b, "}\n");
}

const char *ct__node_name(const struct ct__fnode *nd) {
  if (nd->cast) return "cast";
  if (nd->red >= 0) return nd->mean ? "mean" : ct__red_name(nd->red);
  const char *f = ct__ew_op_fn(nd->l.op);
  return strncmp(f, "ew_", 3) == 0 ? f + 3 : f;
}

void ct__kernel_name_of(char *name, size_t size, struct ct__fnode **nodes, int nn) {
  size_t w = (size_t)snprintf(name, size, "fz");
  for (int a = 0; a < nn && w + 24 < size; a++) {
    if (a == 6) {
      w += (size_t)snprintf(name + w, size - w, "_x%d", nn);
      break;
    }
    w += (size_t)snprintf(name + w, size - w, "_%s", ct__node_name(nodes[a]));
  }
}
