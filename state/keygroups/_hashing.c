/*
 * Optional C accelerator for flinkstate.state.keygroups: Java hashCode() semantics (String
 * over UTF-16 code units, Integer, Long) and Flink's murmur finalizer, then the key group,
 * of one key or of a whole buffer of keys. keygroups/hashing.py defines the semantics.
 */
#include "_javahash.h"
#include <string.h>

static PyObject *
py_murmur_hash(PyObject *self, PyObject *arg)
{
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "hash code out of 32-bit range");
        return NULL;
    }
    return PyLong_FromLong(murmur((int32_t)v));
}

static PyObject *
py_java_string_hash(PyObject *self, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected str");
        return NULL;
    }
    return PyLong_FromLong(string_hash(arg));
}

static PyObject *
py_key_group_for_hash(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long maxp;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (hash_code, max_parallelism)");
        return NULL;
    }
    long long v = PyLong_AsLongLong(args[0]);
    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "hash code out of 32-bit range");
        return NULL;
    }
    if (read_max_parallelism(args[1], &maxp) < 0) {
        return NULL;
    }
    return PyLong_FromLong(murmur((int32_t)v) % maxp);
}

static PyObject *
py_key_group_for_long(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long maxp;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (key, max_parallelism)");
        return NULL;
    }
    long long v = PyLong_AsLongLong(args[0]);
    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (read_max_parallelism(args[1], &maxp) < 0) {
        return NULL;
    }
    uint64_t u = (uint64_t)v;
    int32_t code = (int32_t)(uint32_t)(u ^ (u >> 32));
    return PyLong_FromLong(murmur(code) % maxp);
}

static PyObject *
py_key_group_for_int(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long maxp;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (key, max_parallelism)");
        return NULL;
    }
    long long v = PyLong_AsLongLong(args[0]);
    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "INT key out of 32-bit range");
        return NULL;
    }
    if (read_max_parallelism(args[1], &maxp) < 0) {
        return NULL;
    }
    return PyLong_FromLong(murmur((int32_t)v) % maxp);
}

static PyObject *
py_key_group_for_string(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    long maxp;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (key, max_parallelism)");
        return NULL;
    }
    if (!PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "expected str key");
        return NULL;
    }
    if (read_max_parallelism(args[1], &maxp) < 0) {
        return NULL;
    }
    return PyLong_FromLong(murmur(string_hash(args[0])) % maxp);
}

/* Key groups of a whole column: a buffer of int64 LONG keys (wide) or of int32 Java hash
 * codes, to a bytes object of int32 key groups. The loop runs without the GIL. */
static PyObject *
key_groups_of_buffer(PyObject *const *args, Py_ssize_t nargs, int wide)
{
    long maxp;
    Py_buffer view;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "expected (buffer, max_parallelism)");
        return NULL;
    }
    if (read_max_parallelism(args[1], &maxp) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_C_CONTIGUOUS) < 0) {
        return NULL;
    }
    Py_ssize_t width = wide ? 8 : 4;
    if (view.len % width != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "buffer length is not a whole number of values");
        return NULL;
    }
    Py_ssize_t n = view.len / width;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 4);
    if (out == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    const char *src = (const char *)view.buf;
    char *dst = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t code;
        if (wide) {
            int64_t v;
            memcpy(&v, src + i * 8, 8);
            uint64_t u = (uint64_t)v;
            code = (int32_t)(uint32_t)(u ^ (u >> 32));
        } else {
            memcpy(&code, src + i * 4, 4);
        }
        int32_t group = (int32_t)(murmur(code) % maxp);
        memcpy(dst + i * 4, &group, 4);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return out;
}

static PyObject *
py_key_groups_of_longs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return key_groups_of_buffer(args, nargs, 1);
}

static PyObject *
py_key_groups_of_codes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return key_groups_of_buffer(args, nargs, 0);
}

static PyMethodDef methods[] = {
    {"key_groups_of_longs", (PyCFunction)(void (*)(void))py_key_groups_of_longs, METH_FASTCALL,
     "Key groups (int32 bytes) of a buffer of int64 LONG keys."},
    {"key_groups_of_codes", (PyCFunction)(void (*)(void))py_key_groups_of_codes, METH_FASTCALL,
     "Key groups (int32 bytes) of a buffer of int32 Java hash codes."},
    {"murmur_hash", py_murmur_hash, METH_O, "Flink's murmur finalizer of a 32-bit hash code."},
    {"java_string_hash", py_java_string_hash, METH_O, "Java String.hashCode() over UTF-16 units."},
    {"key_group_for_hash", (PyCFunction)(void (*)(void))py_key_group_for_hash, METH_FASTCALL,
     "Key group of a Java hash code."},
    {"key_group_for_long", (PyCFunction)(void (*)(void))py_key_group_for_long, METH_FASTCALL,
     "Key group of a LONG key."},
    {"key_group_for_int", (PyCFunction)(void (*)(void))py_key_group_for_int, METH_FASTCALL,
     "Key group of an INT key."},
    {"key_group_for_string", (PyCFunction)(void (*)(void))py_key_group_for_string, METH_FASTCALL,
     "Key group of a STRING key."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_hashing", "C accelerator for key-group assignment.", -1, methods,
};

PyMODINIT_FUNC
PyInit__hashing(void)
{
    return PyModule_Create(&module);
}
