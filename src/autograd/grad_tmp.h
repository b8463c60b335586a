/* The temporaries of a gradient formula (grad_ew.c, grad_reduce.c): every tensor a formula
 * makes lands in ct_tensor *t[CT__TMP] = {0}, and RELEASE_TMP(t) at its one exit (label done)
 * releases them all (a result handed to gin[] is made there directly, or retained first), so
 * a failure at any step leaks nothing. TRY(call) stores the status in st and jumps to done on
 * an error. */
#ifndef CT_AUTOGRAD_GRAD_TMP_H
#define CT_AUTOGRAD_GRAD_TMP_H

#include "cltensor/tensor.h"

#define CT__TMP 12
#define TRY(call)               \
  do {                          \
    st = (call);                \
    if (st != CT_OK) goto done; \
  } while (0)
#define RELEASE_TMP(t) \
  for (int k_ = 0; k_ < CT__TMP; k_++) ct_release(t[k_])

#endif
