/* One state's entries of a canonical key-group block decoded in one pass into Arrow-ready
 * buffers, for keys and values of the atomic serializers (see keyed_columns_read.py for the
 * Python side and keyed_read.py for the general decoder, which is the model of this one).
 *
 * decode_block(buf, pos, kg, state_id, states, prefix, key_kind, value_kind) reads the block
 * at buf[pos]: a short state id, then ``int length, key bytes, int length, value bytes``
 * entries, a key whose first byte has bit 0x80 set followed by the next state id or 0xFFFF.
 * Entries of state ``state_id`` (key bytes: the key-group prefix, the key, one void-namespace
 * byte) give one row; others are skipped. It returns (rows, key data, key offsets, value data,
 * value offsets): fixed-width kinds as native-endian values (BOOLEAN as Arrow's bitmap), text
 * and byte arrays as int32 offsets and data (text as UTF-8), offsets None for fixed widths.
 * It returns None for anything it does not take exactly as the general decoder would: a short
 * or malformed block, another key group's prefix, an unknown state id, a value not filling its
 * bytes, a null or lone-surrogate string, an over-long varint. The caller then runs the general
 * decoder, which gives the rows or the typed error naming the entry. Every read is bounds-checked
 * against the buffer; the scan runs without the GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_columns.h"
#include "_kryo_fields.h"

/* Flink's unsigned varint, 7 bits a byte, low first, at most ``max_bytes`` bytes. */
static int
read_varint(const uint8_t **p, const uint8_t *end, int max_bytes, uint32_t *out)
{
    uint32_t result = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*p >= end) {
            return NOT_TAKEN;
        }
        uint8_t b = *(*p)++;
        if (i == 4 && b > 0x0F) {
            return NOT_TAKEN; /* past 32 bits: the general path's to judge */
        }
        result |= (uint32_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = result;
            return TAKEN;
        }
    }
    return NOT_TAKEN;
}

/* StringValue: varint(UTF-16 units + 1) (0: null, refused), then each unit as a varint; a
 * high surrogate must be followed by a low one (they make one code point), as UTF-8. */
static int
read_string(const uint8_t **p, const uint8_t *end, Buf *out)
{
    uint32_t n;
    if (read_varint(p, end, 5, &n) < 0 || n == 0) {
        return -1;
    }
    n -= 1;
    const uint8_t *s = *p;
    if ((size_t)(end - s) >= n) {
        uint32_t i = 0;
        while (i < n && s[i] < 0x80) {
            i++;
        }
        if (i == n) {
            if (reserve(out, n) < 0) {
                return -2;
            }
            memcpy(out->data + out->len, s, n);
            out->len += n;
            *p = s + n;
            return 0;
        }
    }
    if ((size_t)(end - s) < n || reserve(out, (size_t)n * 3) < 0) {
        return (size_t)(end - s) < n ? -1 : -2; /* every unit takes at least one byte */
    }
    size_t len = out->len;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t c;
        if (read_varint(p, end, 3, &c) < 0 || c > 0xFFFF || (c >= 0xDC00 && c <= 0xDFFF)) {
            return -1;
        }
        if (c >= 0xD800 && c <= 0xDBFF) {
            uint32_t low;
            if (++i == n || read_varint(p, end, 3, &low) < 0 || low < 0xDC00 || low > 0xDFFF) {
                return -1;
            }
            c = 0x10000 + ((c - 0xD800) << 10) + (low - 0xDC00);
        }
        put_utf8(out->data, &len, c);
    }
    out->len = len;
    return 0;
}

/* Appends the value of ``col``'s kind at *p (ending at or before ``end``) and moves *p past it. */
static int
read_field(Column *col, Py_ssize_t row, const uint8_t **p, const uint8_t *end)
{
    const uint8_t *s = *p;
    int width = fixed_width(col->kind);
    if (width || col->kind == K_BOOL || col->kind == K_CHAR) {
        int need = width ? width : col->kind == K_BOOL ? 1 : 2;
        if (end - s < need) {
            return NOT_TAKEN;
        }
        *p = s + need;
        if (width) {
            return put_fixed(col, load(s, width, 1), width);
        }
        if (col->kind == K_BOOL) {
            return set_bit(&col->data, row, *s != 0);
        }
        uint32_t c = (uint32_t)s[0] << 8 | s[1];
        if ((c >= 0xD800 && c <= 0xDFFF) || reserve(&col->data, 3) < 0) {
            return c >= 0xD800 && c <= 0xDFFF ? NOT_TAKEN : NO_MEMORY;
        }
        put_utf8(col->data.data, &col->data.len, c);
        return end_value(col);
    }
    if (col->kind == K_STRING) {
        int r = read_string(p, end, &col->data);
        return r < 0 ? r : end_value(col);
    }
    if (end - s < 4) {
        return NOT_TAKEN;
    }
    int32_t n = (int32_t)load(s, 4, 1);
    if (n < 0 || end - s - 4 < n || reserve(&col->data, (size_t)n) < 0) {
        return n < 0 || end - s - 4 < n ? NOT_TAKEN : NO_MEMORY;
    }
    memcpy(col->data.data + col->data.len, s + 4, (size_t)n);
    col->data.len += (size_t)n;
    *p = s + 4 + n;
    return end_value(col);
}

/* Reads one value at *p (ending at ``end``) into the row ``row`` of what ``ctx`` fills. */
typedef int (*ValueReader)(void *ctx, Py_ssize_t row, const uint8_t **p, const uint8_t *end);

static int
atomic_value(void *ctx, Py_ssize_t row, const uint8_t **p, const uint8_t *end)
{
    return read_field(ctx, row, p, end);
}

static int
kryo_reader(void *ctx, Py_ssize_t row, const uint8_t **p, const uint8_t *end)
{
    return kryo_value(ctx, row, p, end);
}

typedef struct {
    const uint8_t *buf;
    Py_ssize_t len, pos;
    long kg, state_id, states;
    int prefix;
} Block;

/* Scans the block: the number of rows, or NOT_TAKEN, NO_MEMORY. */
static Py_ssize_t
scan(const Block *b, Column *key, ValueReader read_value, void *ctx)
{
    const uint8_t *end = b->buf + b->len, *p = b->buf + b->pos;
    uint32_t flag_mask = b->prefix == 1 ? 0x80 : 0x8000;
    if (b->pos > b->len || end - p < 2) {
        return NOT_TAKEN;
    }
    long current = p[0] << 8 | p[1];
    p += 2;
    if (current >= b->states) {
        return NOT_TAKEN;
    }
    Py_ssize_t rows = 0;
    for (;;) {
        if (end - p < 4) {
            return NOT_TAKEN;
        }
        int32_t klen = (int32_t)load(p, 4, 1);
        const uint8_t *k = p + 4;
        if (klen < 1 || end - k < (Py_ssize_t)klen + 4) {
            return NOT_TAKEN;
        }
        const uint8_t *v = k + klen + 4;
        int32_t vlen = (int32_t)load(k + klen, 4, 1);
        if (vlen < 0 || end - v < vlen) {
            return NOT_TAKEN;
        }
        int flagged = k[0] & 0x80;
        if (current == b->state_id) {
            if (klen < b->prefix + 1) {
                return NOT_TAKEN;
            }
            uint32_t group = b->prefix == 1 ? k[0] : (uint32_t)k[0] << 8 | k[1];
            if ((long)(group & ~flag_mask) != b->kg) {
                return NOT_TAKEN;
            }
            const uint8_t *q = k + b->prefix;
            int r = read_field(key, rows, &q, k + klen - 1);
            if (r == TAKEN && q != k + klen - 1) {
                r = NOT_TAKEN; /* the key must end right before the void namespace's byte */
            }
            if (r == TAKEN) {
                q = v;
                r = read_value(ctx, rows, &q, v + vlen);
                r = r == TAKEN && q != v + vlen ? NOT_TAKEN : r;
            }
            if (r < 0) {
                return r;
            }
            rows++;
        }
        p = v + vlen;
        if (flagged) {
            if (end - p < 2) {
                return NOT_TAKEN;
            }
            current = p[0] << 8 | p[1];
            p += 2;
            if (current == 0xFFFF) {
                return rows;
            }
            if (current >= b->states) {
                return NOT_TAKEN;
            }
        }
    }
}

static int
column_start(Column *col, int kind, int nullable)
{
    memset(col, 0, sizeof(*col));
    col->kind = kind;
    col->nullable = nullable;
    if (!variable(kind)) {
        return 0;
    }
    int32_t zero = 0;
    if (reserve(&col->offsets, 4) < 0) {
        return -1;
    }
    memcpy(col->offsets.data, &zero, 4);
    col->offsets.len = 4;
    return 0;
}

static PyObject *
as_bytes(const Buf *b)
{
    return PyBytes_FromStringAndSize((const char *)b->data, (Py_ssize_t)b->len);
}

/* (data, offsets or None, validity or None) of a filled column. */
static PyObject *
column_tuple(const Column *col)
{
    PyObject *offsets = variable(col->kind) ? as_bytes(&col->offsets) : Py_NewRef(Py_None);
    PyObject *validity = col->nullable ? as_bytes(&col->validity) : Py_NewRef(Py_None);
    return Py_BuildValue("(NNN)", as_bytes(&col->data), offsets, validity);
}

static int
parse_block(Block *b, Py_buffer *view, int key_kind)
{
    b->buf = view->buf;
    b->len = view->len;
    if (key_kind < K_LONG || key_kind > K_BYTES || (b->prefix != 1 && b->prefix != 2) || b->pos < 0) {
        PyErr_SetString(PyExc_ValueError, "bad key kind, key-group prefix or position");
        return -1;
    }
    return 0;
}

/* The scan's outcome: None (not taken), or what ``build`` makes of the columns. */
static PyObject *
outcome(Py_ssize_t rows)
{
    if (rows == NO_MEMORY) {
        return PyErr_NoMemory();
    }
    return rows == NOT_TAKEN ? Py_NewRef(Py_None) : NULL;
}

static PyObject *
decode_block(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Block b;
    int key_kind, value_kind;
    if (!PyArg_ParseTuple(args, "y*nllliii:decode_block", &view, &b.pos, &b.kg, &b.state_id, &b.states,
                          &b.prefix, &key_kind, &value_kind)) {
        return NULL;
    }
    PyObject *result = NULL;
    Column key = {0}, value = {0};
    Py_ssize_t rows = NO_MEMORY;
    int bad = parse_block(&b, &view, key_kind) < 0;
    if (!bad && (value_kind < K_LONG || value_kind > K_BYTES)) {
        PyErr_SetString(PyExc_ValueError, "bad value kind");
        bad = 1;
    }
    if (!bad && column_start(&key, key_kind, 0) == 0 && column_start(&value, value_kind, 0) == 0) {
        Py_BEGIN_ALLOW_THREADS
        rows = scan(&b, &key, atomic_value, &value);
        Py_END_ALLOW_THREADS
    }
    if (!bad) {
        result = outcome(rows);
        if (result == NULL && rows >= 0) {
            result = Py_BuildValue("(nNN)", rows, column_tuple(&key), column_tuple(&value));
        }
        column_free(&key);
        column_free(&value);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
decode_kryo_block(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view, name;
    Block b;
    int key_kind, version;
    const char *spec;
    Py_ssize_t nfields;
    Kryo k;
    memset(&k, 0, sizeof(k));
    if (!PyArg_ParseTuple(args, "y*nllliiy#iLy*:decode_kryo_block", &view, &b.pos, &b.kg, &b.state_id,
                          &b.states, &b.prefix, &key_kind, &spec, &nfields, &version, &k.class_id, &name)) {
        return NULL;
    }
    k.big_endian = version == 2;
    k.name = name.buf;
    k.name_len = name.len;
    k.nfields = nfields;
    PyObject *result = NULL;
    Column key = {0};
    Py_ssize_t rows = NO_MEMORY, ready = 0;
    int bad = parse_block(&b, &view, key_kind) < 0;
    for (Py_ssize_t i = 0; !bad && i < nfields; i++) {
        int kind = spec[i] & 0x7F;
        if (kind < K_LONG || kind > K_STRING) {
            PyErr_SetString(PyExc_ValueError, "bad Kryo field kind");
            bad = 1;
        }
    }
    k.fields = bad ? NULL : calloc((size_t)(nfields ? nfields : 1), sizeof(Column));
    if (!bad && k.fields != NULL && column_start(&key, key_kind, 0) == 0) {
        while (ready < nfields && column_start(&k.fields[ready], spec[ready] & 0x7F, spec[ready] >> 7 & 1) == 0) {
            ready++;
        }
        if (ready == nfields) {
            Py_BEGIN_ALLOW_THREADS
            rows = scan(&b, &key, kryo_reader, &k);
            Py_END_ALLOW_THREADS
        }
    }
    if (!bad) {
        result = outcome(rows);
        PyObject *fields = result == NULL && rows >= 0 ? PyTuple_New(nfields) : NULL;
        for (Py_ssize_t i = 0; fields != NULL && i < nfields; i++) {
            PyTuple_SET_ITEM(fields, i, column_tuple(&k.fields[i]));
        }
        if (fields != NULL) {
            result = Py_BuildValue("(nNNL)", rows, column_tuple(&key), fields, k.class_id);
        }
        column_free(&key);
    }
    for (Py_ssize_t i = 0; k.fields != NULL && i < ready; i++) {
        column_free(&k.fields[i]);
    }
    free(k.fields);
    free(k.units.data);
    free(k.text.data);
    PyBuffer_Release(&view);
    PyBuffer_Release(&name);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_block", decode_block, METH_VARARGS,
     "decode_block(buf, pos, kg, state_id, states, prefix, key_kind, value_kind) -> columns or None"},
    {"decode_kryo_block", decode_kryo_block, METH_VARARGS,
     "decode_kryo_block(buf, pos, kg, state_id, states, prefix, key_kind, fields, kryo, class_id, "
     "java_class) -> columns or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_keyed_columns", NULL, -1, methods, NULL, NULL,
                                    NULL, NULL};

PyMODINIT_FUNC
PyInit__keyed_columns(void)
{
    return PyModule_Create(&module);
}
