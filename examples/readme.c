/* The program shown in README.md, kept identical to it and run as a test so the README stays true. */
#include <stdio.h>
#include <cltensor/cltensor.h>

int main(void) {
  ct_device *dev;
  ct_tensor *a = NULL, *t = NULL, *c = NULL;
  float host[6] = {1, 2, 3, 4, 5, 6}, res[6];
  int64_t shape[2] = {2, 3};

  if (ct_device_default(&dev) != CT_OK ||                 /* GPU if there is one, else CPU */
      ct_from_host(&a, dev, CT_F32, 2, shape, host) != CT_OK ||   /* host -> device */
      ct_transpose(&t, a, 0, 1) != CT_OK ||               /* a view, no copy */
      ct_exp(&c, t) != CT_OK ||
      ct_to_host(c, res, sizeof res) != CT_OK) {          /* device -> host */
    fprintf(stderr, "error: %s\n", ct_last_error());
    return 1;
  }
  ct_print(stdout, c);
  ct_release(c); ct_release(t); ct_release(a);
  ct_shutdown();
  return 0;
}
