/* cltensor._fast: the C base of cltensor.Tensor (issue #32).
 *
 * A small op called from Python through cffi costs about 2.5x the same call from C, and cffi's
 * own call path (argument conversion, GIL release, result boxing) is most of the gap
 * (docs/PERFORMANCE.md, Python). This module removes it for the hot operators: TensorBase holds
 * the ct_tensor * in a C field, its tp_dealloc calls ct_release, and a + b, a - b, a * b, a / b,
 * a @ b between two tensors call ct_add, ct_sub, ct_mul, ct_div, ct_matmul directly. Everything
 * else stays in Python (cltensor/_tensor.py's Tensor, a subclass):
 *   - every other operand (a scalar, an array, None, an empty tensor) goes to the Python
 *     operator given to setup(), unchanged, so scalars, NumPy arrays, NotImplemented and the
 *     errors behave exactly as before. (A Python subclass that defined __add__ would replace the
 *     C slot for every call, so the fallback is called from here rather than by returning
 *     NotImplemented.)
 *   - a failing status raises through the package's raise_status(), with ct_last_error();
 *   - ._h is still the cffi pointer the Python code passes to lib.ct_*: made from the C field on
 *     first use (cffi's own converters, from _cffi_backend's exported C API, the table every
 *     compiled cffi module uses) and kept; assigning ._h sets the C field.
 * The tensors are kept in a list (live()) because they are not tracked by the garbage collector
 * (a tensor references no Python object that could form a cycle), and cltensor.shutdown() must
 * still find every one of them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cltensor/cltensor.h>
#include <string.h>

/* Two functions of cffi's exported C API, the table _cffi_backend._C_API points to (entries 10
 * and 11 of cffi/_cffi_include.h's _cffi_exports: its stable ABI, which every compiled cffi
 * module relies on). Their second argument is a cffi ctype object. */
static PyObject *(*ct_py__from_c_pointer)(char *, PyObject *);
static char *(*ct_py__to_c_pointer)(PyObject *, PyObject *);

typedef struct ct_py_tensor {
  PyObject_HEAD
  ct_tensor *ptr;   /* the owned reference (NULL: none, or released by shutdown) */
  PyObject *h;      /* what ._h returns: the cffi pointer to ptr, made on first use; None, or
                     * ffi.NULL after shutdown; NULL while neither is known */
  PyObject *weakreflist;
  struct ct_py_tensor *prev, *next; /* every TensorBase alive, for live() */
} ct_py_tensor;

/* The binary operators in C, one row each: the library call and the slot it fills. */
typedef ct_status (*ct_py_binary_fn)(ct_tensor **, const ct_tensor *, const ct_tensor *);
enum { CT_PY_ADD, CT_PY_SUB, CT_PY_MUL, CT_PY_DIV, CT_PY_MATMUL, CT_PY_NOPS };
static const struct {
  const char *name; /* the key of setup()'s fallbacks */
  ct_py_binary_fn fn;
} ct_py__ops[CT_PY_NOPS] = {
    [CT_PY_ADD] = {"add", ct_add}, [CT_PY_SUB] = {"sub", ct_sub}, [CT_PY_MUL] = {"mul", ct_mul},
    [CT_PY_DIV] = {"truediv", ct_div}, [CT_PY_MATMUL] = {"matmul", ct_matmul},
};

static PyTypeObject ct_py_tensor_base;
static PyTypeObject *ct_py__result_type;      /* cltensor.Tensor, set by setup() */
static PyObject *ct_py__ctype;                /* ffi.typeof("ct_tensor *") */
static PyObject *ct_py__raise_status;         /* _core.raise_status */
static PyObject *ct_py__fallback[CT_PY_NOPS][2]; /* the Python operators: self OP other, other OP self */
static ct_py_tensor ct_py__live = {.prev = &ct_py__live, .next = &ct_py__live}; /* list head */

static void ct_py__link(ct_py_tensor *t) {
  t->next = ct_py__live.next;
  t->prev = &ct_py__live;
  ct_py__live.next->prev = t;
  ct_py__live.next = t;
}

static PyObject *ct_py_tensor_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  (void)args;
  (void)kwargs;
  ct_py_tensor *t = (ct_py_tensor *)type->tp_alloc(type, 0);
  if (t) ct_py__link(t);
  return (PyObject *)t;
}

static void ct_py_tensor_dealloc(PyObject *self) {
  ct_py_tensor *t = (ct_py_tensor *)self;
  if (t->next) {
    t->prev->next = t->next;
    t->next->prev = t->prev;
  }
  if (t->weakreflist) PyObject_ClearWeakRefs(self);
  ct_tensor *p = t->ptr;
  t->ptr = NULL;
  Py_CLEAR(t->h);
  if (p) ct_release(p); /* allowed after ct_shutdown too: only host memory is freed then */
  Py_TYPE(self)->tp_free(self); /* a subclass's reference to its type: subtype_dealloc drops it */
}

static PyObject *ct_py_tensor_get_h(PyObject *self, void *closure) {
  (void)closure;
  ct_py_tensor *t = (ct_py_tensor *)self;
  if (!t->h) {
    if (!t->ptr) {
      PyErr_SetString(PyExc_AttributeError, "_h"); /* as an unset slot: never given a handle */
      return NULL;
    }
    t->h = ct_py__from_c_pointer((char *)t->ptr, ct_py__ctype);
    if (!t->h) return NULL;
  }
  Py_INCREF(t->h);
  return t->h;
}

/* Assigning ._h changes which reference the object owns without releasing the old one, as the
 * slot it replaces did: the Python code releases or hands over the old handle itself
 * (nn.Parameter, cltensor.shutdown). */
static int ct_py_tensor_set_h(PyObject *self, PyObject *value, void *closure) {
  (void)closure;
  ct_py_tensor *t = (ct_py_tensor *)self;
  ct_tensor *p = NULL;
  if (value && value != Py_None) {
    p = (ct_tensor *)ct_py__to_c_pointer(value, ct_py__ctype);
    if (!p && PyErr_Occurred()) return -1;
  }
  Py_XINCREF(value);
  Py_XSETREF(t->h, value);
  t->ptr = p;
  return 0;
}

static PyObject *ct_py__result(ct_status st, ct_tensor *out) {
  if (st != CT_OK) {
    PyObject *code = PyLong_FromLong((long)st);
    if (!code) return NULL;
    PyObject *r = PyObject_CallOneArg(ct_py__raise_status, code); /* raises: r is NULL */
    Py_DECREF(code);
    if (r) {
      Py_DECREF(r);
      PyErr_SetString(PyExc_SystemError, "cltensor._fast: raise_status returned");
    }
    return NULL;
  }
  ct_py_tensor *t = (ct_py_tensor *)ct_py__result_type->tp_alloc(ct_py__result_type, 0);
  if (!t) {
    ct_release(out);
    return NULL;
  }
  t->ptr = out;
  ct_py__link(t);
  return (PyObject *)t;
}

static PyObject *ct_py__binary(int op, PyObject *l, PyObject *r) {
  int lt = PyObject_TypeCheck(l, &ct_py_tensor_base), rt = PyObject_TypeCheck(r, &ct_py_tensor_base);
  if (lt && rt && ((ct_py_tensor *)l)->ptr && ((ct_py_tensor *)r)->ptr) {
    ct_tensor *out = NULL;
    ct_status st;
    /* Read with the GIL held, and held by a reference of the call's own: while the GIL is
     * released another thread may replace an operand's handle (`._h = ...`, shutdown()) and
     * release the old one. */
    ct_tensor *a = ct_retain(((ct_py_tensor *)l)->ptr), *b = ct_retain(((ct_py_tensor *)r)->ptr);
    /* Released as cffi releases it: a call may wait (a kernel build, a full queue), and other
     * threads may call the library meanwhile. ct_last_error() is per thread. */
    Py_BEGIN_ALLOW_THREADS
    st = ct_py__ops[op].fn(&out, a, b);
    ct_release(a);
    ct_release(b);
    Py_END_ALLOW_THREADS
    return ct_py__result(st, out);
  }
  PyObject *fb = lt ? ct_py__fallback[op][0] : ct_py__fallback[op][1];
  if (!fb) Py_RETURN_NOTIMPLEMENTED; /* before setup() */
  return lt ? PyObject_CallFunctionObjArgs(fb, l, r, NULL) : PyObject_CallFunctionObjArgs(fb, r, l, NULL);
}

#define CT_PY_SLOT(fn, op) \
  static PyObject *fn(PyObject *l, PyObject *r) { return ct_py__binary(op, l, r); }
CT_PY_SLOT(ct_py_nb_add, CT_PY_ADD)
CT_PY_SLOT(ct_py_nb_sub, CT_PY_SUB)
CT_PY_SLOT(ct_py_nb_mul, CT_PY_MUL)
CT_PY_SLOT(ct_py_nb_div, CT_PY_DIV)
CT_PY_SLOT(ct_py_nb_matmul, CT_PY_MATMUL)

static PyNumberMethods ct_py_tensor_number = {
    .nb_add = ct_py_nb_add,
    .nb_subtract = ct_py_nb_sub,
    .nb_multiply = ct_py_nb_mul,
    .nb_true_divide = ct_py_nb_div,
    .nb_matrix_multiply = ct_py_nb_matmul,
};

static PyGetSetDef ct_py_tensor_getset[] = {
    {"_h", ct_py_tensor_get_h, ct_py_tensor_set_h, "the ct_tensor * as a cffi pointer", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ct_py_tensor_base = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cltensor._fast.TensorBase",
    .tp_basicsize = sizeof(ct_py_tensor),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C part of cltensor.Tensor: the ct_tensor reference and the hot operators.",
    .tp_new = ct_py_tensor_new,
    .tp_dealloc = ct_py_tensor_dealloc,
    .tp_weaklistoffset = offsetof(ct_py_tensor, weakreflist),
    .tp_as_number = &ct_py_tensor_number,
    .tp_getset = ct_py_tensor_getset,
};

/* setup(Tensor, ctype, raise_status, fallbacks): fallbacks maps "add", ... to the pair of Python
 * operators (self OP other, self ROP other) the C slots call for operands they leave to Python. */
static PyObject *ct_py_setup(PyObject *mod, PyObject *args) {
  (void)mod;
  PyObject *type, *ctype, *raise, *fallbacks;
  if (!PyArg_ParseTuple(args, "O!OOO!", &PyType_Type, &type, &ctype, &raise, &PyDict_Type, &fallbacks))
    return NULL;
  if (!PyType_IsSubtype((PyTypeObject *)type, &ct_py_tensor_base))
    return PyErr_Format(PyExc_TypeError, "setup: %R is not a TensorBase subclass", type);
  PyObject *pairs[CT_PY_NOPS][2];
  for (int i = 0; i < CT_PY_NOPS; i++) {
    PyObject *pair = PyDict_GetItemString(fallbacks, ct_py__ops[i].name);
    if (!pair || !PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2)
      return PyErr_Format(PyExc_ValueError, "setup: no (op, rop) pair for %s", ct_py__ops[i].name);
    pairs[i][0] = PyTuple_GET_ITEM(pair, 0);
    pairs[i][1] = PyTuple_GET_ITEM(pair, 1);
  }
  Py_INCREF(type);
  Py_XSETREF(ct_py__result_type, (PyTypeObject *)type);
  Py_INCREF(ctype);
  Py_XSETREF(ct_py__ctype, ctype);
  Py_INCREF(raise);
  Py_XSETREF(ct_py__raise_status, raise);
  for (int i = 0; i < CT_PY_NOPS; i++)
    for (int k = 0; k < 2; k++) {
      Py_INCREF(pairs[i][k]);
      Py_XSETREF(ct_py__fallback[i][k], pairs[i][k]);
    }
  Py_RETURN_NONE;
}

/* Every TensorBase object alive (for cltensor.shutdown(), which releases their references). */
static PyObject *ct_py_live(PyObject *mod, PyObject *unused) {
  (void)mod;
  (void)unused;
  PyObject *list = PyList_New(0);
  if (!list) return NULL;
  for (ct_py_tensor *t = ct_py__live.next; t != &ct_py__live; t = t->next)
    /* A subclass instance being deallocated is still linked while its __dict__ is cleared (a
     * __del__ may run then): never hand it out again. */
    if (Py_REFCNT(t) > 0 && PyList_Append(list, (PyObject *)t) < 0) {
      Py_DECREF(list);
      return NULL;
    }
  return list;
}

static PyMethodDef ct_py_methods[] = {
    {"setup", ct_py_setup, METH_VARARGS, "setup(Tensor, ctype, raise_status, fallbacks)"},
    {"live", ct_py_live, METH_NOARGS, "live() -> every TensorBase object alive, as a list"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef ct_py_module = {
    PyModuleDef_HEAD_INIT, .m_name = "cltensor._fast",
    .m_doc = "The C fast path of cltensor.Tensor (issue #32).", .m_size = -1, .m_methods = ct_py_methods,
};

PyMODINIT_FUNC PyInit__fast(void) {
  PyObject *backend = PyImport_ImportModule("_cffi_backend");
  if (!backend) return NULL;
  PyObject *api = PyObject_GetAttrString(backend, "_C_API");
  Py_DECREF(backend);
  if (!api) return NULL;
  const char *exports = PyCapsule_GetPointer(api, "cffi");
  if (exports) { /* entries are function pointers stored as void *: copied, not converted */
    memcpy(&ct_py__from_c_pointer, exports + 10 * sizeof(void *), sizeof ct_py__from_c_pointer);
    memcpy(&ct_py__to_c_pointer, exports + 11 * sizeof(void *), sizeof ct_py__to_c_pointer);
  }
  Py_DECREF(api);
  if (!exports) return NULL;
  if (PyType_Ready(&ct_py_tensor_base) < 0) return NULL;
  PyObject *m = PyModule_Create(&ct_py_module);
  if (!m) return NULL;
  Py_INCREF(&ct_py_tensor_base);
  if (PyModule_AddObject(m, "TensorBase", (PyObject *)&ct_py_tensor_base) < 0) {
    Py_DECREF(&ct_py_tensor_base);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
