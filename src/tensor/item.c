/* ct_item, ct_item_int64: a one-element tensor's value on the host (PyTorch's .item()). */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "core/error.h"
#include "tensor/tensor.h"

/* Reads t's one element into buf (16 bytes), after the checks both calls share. */
static ct_status read_one(unsigned char *buf, const ct_tensor *t, const char *fn) {
  CT__CHECK_NOT_NULL(fn, t);
  int64_t n = ct_numel(t);
  if (n != 1) {
    char s[200];
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: a tensor with %" PRId64 " elements (shape %s) cannot be converted to a scalar (expected "
                     "exactly one element)",
                     fn, n, ct__shape_str(s, sizeof s, t->ndim, t->shape));
  }
  return ct_to_host(t, buf, 16);
}

ct_status ct_item(double *out, const ct_tensor *t) {
  const char *fn = "ct_item";
  CT__CHECK_NOT_NULL(fn, out);
  *out = NAN;
  unsigned char buf[16] = {0};
  CT__TRY(read_one(buf, t, fn));
  *out = ct__host_load_double(t->dtype, buf);
  return CT_OK;
}

ct_status ct_item_int64(int64_t *out, const ct_tensor *t) {
  const char *fn = "ct_item_int64";
  CT__CHECK_NOT_NULL(fn, out);
  *out = 0;
  unsigned char buf[16] = {0};
  CT__TRY(read_one(buf, t, fn));
  if (t->dtype == CT_U64) {
    uint64_t v;
    memcpy(&v, buf, sizeof v);
    if (v > (uint64_t)INT64_MAX)
      return ct__error(CT_ERR_INVALID_ARGUMENT, "%s: the u64 value %" PRIu64 " does not fit int64", fn, v);
    *out = (int64_t)v;
    return CT_OK;
  }
  if (!ct_dtype_is_floating_point(t->dtype)) {
    *out = ct__host_load_int(t->dtype, buf);
    return CT_OK;
  }
  double v = ct__host_load_double(t->dtype, buf);
  /* -2^63 <= v < 2^63, both bounds exact in double. */
  if (!(v == nearbyint(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    return ct__error(CT_ERR_INVALID_ARGUMENT,
                     "%s: the %s value %.17g is not an integer that fits int64 (ct_item gives it as a double)", fn,
                     ct_dtype_name(t->dtype), v);
  *out = (int64_t)v;
  return CT_OK;
}
