/* A program that returns from main while host-route products still run on the device's workers
 * (an error path that skips ct_synchronize) exits normally: the library's destructor waits for
 * its native commands before OpenBLAS's destructor frees what they use (host_native.c). Not a
 * Check test: the exit itself is what is tested; meson checks the exit status. */
#include <stdio.h>

#include <cltensor/cltensor.h>

int main(void) {
  ct_device *d = NULL;
  if (ct_device_find(&d, "cpu") != CT_OK) {
    printf("1..0 # SKIP no CPU device: %s\n", ct_last_error());
    return 0;
  }
  /* The GPT's products: 2048 x 256 x 64, cut into parts (below 2^26 multiply-adds). */
  ct_tensor *a = NULL, *b = NULL, *c[40] = {NULL};
  if (ct_randn_seeded(&a, d, CT_F32, 2, (int64_t[]){2048, 64}, 1, 7) != CT_OK ||
      ct_randn_seeded(&b, d, CT_F32, 2, (int64_t[]){64, 256}, 1, 8) != CT_OK) {
    printf("not ok 1 - %s\n", ct_last_error());
    return 1;
  }
  /* Forty products queued (each cut into parts with a helper); none waited for. */
  for (int i = 0; i < 40; i++)
    if (ct_matmul(&c[i], a, b) != CT_OK) {
      printf("not ok 1 - %s\n", ct_last_error());
      return 1;
    }
  /* Releasing returns the memory to the allocator's cache without waiting for the device. */
  for (int i = 0; i < 40; i++) ct_release(c[i]);
  ct_release(a);
  ct_release(b);
  printf("1..1\nok 1 - returning with products in flight\n");
  return 0;
}
