/* Scopes for temporaries and the sticky error (include/cltensor/scope.h), as the API boundary
 * sees them.
 *
 * The boundary. Every public function returning ct_status, and ct_release, is compiled twice
 * over: the library's own definition is renamed ct__api_<name> in every library source (the
 * header api_rename.h, forced in with -include, that scripts/api_boundary.py generates from
 * the public headers), and a generated wrapper (api_wrappers.c, same script) defines the
 * public name around it. Inside the library a call such as ct_matmul() therefore reaches the
 * definition directly; only callers outside it (users, tests, tools, a user's callback) go
 * through a wrapper. So the wrapper knows that the references it hands out leave the library,
 * which is what a scope must own, and that the status it returns is the one the user sees,
 * which is what the sticky error records: internal temporaries and internally handled
 * failures never reach a scope.
 *
 * A wrapper, while this thread has a scope (ct__scope_active):
 *   1. ct__scope_enter(): CT_OK, or the scope's first error when the scope has failed; the
 *      wrapper then sets its pointer out-parameters to NULL (a count out-parameter to 0) and
 *      returns it without calling the definition (a few calls that end work already started
 *      or restore thread state skip this step: scripts/api_boundary.py, ALWAYS_RUN);
 *   2. the definition;
 *   3. ct__scope_leave(): on success registers every tensor the call handed out through a
 *      `ct_tensor **` out-parameter in the innermost scope (out of memory for that: the
 *      tensors are released, the outs NULL, CT_ERR_OUT_OF_MEMORY); on failure records the
 *      first error of the scope, its message naming the call.
 * ct_release()'s wrapper drops one of this thread's scope entries for the tensor before the
 * reference goes, so a released tensor is never released again at the scope's end.
 *
 * Library code that calls a user's callback which hands a tensor back (a module's forward)
 * owns that reference but the scope registered it too: it calls ct__scope_adopt() on it. */
#ifndef CT_TENSOR_SCOPE_H
#define CT_TENSOR_SCOPE_H

#include <stdbool.h>
#include <stddef.h>

#include "cltensor/scope.h"
#include "cltensor/tensor.h"

/* Nonzero while the calling thread has a scope open (the wrappers' one load when none is). */
extern _Thread_local int ct__scope_active;

/* Step 1: CT_OK when the call named fn is to run; the innermost scope's first error when that
 * scope has failed (the thread's message set to the first error's). */
ct_status ct__scope_enter(const char *fn);
/* Step 3 for a call with n single tensor out-parameters outs[0..n) (NULL ones skipped, NULL
 * results too). Returns the call's status, or CT_ERR_OUT_OF_MEMORY when the results could not
 * be registered. */
ct_status ct__scope_leave(const char *fn, ct_status st, int n, ct_tensor **const *outs);
/* Step 3 for an array out-parameter outs[0..*nout) (ct_chunk, ct_split). */
ct_status ct__scope_leave_array(const char *fn, ct_status st, ct_tensor **outs, int *nout);
/* ct_release()'s step: drops the innermost of this thread's entries for t, if any. */
void ct__scope_unclaim(ct_tensor *t);
/* The library takes over a reference that a public call handed to a user's callback: the
 * innermost scope entry for it is dropped without releasing (no-op when there is none). */
void ct__scope_adopt(ct_tensor *t);

/* Tests: of this thread's next allocations for scope records, the first `after` succeed and the
 * one after them fails (as if out of memory), once; -1 (the default) cancels that. */
void ct__scope_test_fail_alloc(long after);

#endif
