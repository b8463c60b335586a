/* The temporaries of a gradient formula, in one scope that releases them, so a formula is a
 * straight line of its math with no cleanup path of its own:
 *
 *   ct__tmps s = {0};
 *   ct_tensor *y2 = TMP(&s, ct_mul, y, y);          // a new temporary, owned by s
 *   ct_tensor *d = TMP(&s, ct_rsub_scalar, y2, 1.0);
 *   GIN(&s, &gin[0], ct_mul, g, d);                 // a result the formula hands out
 *   return ct__tmps_end(&s);                        // releases y2, d; the first failure
 *
 * TMP(s, op, args...) calls op(&slot, args...) and returns the new tensor (owned by s);
 * GIN(s, dst, op, args...) calls op(dst, args...); STEP(s, call) runs any other call. After a
 * failure every later step is skipped (TMP returns NULL; the arguments are still evaluated, so
 * they must not dereference an earlier result, nor nest a TMP) and ct__tmps_end returns that
 * failure: a failure at any step leaks nothing and runs nothing more. Temporaries are released
 * at the end, in the order they were made, or earlier by ct__tmps_drop where the formula wants
 * the memory back before its next steps. */
#ifndef CT_AUTOGRAD_GRAD_TMP_H
#define CT_AUTOGRAD_GRAD_TMP_H

#include "cltensor/tensor.h"
#include "core/error.h"

#define CT__TMP 16

typedef struct ct__tmps {
  ct_status st; /* the first failure, CT_OK so far */
  int n;        /* slots used */
  ct_tensor *t[CT__TMP];
} ct__tmps;

/* Whether the next step runs: no failure so far and a free slot (a formula that needs more than
 * CT__TMP temporaries is a bug: CT_ERR_INTERNAL). */
static inline bool ct__tmps_go(ct__tmps *s) {
  if (s->st == CT_OK && s->n == CT__TMP)
    s->st = ct__error(CT_ERR_INTERNAL, "ct_backward: a gradient formula needs more than %d temporaries", CT__TMP);
  return s->st == CT_OK;
}

/* Takes the result of the step that ran (status st) into s: the new tensor, or NULL. */
static inline ct_tensor *ct__tmps_take(ct__tmps *s, ct_status st) {
  if (s->st != CT_OK) return NULL;
  if (st != CT_OK) {
    s->st = st;
    return NULL;
  }
  return s->t[s->n++];
}

#define TMP(s, op, ...) ct__tmps_take((s), ct__tmps_go(s) ? (op)(&(s)->t[(s)->n], __VA_ARGS__) : (s)->st)
#define GIN(s, dst, op, ...) ((void)((s)->st == CT_OK ? ((s)->st = (op)((dst), __VA_ARGS__)) : (s)->st))
/* STEP(s, call): any other call returning a status (a helper making several results). */
#define STEP(s, call) ((void)((s)->st == CT_OK ? ((s)->st = (call)) : (s)->st))

/* Releases temporary t (made by TMP in s; NULL: nothing) now. */
static inline void ct__tmps_drop(ct__tmps *s, ct_tensor *t) {
  for (int i = 0; t && i < s->n; i++)
    if (s->t[i] == t) {
      ct_release(t);
      s->t[i] = NULL;
      return;
    }
}

/* Releases every temporary of s; returns its first failure (CT_OK when every step ran). */
static inline ct_status ct__tmps_end(ct__tmps *s) {
  for (int i = 0; i < s->n; i++) ct_release(s->t[i]);
  s->n = 0;
  return s->st;
}

#endif
