/* Scopes for temporaries and the sticky error: the public functions of cltensor/scope.h and
 * the steps the generated API wrappers take (tensor/scope.h explains the boundary).
 *
 * One record per thread: ent[0..nent) holds one slot per tensor reference that the thread's
 * open scopes own (NULL once released or kept out: a hole), frames[0..nframes) the open
 * scopes, innermost last, each owning the slots from its start up to the next frame's start
 * (or nent). Keeping a tensor moves its slot to the enclosing frame by swapping it with the
 * frame's first slot and advancing the frame's start; nothing else moves slots, except that
 * the innermost frame is compacted when holes fill most of it. `lost` counts the scopes
 * begun while no frame could be allocated: failed ones (CT_ERR_OUT_OF_MEMORY), above every
 * frame, owning nothing. Each tensor counts the slots that hold it (scope_refs, atomic since a
 * tensor is shared by threads), so ct_release() of a tensor no scope owns searches nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "tensor/scope.h"
#include "tensor/tensor.h"

struct ct__frame {
  size_t start;    /* its first slot */
  size_t holes;    /* NULL slots from start on, as counted while innermost (may fall short: a hint) */
  ct_status status;
  char *msg;       /* the first error's message (malloc'd); NULL when none or not allocated */
};

struct ct__scopes {
  ct_tensor **ent;
  size_t nent, cap;
  struct ct__frame *frames;
  int nframes, fcap;
  int lost;
};

_Thread_local int ct__scope_active;
static _Thread_local struct ct__scopes ct__sc;
static _Thread_local long ct__fail_after = -1;

/* The message when the first error's text could not be copied. */
static const char ct__no_msg[] = "(the first error's message could not be kept: out of host memory)";

void ct__scope_test_fail_alloc(long after) { ct__fail_after = after; }

static void *ct__sc_realloc(void *p, size_t bytes) {
  if (ct__fail_after >= 0 && ct__fail_after-- == 0) return NULL;
  return realloc(p, bytes);
}

static struct ct__frame *ct__top(void) {
  return ct__sc.nframes ? &ct__sc.frames[ct__sc.nframes - 1] : NULL;
}

/* The innermost scope's status: a lost scope is a failed one. */
static ct_status ct__top_status(void) {
  if (ct__sc.lost) return CT_ERR_OUT_OF_MEMORY;
  struct ct__frame *f = ct__top();
  return f ? f->status : CT_OK;
}

static const char *ct__top_msg(void) {
  if (ct__sc.lost) return "ct_scope_begin: out of host memory for the scope's record";
  struct ct__frame *f = ct__top();
  return f && f->msg ? f->msg : ct__no_msg;
}

static void ct__update_active(void) {
  ct__scope_active = ct__sc.nframes > 0 || ct__sc.lost > 0;
  if (!ct__scope_active) {
    free(ct__sc.ent);
    free(ct__sc.frames);
    memset(&ct__sc, 0, sizeof ct__sc);
  }
}

/* A copy of msg naming fn: msg itself when it starts with "fn:", else "fn: msg". */
static char *ct__msg_for(const char *fn, const char *msg) {
  size_t fl = strlen(fn), ml = strlen(msg);
  bool named = strncmp(msg, fn, fl) == 0 && msg[fl] == ':';
  size_t n = named ? ml + 1 : fl + 2 + ml + 1;
  char *m = ct__sc_realloc(NULL, n);
  if (!m) return NULL;
  if (named)
    memcpy(m, msg, ml + 1);
  else {
    memcpy(m, fn, fl);
    memcpy(m + fl, ": ", 2);
    memcpy(m + fl + 2, msg, ml + 1);
  }
  return m;
}

/* Makes st (the thread's message being its story) the innermost scope's first error unless it
 * has one. fn names the call that failed. */
static void ct__record(const char *fn, ct_status st) {
  struct ct__frame *f = ct__top();
  if (st == CT_OK || ct__sc.lost || !f || f->status != CT_OK) return;
  f->status = st;
  f->msg = ct__msg_for(fn, ct_last_error());
}

/* Room for n more slots. */
static bool ct__reserve(size_t n) {
  if (ct__sc.cap - ct__sc.nent >= n) return true;
  size_t cap = ct__sc.cap ? ct__sc.cap : 64;
  while (cap - ct__sc.nent < n) {
    if (cap > SIZE_MAX / 2 / sizeof *ct__sc.ent) return false;
    cap *= 2;
  }
  ct_tensor **e = ct__sc_realloc(ct__sc.ent, cap * sizeof *e);
  if (!e) return false;
  ct__sc.ent = e;
  ct__sc.cap = cap;
  return true;
}

static void ct__push(ct_tensor *t) {
  atomic_fetch_add_explicit(&t->scope_refs, 1, memory_order_relaxed);
  ct__sc.ent[ct__sc.nent++] = t;
}

/* Empties slot i (its reference no longer the scope's); trailing holes are dropped, and the
 * innermost frame compacted when holes are most of it. */
static void ct__hole(size_t i) {
  atomic_fetch_sub_explicit(&ct__sc.ent[i]->scope_refs, 1, memory_order_relaxed);
  ct__sc.ent[i] = NULL;
  struct ct__frame *f = ct__top();
  if (f && i >= f->start) f->holes++;
  while (ct__sc.nent > (f ? f->start : 0) && !ct__sc.ent[ct__sc.nent - 1]) {
    ct__sc.nent--;
    if (f && f->holes) f->holes--;
  }
  if (f && f->holes > 64 && f->holes * 2 > ct__sc.nent - f->start) {
    size_t w = f->start;
    for (size_t r = f->start; r < ct__sc.nent; r++)
      if (ct__sc.ent[r]) ct__sc.ent[w++] = ct__sc.ent[r];
    ct__sc.nent = w;
    f->holes = 0;
  }
}

/* The innermost slot holding t from slot `from` up, or SIZE_MAX. */
static size_t ct__find(const ct_tensor *t, size_t from) {
  for (size_t i = ct__sc.nent; i > from; i--)
    if (ct__sc.ent[i - 1] == t) return i - 1;
  return SIZE_MAX;
}

/* ---- the wrappers' steps ---- */

ct_status ct__scope_enter(const char *fn) {
  (void)fn;
  ct_status st = ct__top_status();
  if (st != CT_OK) ct__error(st, "%s", ct__top_msg());
  return st;
}

/* Out of memory for the record of a call's n results, which the caller released. */
static ct_status ct__register_failed(const char *fn, int n) {
  ct_status st = ct__error(CT_ERR_OUT_OF_MEMORY,
                           "%s: out of host memory for the scope's record of its %d result%s (released)", fn, n,
                           n == 1 ? "" : "s");
  ct__record(fn, st);
  return st;
}

/* A lost scope owns nothing: every call in it is skipped (the ALWAYS_RUN ones hand no tensor
 * out), so nothing reaches here then. */
ct_status ct__scope_leave(const char *fn, ct_status st, int n, ct_tensor **const *outs) {
  if (st != CT_OK) {
    ct__record(fn, st);
    return st;
  }
  if (ct__sc.lost || !ct__sc.nframes) return CT_OK;
  if (ct__reserve((size_t)n)) {
    for (int i = 0; i < n; i++)
      if (outs[i] && *outs[i]) ct__push(*outs[i]);
    return CT_OK;
  }
  for (int i = 0; i < n; i++)
    if (outs[i]) {
      ct_release(*outs[i]);
      *outs[i] = NULL;
    }
  return ct__register_failed(fn, n);
}

ct_status ct__scope_leave_array(const char *fn, ct_status st, ct_tensor **outs, int *nout) {
  if (st != CT_OK) {
    ct__record(fn, st);
    return st;
  }
  int n = outs && nout ? *nout : 0;
  if (n <= 0 || ct__sc.lost || !ct__sc.nframes) return CT_OK;
  if (ct__reserve((size_t)n)) {
    for (int i = 0; i < n; i++)
      if (outs[i]) ct__push(outs[i]);
    return CT_OK;
  }
  for (int i = 0; i < n; i++) {
    ct_release(outs[i]);
    outs[i] = NULL;
  }
  *nout = 0;
  return ct__register_failed(fn, n);
}

void ct__scope_unclaim(ct_tensor *t) {
  if (!t || !atomic_load_explicit(&t->scope_refs, memory_order_relaxed)) return;
  size_t i = ct__find(t, 0);
  if (i != SIZE_MAX) ct__hole(i);
}

void ct__scope_adopt(ct_tensor *t) {
  if (ct__scope_active) ct__scope_unclaim(t);
}

/* ---- the public functions ---- */

ct_status ct_scope_begin(void) {
  ct_status inherited = ct__top_status();
  if (ct__sc.lost || ct__sc.nframes == ct__sc.fcap) {
    int cap = ct__sc.fcap ? ct__sc.fcap * 2 : 16;
    struct ct__frame *f = ct__sc.lost || ct__sc.fcap > INT32_MAX / 2
                              ? NULL
                              : ct__sc_realloc(ct__sc.frames, (size_t)cap * sizeof *f);
    if (!f) {
      /* A lost scope: failed, owning nothing, ended by the next ct_scope_end. */
      ct_status st = ct__error(CT_ERR_OUT_OF_MEMORY, "ct_scope_begin: out of host memory for the scope's record");
      ct__record("ct_scope_begin", st);
      ct__sc.lost++;
      ct__scope_active = 1;
      return st;
    }
    ct__sc.frames = f;
    ct__sc.fcap = cap;
  }
  struct ct__frame *f = &ct__sc.frames[ct__sc.nframes];
  *f = (struct ct__frame){.start = ct__sc.nent, .status = inherited};
  if (inherited != CT_OK) {
    const char *m = ct__top_msg();
    size_t ml = strlen(m);
    f->msg = ct__sc_realloc(NULL, ml + 1);
    if (f->msg) memcpy(f->msg, m, ml + 1);
    ct__error(inherited, "%s", m);
  }
  ct__sc.nframes++;
  ct__scope_active = 1;
  return inherited;
}

/* Ends the innermost scope (a lost one first): releases what it owns, hands its error to the
 * enclosing scope. Returns its status, the thread's message set to its first error's. */
static ct_status ct__end(void) {
  ct_status st;
  if (ct__sc.lost) {
    ct__sc.lost--;
    st = ct__error(CT_ERR_OUT_OF_MEMORY, "ct_scope_begin: out of host memory for the scope's record");
    ct__update_active();
    ct__record("ct_scope_begin", st);
    return st;
  }
  struct ct__frame fr = ct__sc.frames[--ct__sc.nframes];
  /* Released innermost first, as a function's temporaries would be. */
  for (size_t i = ct__sc.nent; i > fr.start; i--) {
    ct_tensor *t = ct__sc.ent[i - 1];
    if (!t) continue;
    atomic_fetch_sub_explicit(&t->scope_refs, 1, memory_order_relaxed);
    ct_release(t);
  }
  ct__sc.nent = fr.start;
  struct ct__frame *outer = ct__top();
  st = fr.status;
  if (st != CT_OK) {
    ct__error(st, "%s", fr.msg ? fr.msg : ct__no_msg);
    /* The message already names the call that failed first. */
    if (outer && outer->status == CT_OK) {
      outer->status = st;
      outer->msg = fr.msg;
      fr.msg = NULL;
    }
  }
  free(fr.msg);
  ct__update_active();
  return st;
}

ct_status ct_scope_end(void) {
  if (!ct__scope_active) return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_scope_end: no scope is open in this thread");
  return ct__end();
}

/* Moves t's slot from the innermost frame out (to the enclosing frame, or to the caller). */
static ct_status ct__keep(ct_tensor *t, const char *fn) {
  if (!ct__scope_active) return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: no scope is open in this thread", fn);
  ct_status top = ct__top_status();
  if (!t) {
    if (top != CT_OK) return ct__error(top, "%s", ct__top_msg());
    ct_status st = ct__error(CT_ERR_INVALID_ARGUMENT, "%s: argument 't' is NULL", fn);
    ct__record(fn, st);
    return st;
  }
  struct ct__frame *f = ct__top();
  size_t i = ct__sc.lost || !f ? SIZE_MAX : ct__find(t, f->start);
  if (i == SIZE_MAX) {
    if (top != CT_OK) return ct__error(top, "%s", ct__top_msg());
    ct_status st = ct__error(CT_ERR_INVALID_ARGUMENT,
                             "%s: the tensor is not owned by the innermost scope (made outside it, kept or released "
                             "already)", fn);
    ct__record(fn, st);
    return st;
  }
  if (ct__sc.nframes == 1) {
    ct__hole(i);
  } else {
    ct_tensor *first = ct__sc.ent[f->start];
    ct__sc.ent[f->start] = t;
    ct__sc.ent[i] = first; /* a hole stays a hole of this frame */
    f->start++;
  }
  return CT_OK;
}

ct_status ct_keep(ct_tensor *t) { return ct__keep(t, "ct_keep"); }

ct_status ct_scope_end_keep(ct_tensor **t) {
  if (!ct__scope_active)
    return ct__error(CT_ERR_INVALID_ARGUMENT, "ct_scope_end_keep: no scope is open in this thread");
  ct_status st = ct__top_status();
  if (!t) {
    st = ct__error(CT_ERR_INVALID_ARGUMENT, "ct_scope_end_keep: argument 't' is NULL");
    ct__record("ct_scope_end_keep", st);
  } else if (st == CT_OK) {
    st = ct__keep(*t, "ct_scope_end_keep");
  }
  if (st != CT_OK && t) *t = NULL;
  /* A failure of the keep itself is the scope's error by now: ct__end returns it. */
  return ct__end();
}

ct_status ct_scope_status(void) {
  ct_status st = ct__top_status();
  if (st != CT_OK) ct__error(st, "%s", ct__top_msg());
  return st;
}

int ct_scope_depth(void) { return ct__sc.nframes + ct__sc.lost; }
