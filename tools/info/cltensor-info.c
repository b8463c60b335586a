/* cltensor-info: lists the OpenCL devices libcltensor sees, like `nvidia-smi -L`. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cltensor/cltensor.h"

static void usage(FILE *f) {
  fprintf(f,
          "Usage: cltensor-info [--json] [--verbose] [--device SPEC]\n"
          "Lists the OpenCL devices libcltensor can use, in its order (GPUs, accelerators, CPUs).\n"
          "\n"
          "  -j, --json          one JSON object per device with every property (a JSON array)\n"
          "  -v, --verbose       also extensions and limits\n"
          "  -d, --device SPEC   only this device: auto, gpu[:N], cpu[:N], accelerator[:N],\n"
          "                      cl:P:D, name:SUBSTRING\n"
          "  -h, --help          this text\n"
          "  -V, --version       the library version\n"
          "\n"
          "The default device (marked *) is $CLTENSOR_DEVICE when set, else the first listed.\n"
          "When $CLTENSOR_DEVICE names no device, every device is still listed, none is marked,\n"
          "and a warning on stderr says why.\n");
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

/* Writes s to f with control and non-ASCII bytes as \xNN: it comes from the environment. */
static void put_escaped(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c >= 0x7f || c == '\\') fprintf(f, "\\x%02x", c);
    else fputc(c, f);
  }
}

static void fmt_bytes(char *buf, size_t n, unsigned long long b) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int i = 0;
  while (v >= 1024 && i < 4) v /= 1024, i++;
  snprintf(buf, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static void print_json(ct_device *d, int is_default, int first) {
  const ct_device_props *p = ct_device_properties(d);
  printf("%s  {\"spec\": ", first ? "" : ",\n");
  json_str(ct_device_spec(d));
  printf(", \"index\": %d, \"default\": %s, \"type\": \"%s\", \"name\": ", ct_device_index(d),
         is_default ? "true" : "false", ct_device_type_name(p->type));
  json_str(p->name);
  printf(", \"vendor\": ");
  json_str(p->vendor);
  printf(", \"platform\": ");
  json_str(p->platform_name);
  printf(", \"platform_version\": ");
  json_str(p->platform_version);
  printf(", \"driver_version\": ");
  json_str(p->driver_version);
  printf(", \"device_version\": ");
  json_str(p->device_version);
  printf(", \"opencl_c_version\": ");
  json_str(p->opencl_c_version);
  printf(", \"platform_index\": %d, \"device_index\": %d", p->platform_index, p->device_index);
  printf(", \"compute_units\": %u, \"max_clock_mhz\": %u", p->compute_units, p->max_clock_mhz);
  printf(", \"global_mem_bytes\": %llu, \"max_alloc_bytes\": %llu, \"local_mem_bytes\": %llu",
         (unsigned long long)p->global_mem_bytes, (unsigned long long)p->max_alloc_bytes,
         (unsigned long long)p->local_mem_bytes);
  printf(", \"max_work_group_size\": %zu, \"mem_base_addr_align_bits\": %u", p->max_work_group_size,
         p->mem_base_addr_align_bits);
  printf(", \"kernel_style\": \"%s\", \"kernel_style_reason\": ", ct_device_kernel_style(d));
  json_str(ct_device_kernel_style_reason(d));
  printf(", \"host_unified_memory\": %s, \"fp64\": %s, \"fp16\": %s, \"extensions\": [",
         p->host_unified_memory ? "true" : "false", p->fp64 ? "true" : "false", p->fp16 ? "true" : "false");
  const char *s = p->extensions;
  int n = 0;
  while (*s) {
    while (*s == ' ') s++;
    if (!*s) break;
    const char *e = s;
    while (*e && *e != ' ') e++;
    printf("%s\"%.*s\"", n++ ? ", " : "", (int)(e - s), s);
    s = e;
  }
  printf("]}");
}

static void print_row(ct_device *d, int is_default, int verbose) {
  const ct_device_props *p = ct_device_properties(d);
  char mem[32];
  fmt_bytes(mem, sizeof mem, p->global_mem_bytes);
  printf("%c %-14s %-11s %-40.40s %-28.28s %10s %4u CU  fp64:%-3s fp16:%-3s\n", is_default ? '*' : ' ',
         ct_device_spec(d), ct_device_type_name(p->type), p->name, p->platform_name, mem, p->compute_units,
         p->fp64 ? "yes" : "no", p->fp16 ? "yes" : "no");
  if (!verbose) return;
  char alloc[32], local[32];
  fmt_bytes(alloc, sizeof alloc, p->max_alloc_bytes);
  fmt_bytes(local, sizeof local, p->local_mem_bytes);
  printf("    OpenCL: cl:%d:%d  vendor: %s\n", p->platform_index, p->device_index, p->vendor);
  printf("    version: %s  (%s)  driver: %s  platform: %s\n", p->device_version, p->opencl_c_version,
         p->driver_version, p->platform_version);
  printf("    clock: %u MHz  max alloc: %s  local memory: %s  max work-group: %zu  unified memory: %s\n",
         p->max_clock_mhz, alloc, local, p->max_work_group_size, p->host_unified_memory ? "yes" : "no");
  printf("    kernel style: %s (%s)\n", ct_device_kernel_style(d), ct_device_kernel_style_reason(d));
  printf("    extensions: %s\n", p->extensions);
}

int main(int argc, char **argv) {
  static const struct option opts[] = {{"json", no_argument, 0, 'j'},    {"verbose", no_argument, 0, 'v'},
                                       {"device", required_argument, 0, 'd'}, {"help", no_argument, 0, 'h'},
                                       {"version", no_argument, 0, 'V'},  {0, 0, 0, 0}};
  int json = 0, verbose = 0, c;
  const char *spec = NULL;
  while ((c = getopt_long(argc, argv, "jvd:hV", opts, NULL)) != -1) {
    switch (c) {
      case 'j': json = 1; break;
      case 'v': verbose = 1; break;
      case 'd': spec = optarg; break;
      case 'h': usage(stdout); return 0;
      case 'V': printf("cltensor-info %s\n", CT_VERSION_STRING); return 0;
      default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "cltensor-info: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  int count = 0;
  ct_status st = ct_device_count(&count);
  if (st != CT_OK) {
    fprintf(stderr, "cltensor-info: %s\n", ct_last_error());
    return 1;
  }
  ct_device *def = NULL, *only = NULL;
  const char *env = getenv("CLTENSOR_DEVICE");
  if (ct_device_default(&def) != CT_OK && env) {
    /* This is the tool a user runs to find a valid spec: list everything anyway. */
    fprintf(stderr, "cltensor-info: warning: $CLTENSOR_DEVICE='");
    put_escaped(stderr, env);
    fprintf(stderr, "' selects no device, so none is marked as the default: %s\n", ct_last_error());
    def = NULL;
  }
  if (spec && ct_device_find(&only, spec) != CT_OK) {
    fprintf(stderr, "cltensor-info: %s\n", ct_last_error());
    return 1;
  }
  if (count == 0) {
    fprintf(stderr, "cltensor-info: OpenCL platforms are installed but they have no devices\n");
    return 1;
  }
  if (json) printf("[\n");
  else
    printf("  %-14s %-11s %-40s %-28s %10s %7s\n", "SPEC", "TYPE", "NAME", "PLATFORM", "MEMORY", "COMPUTE");
  int first = 1;
  for (int i = 0; i < count; i++) {
    ct_device *d;
    if (ct_device_get(&d, i) != CT_OK) {
      fprintf(stderr, "cltensor-info: %s\n", ct_last_error());
      return 1;
    }
    if (only && d != only) continue;
    if (json) print_json(d, d == def, first);
    else print_row(d, d == def, verbose);
    first = 0;
  }
  if (json) printf("\n]\n");
  ct_shutdown();
  return 0;
}
