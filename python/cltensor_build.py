"""cffi builder of the extension module cltensor._cltensor_cffi (API mode, out-of-line), and the
setuptools Extension of cltensor._fast (fast_extension(), the C base of Tensor: _fast.c).

The declarations are python/cltensor/_cdef.h, generated from the public headers by
python/gen_cdef.py, plus the few C helpers of the package below (named ct_py_*). In API mode the
C compiler sees the real headers beside the declarations, so a declaration that does not match
its header fails the build instead of crashing at run time.

Where the library comes from:
  - by default the installed one, through pkg-config (`pkg-config --cflags --libs cltensor`:
    after `meson install`, or PKG_CONFIG_PATH pointing at a build's meson-uninstalled folder);
    the library's folder is also recorded as the module's run path, so a prefix outside the
    dynamic linker's path (/usr/local/lib/... before `ldconfig`, a home folder) still loads;
  - with CLTENSOR_BUILD_DIR=<meson build folder>, the library built there (<dir>/src) and the
    headers of the source tree (CLTENSOR_INCLUDE_DIR, default: ../include beside this file):
    what the package's tests use, without installing anything.
"""
import os
import shlex
import subprocess

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))

# The package's own C helpers. DLPack's structs are spelled out (their layout is DLPack's stable
# ABI) rather than taken from <dlpack/dlpack.h>, so the package builds without DLPack's headers
# and handles both the legacy and the 1.x versioned struct whatever header the library had.
DLPACK_STRUCTS = """
typedef struct { int32_t device_type; int32_t device_id; } ct_py_dldevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } ct_py_dldtype;
typedef struct {
  void *data; ct_py_dldevice device; int32_t ndim; ct_py_dldtype dtype;
  int64_t *shape; int64_t *strides; uint64_t byte_offset;
} ct_py_dltensor;
typedef struct ct_py_dlmanaged {
  ct_py_dltensor dl_tensor; void *manager_ctx; void (*deleter)(struct ct_py_dlmanaged *);
} ct_py_dlmanaged;
typedef struct ct_py_dlversioned {
  uint32_t major; uint32_t minor; void *manager_ctx; void (*deleter)(struct ct_py_dlversioned *);
  uint64_t flags; ct_py_dltensor dl_tensor;
} ct_py_dlversioned;
"""

# The operators' fast forms: ct_py_<op>(a, b) and ct_py_<op>_scalar(a, s) return the result (NULL
# on failure, its status then in ct_py_status(), thread-local like ct_last_error()) instead of
# writing it through an out-parameter, so a Python operator needs no ffi.new'd cell per call nor a
# read of it (about a tenth of a small op's cost from Python). The ops the Tensor operators use:
FAST_BINARY = ("add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "matmul", "bitwise_and",
               "bitwise_or", "bitwise_xor", "eq", "ne", "lt", "le", "gt", "ge")
FAST_SCALAR = ("add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "eq", "ne", "lt", "le", "gt",
               "ge")

HELPERS_CDEF = DLPACK_STRUCTS + """
uintptr_t ct_py_capsule_destructor(int versioned);
ct_status ct_py_status(void);
""" + "".join("ct_tensor *ct_py_%s(const ct_tensor *a, const ct_tensor *b);\n" % op for op in FAST_BINARY) \
    + "".join("ct_tensor *ct_py_%s_scalar(const ct_tensor *a, double s);\n" % op for op in FAST_SCALAR)

HELPERS_SRC = r"""
#include <cltensor/cltensor.h>

""" + DLPACK_STRUCTS + r"""

/* The destructors of the DLPack capsules the package hands out. The protocol: a consumer that
 * takes the tensor renames the capsule "used_dltensor" (or "used_dltensor_versioned") and
 * becomes responsible for the deleter; a capsule destroyed under its original name was never
 * consumed, so the deleter is ours to call. Either way it runs exactly once. These run from
 * the garbage collector, possibly while an exception is set: the name is checked with
 * PyCapsule_IsValid, which does not raise. */
static void ct_py__capsule_legacy(PyObject *cap) {
  if (!PyCapsule_IsValid(cap, "dltensor")) return;
  ct_py_dlmanaged *m = (ct_py_dlmanaged *)PyCapsule_GetPointer(cap, "dltensor");
  if (m && m->deleter) m->deleter(m);
}

static void ct_py__capsule_versioned(PyObject *cap) {
  if (!PyCapsule_IsValid(cap, "dltensor_versioned")) return;
  ct_py_dlversioned *m = (ct_py_dlversioned *)PyCapsule_GetPointer(cap, "dltensor_versioned");
  if (m && m->deleter) m->deleter(m);
}

/* The destructor's address, for PyCapsule_New (called through ctypes.pythonapi). */
static uintptr_t ct_py_capsule_destructor(int versioned) {
  return versioned ? (uintptr_t)&ct_py__capsule_versioned : (uintptr_t)&ct_py__capsule_legacy;
}

/* The status of the calling thread's last ct_py_<op> (cffi releases the GIL around each call, so
 * threads may call at once). */
static _Thread_local ct_status ct_py__status;
static ct_status ct_py_status(void) { return ct_py__status; }

#define CT_PY_BINARY(op)                                                  \
  static ct_tensor *ct_py_##op(const ct_tensor *a, const ct_tensor *b) {  \
    ct_tensor *out = NULL;                                                \
    ct_py__status = ct_##op(&out, a, b);                                  \
    return out;                                                           \
  }
#define CT_PY_SCALAR(op)                                                  \
  static ct_tensor *ct_py_##op##_scalar(const ct_tensor *a, double s) {  \
    ct_tensor *out = NULL;                                                \
    ct_py__status = ct_##op##_scalar(&out, a, s);                         \
    return out;                                                           \
  }
""" + "".join("CT_PY_BINARY(%s)\n" % op for op in FAST_BINARY) \
    + "".join("CT_PY_SCALAR(%s)\n" % op for op in FAST_SCALAR)


def _pkgconfig(*args):
    return subprocess.run(["pkg-config", *args, "cltensor"], check=True, capture_output=True,
                          text=True).stdout.strip()


def library_kwargs():
    """The Extension keywords that compile and link against libcltensor: the build folder's
    (CLTENSOR_BUILD_DIR) or pkg-config's, with the run path. Shared by the cffi module and
    cltensor._fast, so both load the same library."""
    build = os.environ.get("CLTENSOR_BUILD_DIR")
    if build:
        build = os.path.abspath(build)
        include = os.environ.get("CLTENSOR_INCLUDE_DIR") or os.path.join(os.path.dirname(HERE), "include")
        libdir = os.path.join(build, "src")
        return dict(include_dirs=[include], library_dirs=[libdir], runtime_library_dirs=[libdir],
                    libraries=["cltensor"])
    try:
        flags = shlex.split(_pkgconfig("--cflags")) + shlex.split(_pkgconfig("--libs"))
        # The run path: the -L folders (an uninstalled build's src/, a /usr/local prefix;
        # pkg-config leaves the system's own out) and libdir when it exists.
        dirs = [a[2:] for a in shlex.split(_pkgconfig("--libs-only-L")) if a.startswith("-L")]
        libdir = _pkgconfig("--variable=libdir")
        if os.path.isdir(libdir) and libdir not in dirs and libdir not in ("/usr/lib", "/lib") \
                and not libdir.startswith("/usr/lib/"):
            dirs.append(libdir)
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit("cltensor: pkg-config cannot find the C library (%s). Install it first "
                         "(meson install), point PKG_CONFIG_PATH at its .pc file, or set "
                         "CLTENSOR_BUILD_DIR to a meson build folder." % e)
    kw = dict(include_dirs=[], library_dirs=[], runtime_library_dirs=dirs, libraries=[],
              extra_compile_args=[], extra_link_args=[])
    for f in flags:
        key = {"-I": "include_dirs", "-L": "library_dirs", "-l": "libraries"}.get(f[:2])
        if key:
            kw[key].append(f[2:])
        else:
            kw["extra_link_args" if f.startswith("-Wl,") else "extra_compile_args"].append(f)
    return kw


def make_ffi():
    ffi = FFI()
    with open(os.path.join(HERE, "cltensor", "_cdef.h"), encoding="utf-8") as f:
        ffi.cdef(f.read() + HELPERS_CDEF)
    ffi.set_source("cltensor._cltensor_cffi", HELPERS_SRC, **library_kwargs())
    return ffi


def fast_extension(source=os.path.join(HERE, "cltensor", "_fast.c")):
    """cltensor._fast, the C base of Tensor with the hot operators (cltensor/_fast.c): a plain
    CPython extension, linked against the same library as the cffi module. setup.py passes the
    source relative to python/, as setuptools wants."""
    from setuptools import Extension
    kw = library_kwargs()
    kw["extra_compile_args"] = kw.get("extra_compile_args", []) + ["-std=c11"]
    return Extension("cltensor._fast", [source], **kw)


ffibuilder = make_ffi()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
