/* Java hashCode() and Flink's murmur finalizer, shared by the C accelerators of key-group
 * assignment (keygroups/_hashing.c) and of the process loop (process/_loop.c). The pure
 * Python functions in keygroups/hashing.py define the semantics; tests check both agree. */
#ifndef FLINKSTATE_JAVAHASH_H
#define FLINKSTATE_JAVAHASH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static inline int32_t
murmur(int32_t code)
{
    uint32_t h = (uint32_t)code;
    h *= 0xcc9e2d51u;
    h = (h << 15) | (h >> 17);
    h *= 0x1b873593u;
    h = (h << 13) | (h >> 19);
    h = h * 5u + 0xe6546b64u;
    h ^= 4u;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    int32_t s = (int32_t)h;
    if (s >= 0) {
        return s;
    }
    if (s != INT32_MIN) {
        return -s;
    }
    return 0;
}

static inline int
read_max_parallelism(PyObject *obj, long *out)
{
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v <= 0) {
        PyErr_SetString(PyExc_ValueError, "max parallelism must be positive");
        return -1;
    }
    *out = v;
    return 0;
}

static inline int32_t
string_hash(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) {
            c -= 0x10000;
            h = 31u * h + (uint32_t)(0xD800 + (c >> 10));
            h = 31u * h + (uint32_t)(0xDC00 + (c & 0x3FF));
        } else {
            h = 31u * h + (uint32_t)c;
        }
    }
    return (int32_t)h;
}

#endif
