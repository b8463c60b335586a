/* A walk through libcltensor: pick a device, put data on it, move it, compute, bring the result
 * back, make the classic mistake (tensors on two devices) and see the error, and run out of
 * device memory without falling over.
 *
 *   walkthrough              (POCL_DEVICES="pthread pthread" gives PoCL two CPU devices)
 *
 * Exits 0 when every step behaved as described, 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>

#include "cltensor/cltensor.h"

static int ok = 1;

/* Every call returns a ct_status; on failure ct_last_error() tells the story. */
#define TRY(call)                                                                        \
  do {                                                                                   \
    if ((call) != CT_OK) {                                                               \
      fprintf(stderr, "walkthrough: %s failed: %s\n", #call, ct_last_error());            \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

/* A call that must fail with a given status: prints what the library said. */
static void expect(ct_status got, ct_status want, const char *what) {
  printf("  %s -> %s\n  ct_last_error(): %s\n", what, ct_status_name(got), ct_last_error());
  if (got != want) {
    printf("  UNEXPECTED: wanted %s\n", ct_status_name(want));
    ok = 0;
  }
}

int main(void) {
  /* 1. Devices. The default is $CLTENSOR_DEVICE if set, else the first GPU, else the CPU. */
  int count;
  TRY(ct_device_count(&count));
  printf("1. %d OpenCL device(s):\n", count);
  for (int i = 0; i < count; i++) {
    ct_device *d;
    TRY(ct_device_get(&d, i));
    const ct_device_props *p = ct_device_properties(d);
    printf("   %-8s %s (%u compute units, %.1f GiB)\n", ct_device_spec(d), p->name, p->compute_units,
           (double)p->global_mem_bytes / (1 << 30));
  }
  ct_device *dev;
  TRY(ct_device_default(&dev));
  printf("   using %s\n\n", ct_device_spec(dev));

  /* 2. A tensor from host data (copied to the device) and one made on the device directly. */
  float host[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  ct_tensor *a, *range, *b;
  TRY(ct_from_host(&a, dev, CT_F32, 2, shape, host));
  TRY(ct_arange(&range, dev, CT_F32, 0.0, 6.0, 1.0));
  TRY(ct_view(&b, range, 2, shape)); /* [[0, 1, 2], [3, 4, 5]]: a view, no copy */
  printf("2. a (from the host):\n");
  TRY(ct_print(stdout, a));
  printf("\n   b (made on the device):\n");
  TRY(ct_print(stdout, b));
  printf("\n");

  /* 3. Moving data between devices is always explicit. */
  ct_device *other = NULL;
  ct_tensor *moved = NULL;
  for (int i = 0; i < count && !other; i++) {
    ct_device *d;
    TRY(ct_device_get(&d, i));
    if (d != dev) other = d;
  }
  if (other) {
    TRY(ct_to_device(&moved, a, other));
    printf("3. a copied to %s: %s\n\n", ct_device_spec(ct_tensor_device(moved)),
           ct_tensor_device(moved) == other ? "ok" : "WRONG DEVICE");
    ok &= ct_tensor_device(moved) == other;
  } else {
    /* On the device it is already on, ct_to_device hands back the same tensor (PyTorch's .to()). */
    TRY(ct_to_device(&moved, a, dev));
    printf("3. one device only: ct_to_device(a, %s) returns a itself: %s\n\n", ct_device_spec(dev),
           moved == a ? "yes" : "NO");
    ok &= moved == a;
  }

  /* 4. Compute: ops run asynchronously on the device's queue. */
  ct_tensor *sum, *prod;
  TRY(ct_add(&sum, a, b));
  TRY(ct_mul(&prod, sum, a)); /* (a + b) * a */
  printf("4. computed (a + b) * a on %s (queued; nothing waited yet)\n\n", ct_device_spec(dev));

  /* 5. Bring the result back (ct_to_host waits for the queue) and print it. */
  float res[6];
  TRY(ct_to_host(prod, res, sizeof res));
  printf("5. (a + b) * a on %s:\n", ct_device_spec(dev));
  TRY(ct_print(stdout, prod));
  printf("\n   on the host:");
  for (int i = 0; i < 6; i++) {
    printf(" %g", res[i]);
    ok &= res[i] == (host[i] + (float)i) * host[i];
  }
  printf("\n\n");

  /* 6. The classic mistake: an op on tensors that live on different devices. cltensor never
   * copies behind your back; it says which devices, and you move one explicitly. */
  ct_tensor *bad = NULL;
  if (other) {
    printf("6. a on %s + b on %s:\n", ct_device_spec(other), ct_device_spec(dev));
    expect(ct_add(&bad, moved, b), CT_ERR_DEVICE_MISMATCH, "ct_add(&bad, moved, b)");
    ct_tensor *back, *fixed;
    TRY(ct_to_device(&back, moved, dev));
    TRY(ct_add(&fixed, back, b));
    printf("  fixed with ct_to_device(&back, moved, %s), then ct_add works\n\n", ct_device_spec(dev));
    ct_release(fixed);
    ct_release(back);
  } else {
    printf("6. one device only (with PoCL, POCL_DEVICES=\"pthread pthread\" gives two and shows the\n"
           "   device mismatch); the same kind of message for shapes that don't broadcast:\n");
    int64_t four = 4;
    ct_tensor *v;
    TRY(ct_zeros(&v, dev, CT_F32, 1, &four));
    expect(ct_add(&bad, a, v), CT_ERR_SHAPE_MISMATCH, "ct_add(&bad, a [2, 3], v [4])");
    printf("\n");
    ct_release(v);
  }
  ok &= bad == NULL;

  /* 7. Out of memory: ask for twice the device's memory. The call fails cleanly, the message
   * has the numbers, and everything else keeps working. */
  const ct_device_props *p = ct_device_properties(dev);
  int64_t n = (int64_t)(p->global_mem_bytes / sizeof(float)) * 2;
  ct_tensor *huge = NULL;
  printf("7. asking for %.1f GiB on a device with %.1f GiB:\n", (double)n * 4 / (1 << 30),
         (double)p->global_mem_bytes / (1 << 30));
  expect(ct_empty(&huge, dev, CT_F32, 1, &n), CT_ERR_OUT_OF_MEMORY, "ct_empty(&huge, ...)");
  ct_tensor *again;
  TRY(ct_add(&again, a, b));
  TRY(ct_to_host(again, res, sizeof res));
  printf("  carrying on: a + b = [%g, %g, %g, ...]\n\n", res[0], res[1], res[2]);
  ok &= res[5] == 11.0f;

  ct_release(again);
  ct_release(prod);
  ct_release(sum);
  ct_release(moved);
  ct_release(b);
  ct_release(range);
  ct_release(a);
  ct_shutdown();
  printf("%s\n", ok ? "walkthrough: every step behaved as described" : "walkthrough: SOMETHING WENT WRONG");
  return ok ? 0 : 1;
}
