/* Batch encoding of one state's entries of a key group in Flink's key/value byte layout,
 * for the atomic serializers only (see batch.py for the kinds and the Python twin).
 *
 * encode_block(prefix, suffix, keys, key_kind, values, value_kind, stamps) gives the
 * entries as ``int length, key bytes, int length, value bytes`` records sorted by key bytes
 * (then value bytes), the first byte of the last key or'ed with 0x80, where a key's bytes are
 * prefix + key + suffix and a value's are (with stamps) an 8-byte timestamp + value. An
 * entry whose value is None is left out. The result is None when any key, value or stamp is
 * not exactly of the type its kind takes natively (an int subclass, a float for a LONG, an
 * out-of-range number, ...): the caller then takes the per-value Python path, which gives the
 * same bytes or the typed error. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <float.h>
#include <stdint.h>
#include <string.h>

enum { K_LONG = 1, K_INT, K_SHORT, K_BYTE, K_BOOL, K_DOUBLE, K_FLOAT, K_CHAR, K_STRING, K_BYTES };

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int
buf_reserve(Buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap) {
        return 0;
    }
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) {
        cap *= 2;
    }
    char *data = PyMem_Realloc(b->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static void
put_be(char *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (char)(v & 0xFF);
        v >>= 8;
    }
}

static int
put_varint(Buf *b, uint32_t n)
{
    if (buf_reserve(b, 5) < 0) {
        return -1;
    }
    while (n >= 0x80) {
        b->data[b->len++] = (char)((n & 0x7F) | 0x80);
        n >>= 7;
    }
    b->data[b->len++] = (char)n;
    return 0;
}

/* Flink's StringValue: varint(UTF-16 length + 1), then each UTF-16 unit as a varint. */
static int
put_string(Buf *b, PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t units = n;
    if (kind == PyUnicode_4BYTE_KIND) {
        for (Py_ssize_t i = 0; i < n; i++) {
            units += PyUnicode_READ(kind, data, i) > 0xFFFF;
        }
    }
    if (units >= INT32_MAX || put_varint(b, (uint32_t)(units + 1)) < 0 || buf_reserve(b, units * 3) < 0) {
        return -1;
    }
    if (PyUnicode_IS_ASCII(s)) {
        memcpy(b->data + b->len, data, (size_t)n);
        b->len += n;
        return 0;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) { /* a surrogate pair */
            c -= 0x10000;
            if (put_varint(b, 0xD800 + (c >> 10)) < 0 || put_varint(b, 0xDC00 + (c & 0x3FF)) < 0) {
                return -1;
            }
        }
        else if (put_varint(b, c) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Appends the bytes of `v` as `kind`: 0 done, 1 not natively of the kind, -1 error. */
static int
put_value(Buf *b, PyObject *v, int kind)
{
    int width = 0;
    uint64_t bits = 0;
    switch (kind) {
    case K_LONG: case K_INT: case K_SHORT: case K_BYTE: {
        if (!PyLong_CheckExact(v)) {
            return 1;
        }
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 1;
        }
        width = kind == K_LONG ? 8 : kind == K_INT ? 4 : kind == K_SHORT ? 2 : 1;
        if (width < 8) {
            long long lim = 1LL << (8 * width - 1);
            if (x < -lim || x >= lim) {
                return 1;
            }
        }
        bits = (uint64_t)x;
        break;
    }
    case K_BOOL:
        if (v != Py_True && v != Py_False) {
            return 1;
        }
        width = 1;
        bits = v == Py_True;
        break;
    case K_DOUBLE: case K_FLOAT: {
        if (!PyFloat_CheckExact(v)) {
            return 1;
        }
        double d = PyFloat_AS_DOUBLE(v);
        if (kind == K_DOUBLE) {
            width = 8;
            if (isnan(d)) {
                bits = 0x7FF8000000000000ULL; /* Java's canonical NaN */
            }
            else {
                memcpy(&bits, &d, 8);
            }
        }
        else {
            width = 4;
            if (isnan(d)) {
                bits = 0x7FC00000U;
            }
            else {
                if (isfinite(d) && fabs(d) > FLT_MAX) {
                    return 1; /* struct refuses it: the Python path raises */
                }
                float f = (float)d;
                uint32_t u;
                memcpy(&u, &f, 4);
                bits = u;
            }
        }
        break;
    }
    case K_CHAR:
        if (!PyUnicode_CheckExact(v) || PyUnicode_GET_LENGTH(v) != 1 || PyUnicode_READ_CHAR(v, 0) > 0xFFFF) {
            return 1;
        }
        width = 2;
        bits = PyUnicode_READ_CHAR(v, 0);
        break;
    case K_STRING:
        if (!PyUnicode_CheckExact(v)) {
            return 1;
        }
        return put_string(b, v);
    case K_BYTES: {
        if (!PyBytes_CheckExact(v) || PyBytes_GET_SIZE(v) > INT32_MAX) {
            return 1;
        }
        Py_ssize_t n = PyBytes_GET_SIZE(v);
        if (buf_reserve(b, 4 + n) < 0) {
            return -1;
        }
        put_be(b->data + b->len, (uint64_t)n, 4);
        memcpy(b->data + b->len + 4, PyBytes_AS_STRING(v), (size_t)n);
        b->len += 4 + n;
        return 0;
    }
    default:
        PyErr_Format(PyExc_ValueError, "unknown kind %d", kind);
        return -1;
    }
    if (buf_reserve(b, width) < 0) {
        return -1;
    }
    put_be(b->data + b->len, bits, width);
    b->len += width;
    return 0;
}

typedef struct {
    Py_ssize_t key, key_len, value, value_len; /* offsets into the keys' and values' buffers */
} Entry;

static const char *sort_keys, *sort_values;

static int
compare(const void *pa, const void *pb)
{
    const Entry *a = pa, *b = pb;
    Py_ssize_t n = a->key_len < b->key_len ? a->key_len : b->key_len;
    int c = memcmp(sort_keys + a->key, sort_keys + b->key, (size_t)n);
    if (c != 0 || a->key_len != b->key_len) {
        return c != 0 ? c : (a->key_len < b->key_len ? -1 : 1);
    }
    n = a->value_len < b->value_len ? a->value_len : b->value_len;
    c = memcmp(sort_values + a->value, sort_values + b->value, (size_t)n);
    if (c != 0 || a->value_len == b->value_len) {
        return c;
    }
    return a->value_len < b->value_len ? -1 : 1;
}

static PyObject *
encode_block(PyObject *self, PyObject *args)
{
    Py_buffer prefix, suffix;
    PyObject *keys, *values, *stamps;
    int key_kind, value_kind;
    if (!PyArg_ParseTuple(args, "y*y*O!iO!iO", &prefix, &suffix, &PyList_Type, &keys, &key_kind,
                          &PyList_Type, &values, &value_kind, &stamps)) {
        return NULL;
    }
    PyObject *result = NULL;
    Buf kb = {0}, vb = {0}, out = {0};
    Entry *entries = NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys), count = 0;
    int timed = stamps != Py_None;
    if (PyList_GET_SIZE(values) != n || (timed && (!PyList_Check(stamps) || PyList_GET_SIZE(stamps) != n))) {
        PyErr_SetString(PyExc_ValueError, "keys, values and stamps differ in length");
        goto done;
    }
    entries = PyMem_Malloc(sizeof(Entry) * (size_t)(n ? n : 1));
    if (entries == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyList_GET_ITEM(values, i);
        if (value == Py_None) {
            continue;
        }
        Entry *e = &entries[count];
        e->key = kb.len;
        if (buf_reserve(&kb, prefix.len) < 0) {
            goto done;
        }
        memcpy(kb.data + kb.len, prefix.buf, (size_t)prefix.len);
        kb.len += prefix.len;
        int r = put_value(&kb, PyList_GET_ITEM(keys, i), key_kind);
        if (r == 0 && buf_reserve(&kb, suffix.len) == 0) {
            memcpy(kb.data + kb.len, suffix.buf, (size_t)suffix.len);
            kb.len += suffix.len;
        }
        else if (r == 0) {
            r = -1;
        }
        e->key_len = kb.len - e->key;
        e->value = vb.len;
        if (r == 0 && timed) {
            r = put_value(&vb, PyList_GET_ITEM(stamps, i), K_LONG);
        }
        if (r == 0) {
            r = put_value(&vb, value, value_kind);
        }
        if (r != 0) {
            if (r == 1) {
                result = Py_NewRef(Py_None);
            }
            goto done;
        }
        e->value_len = vb.len - e->value;
        if (e->key_len > INT32_MAX || e->value_len > INT32_MAX) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        count++;
    }
    sort_keys = kb.data;
    sort_values = vb.data;
    qsort(entries, (size_t)count, sizeof(Entry), compare);
    if (buf_reserve(&out, kb.len + vb.len + 8 * count) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Entry *e = &entries[i];
        char *p = out.data + out.len;
        put_be(p, (uint64_t)e->key_len, 4);
        memcpy(p + 4, kb.data + e->key, (size_t)e->key_len);
        if (i == count - 1 && e->key_len > 0) {
            p[4] = (char)(p[4] | 0x80);
        }
        p += 4 + e->key_len;
        put_be(p, (uint64_t)e->value_len, 4);
        memcpy(p + 4, vb.data + e->value, (size_t)e->value_len);
        out.len += 8 + e->key_len + e->value_len;
    }
    result = PyBytes_FromStringAndSize(out.data, out.len);
done:
    PyBuffer_Release(&prefix);
    PyBuffer_Release(&suffix);
    PyMem_Free(kb.data);
    PyMem_Free(vb.data);
    PyMem_Free(out.data);
    PyMem_Free(entries);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_block", encode_block, METH_VARARGS, "One state's sorted, framed entries of a key group (see batch.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__batch(void)
{
    return PyModule_Create(&module);
}
