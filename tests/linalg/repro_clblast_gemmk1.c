/* Reproducer, not a test (no meson target; docs/PORTABILITY.md, "linalg-tune-tool"): CLBlast's
 * Xgemm with GEMMK=1 sets, on the first OpenCL device, without cltensor. It installs a set with
 * CLBlastOverrideParameters, runs one row-major SGEMM (indirect kernel forced by a crossover of
 * 48) into a C followed by 4096 guard floats, and says how many elements are wrong and how many
 * guard floats were written. On CPU implementations buffers live in the host heap, so writes
 * past them may instead abort the process in glibc or crash it, run to run: PoCL 3.1 printed
 * 8192 of 16384 wrong and 2048 guard floats at 128^3 once and aborted ("double free or
 * corruption") another time; rusticl printed 61 of 4355 wrong once and segfaulted another. Exit
 * status 1 means it said wrong elements or stray writes.
 *
 *   cc -O1 tests/linalg/repro_clblast_gemmk1.c -o repro -lclblast -lOpenCL -lm
 *   ./repro 1 128 128 128            # the set below (seed 3 of cltensor-tune on llvmpipe)
 *   ./repro 1 128 128 128 NWG=64     # one parameter changed
 *   ./repro 0 67 65 69               # a GEMMK=0 set (the library's conservative one)
 *   OCL_ICD_VENDORS=/etc/OpenCL/vendors/rusticl.icd RUSTICL_ENABLE=swrast ./repro 1 */
#define CL_TARGET_OPENCL_VERSION 120
#include <clblast_c.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  static const char *names[16] = {"GEMMK", "KREG",  "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB",
                                  "NDIMC", "NWG",   "SA",  "SB",  "STRM",  "STRN",  "VWM", "VWN"};
  size_t gemmk1[16] = {1, 4, 1, 1, 8, 8, 64, 4, 4, 128, 0, 0, 0, 0, 4, 2};
  size_t gemmk0[16] = {0, 1, 16, 2, 8, 8, 32, 8, 8, 32, 0, 0, 0, 0, 1, 1};
  size_t *v = argc > 1 && atoi(argv[1]) == 0 ? gemmk0 : gemmk1;
  size_t m = argc > 2 ? (size_t)atoi(argv[2]) : 67, n = argc > 3 ? (size_t)atoi(argv[3]) : 65;
  size_t k = argc > 4 ? (size_t)atoi(argv[4]) : 69, guard = 4096;
  for (int a = 5; a < argc; a++) {
    const char *eq = strchr(argv[a], '=');
    for (int i = 0; eq && i < 16; i++)
      if (strlen(names[i]) == (size_t)(eq - argv[a]) && !strncmp(argv[a], names[i], strlen(names[i])))
        v[i] = (size_t)atoi(eq + 1);
  }
  cl_platform_id p;
  cl_device_id d;
  cl_int e;
  char name[256] = "";
  if (clGetPlatformIDs(1, &p, NULL) || clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, NULL)) return 2;
  clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name, name, NULL);
  cl_context c = clCreateContext(NULL, 1, &d, NULL, NULL, &e);
  cl_command_queue q = clCreateCommandQueue(c, d, 0, &e);
  const char *rn[1] = {"XGEMM_MIN_INDIRECT_SIZE"};
  size_t rv[1] = {48};
  int o1 = CLBlastOverrideParameters(d, "Xgemm", CLBlastPrecisionSingle, 16, names, v);
  int o2 = CLBlastOverrideParameters(d, "GemmRoutine", CLBlastPrecisionSingle, 1, rn, rv);
  printf("%s: GEMMK=%zu, %zux%zux%zu, overrides %d %d\n", name, v[0], m, n, k, o1, o2);
  fflush(stdout);
  float *a = malloc(m * k * 4), *b = malloc(k * n * 4), *h = malloc((m * n + guard) * 4);
  for (size_t i = 0; i < m * k; i++) a[i] = (float)((i * 37) % 11) - 5;
  for (size_t i = 0; i < k * n; i++) b[i] = (float)((i * 13) % 7) - 3;
  for (size_t i = 0; i < m * n + guard; i++) h[i] = 12345.f;
  cl_mem ma = clCreateBuffer(c, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, m * k * 4, a, &e);
  cl_mem mb = clCreateBuffer(c, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, k * n * 4, b, &e);
  cl_mem mc = clCreateBuffer(c, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, (m * n + guard) * 4, h, &e);
  int st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, n, k, 1.f, ma, 0, k,
                        mb, 0, n, 0.f, mc, 0, n, &q, NULL);
  clEnqueueReadBuffer(q, mc, CL_TRUE, 0, (m * n + guard) * 4, h, 0, NULL, NULL);
  size_t bad = 0, stray = 0;
  long first = -1;
  for (size_t i = 0; i < m; i++)
    for (size_t j = 0; j < n; j++) {
      double r = 0;
      for (size_t t = 0; t < k; t++) r += (double)a[i * k + t] * b[t * n + j];
      if (fabs(h[i * n + j] - r) > 1e-3) {
        if (first < 0) first = (long)(i * n + j);
        bad++;
      }
    }
  for (size_t i = m * n; i < m * n + guard; i++) stray += h[i] != 12345.f;
  printf("status %d: %zu of %zu elements wrong (first at %ld), %zu guard floats written\n", st, bad, m * n,
         first, stray);
  clReleaseMemObject(ma);
  clReleaseMemObject(mb);
  clReleaseMemObject(mc);
  CLBlastClearCache();
  clReleaseCommandQueue(q);
  clReleaseContext(c);
  free(a);
  free(b);
  free(h);
  return bad || stray;
}
