/* Counts the OpenCL objects a test program holds, by interposing the OpenCL API.
 *
 * Linking clcount.c into a test executable defines clCreateBuffer, clReleaseMemObject and every
 * other OpenCL 1.2 call that creates, retains or releases a context, queue, buffer, program,
 * kernel or event; the library's calls (and CLBlast's, whose calls resolve to the executable's
 * exported definitions first) land there, are counted, and go on to the ICD loader through
 * dlsym(RTLD_NEXT). After ct_shutdown() every count must be back to zero: this is how the leak
 * tests see a leaked cl_mem or cl_event, which LeakSanitizer and valgrind cannot tell apart
 * from the OpenCL implementation's own allocations (see tests/lsan.supp). */
#ifndef CT_STRESS_CLCOUNT_H
#define CT_STRESS_CLCOUNT_H

enum clcount_kind {
  CLCOUNT_CONTEXT,
  CLCOUNT_QUEUE,
  CLCOUNT_MEM,
  CLCOUNT_PROGRAM,
  CLCOUNT_KERNEL,
  CLCOUNT_EVENT,
  CLCOUNT_SAMPLER,
  CLCOUNT_KINDS
};

/* References currently held, per kind: creations and retains minus releases. */
long clcount_live(enum clcount_kind kind);

/* "context", "queue", ... */
const char *clcount_name(enum clcount_kind kind);

/* Writes "context=0 queue=1 ..." into buf (for failure messages); returns buf. */
char *clcount_format(char *buf, unsigned long size);

/* 1 when every count is zero. */
int clcount_all_released(void);

#endif
