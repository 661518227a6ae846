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

enum { K_LONG = 1, K_INT, K_SHORT, K_BYTE, K_BOOL, K_DOUBLE, K_FLOAT, K_CHAR, K_STRING, K_BYTES };

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Buf;

/* A column being filled: its data and, for the variable-width kinds, its offsets. */
typedef struct {
    int kind;
    Buf data, offsets;
} Column;

static int
reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap) {
        return 0;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more) {
        cap *= 2;
    }
    uint8_t *data = realloc(b->data, cap);
    if (data == NULL) {
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static int
fixed_width(int kind)
{
    switch (kind) {
    case K_LONG: case K_DOUBLE: return 8;
    case K_INT: case K_FLOAT: return 4;
    case K_SHORT: return 2;
    case K_BYTE: return 1;
    default: return 0;
    }
}

static int
variable(int kind)
{
    return kind == K_CHAR || kind == K_STRING || kind == K_BYTES;
}

/* Flink's unsigned varint, 7 bits a byte, low first, at most ``max_bytes`` bytes. */
static int
read_varint(const uint8_t **p, const uint8_t *end, int max_bytes, uint32_t *out)
{
    uint32_t result = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*p >= end) {
            return -1;
        }
        uint8_t b = *(*p)++;
        result |= (uint32_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = result;
            return 0;
        }
    }
    return -1;
}

static void
put_utf8(uint8_t *o, size_t *n, uint32_t c)
{
    if (c < 0x80) {
        o[(*n)++] = (uint8_t)c;
    } else if (c < 0x800) {
        o[(*n)++] = (uint8_t)(0xC0 | c >> 6);
        o[(*n)++] = (uint8_t)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        o[(*n)++] = (uint8_t)(0xE0 | c >> 12);
        o[(*n)++] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
        o[(*n)++] = (uint8_t)(0x80 | (c & 0x3F));
    } else {
        o[(*n)++] = (uint8_t)(0xF0 | c >> 18);
        o[(*n)++] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
        o[(*n)++] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
        o[(*n)++] = (uint8_t)(0x80 | (c & 0x3F));
    }
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

/* Appends the value of ``col``'s kind at *p (ending at or before ``end``) and moves *p past it.
 * 0: done; -1: not taken; -2: out of memory. */
static int
read_field(Column *col, Py_ssize_t row, const uint8_t **p, const uint8_t *end)
{
    const uint8_t *s = *p;
    int width = fixed_width(col->kind);
    if (width) {
        if (end - s < width || reserve(&col->data, 8) < 0) {
            return end - s < width ? -1 : -2;
        }
        uint8_t *o = col->data.data + col->data.len;
        for (int i = 0; i < width; i++) {
            o[i] = s[width - 1 - i];
        }
        col->data.len += (size_t)width;
        *p = s + width;
        return 0;
    }
    if (col->kind == K_BOOL) {
        if (end - s < 1 || reserve(&col->data, 1) < 0) {
            return end - s < 1 ? -1 : -2;
        }
        if ((size_t)(row >> 3) == col->data.len) {
            col->data.data[col->data.len++] = 0;
        }
        if (*s) {
            col->data.data[row >> 3] |= (uint8_t)(1 << (row & 7));
        }
        *p = s + 1;
        return 0;
    }
    int r = 0;
    if (col->kind == K_CHAR) {
        if (end - s < 2) {
            return -1;
        }
        uint32_t c = (uint32_t)s[0] << 8 | s[1];
        if ((c >= 0xD800 && c <= 0xDFFF) || reserve(&col->data, 3) < 0) {
            return c >= 0xD800 && c <= 0xDFFF ? -1 : -2;
        }
        put_utf8(col->data.data, &col->data.len, c);
        *p = s + 2;
    } else if (col->kind == K_STRING) {
        r = read_string(p, end, &col->data);
    } else {
        if (end - s < 4) {
            return -1;
        }
        int32_t n = (int32_t)((uint32_t)s[0] << 24 | (uint32_t)s[1] << 16 | (uint32_t)s[2] << 8 | s[3]);
        if (n < 0 || end - s - 4 < n || reserve(&col->data, (size_t)n) < 0) {
            return n < 0 || end - s - 4 < n ? -1 : -2;
        }
        memcpy(col->data.data + col->data.len, s + 4, (size_t)n);
        col->data.len += (size_t)n;
        *p = s + 4 + n;
    }
    if (r == 0 && col->data.len > INT32_MAX) {
        return -1;
    }
    if (r == 0) {
        if (reserve(&col->offsets, 4) < 0) {
            return -2;
        }
        int32_t off = (int32_t)col->data.len;
        memcpy(col->offsets.data + col->offsets.len, &off, 4);
        col->offsets.len += 4;
    }
    return r;
}

static int32_t
be32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

typedef struct {
    const uint8_t *buf;
    Py_ssize_t len, pos;
    long kg, state_id, states;
    int prefix;
} Block;

/* Scans the block into the two columns: the number of rows, -1: not taken, -2: out of memory. */
static Py_ssize_t
scan(const Block *b, Column *key, Column *value)
{
    const uint8_t *end = b->buf + b->len, *p = b->buf + b->pos;
    uint32_t flag_mask = b->prefix == 1 ? 0x80 : 0x8000;
    if (end - p < 2) {
        return -1;
    }
    long current = p[0] << 8 | p[1];
    p += 2;
    if (current >= b->states) {
        return -1;
    }
    Py_ssize_t rows = 0;
    for (;;) {
        if (end - p < 4) {
            return -1;
        }
        int32_t klen = be32(p);
        const uint8_t *k = p + 4;
        if (klen < 1 || end - k < (Py_ssize_t)klen + 4) {
            return -1;
        }
        const uint8_t *v = k + klen + 4;
        int32_t vlen = be32(k + klen);
        if (vlen < 0 || end - v < vlen) {
            return -1;
        }
        int flagged = k[0] & 0x80;
        if (current == b->state_id) {
            if (klen < b->prefix + 1) {
                return -1;
            }
            uint32_t group = b->prefix == 1 ? k[0] : (uint32_t)k[0] << 8 | k[1];
            if ((long)(group & ~flag_mask) != b->kg) {
                return -1;
            }
            const uint8_t *q = k + b->prefix;
            int r = read_field(key, rows, &q, k + klen - 1);
            if (r == 0 && q != k + klen - 1) {
                r = -1; /* the key must end right before the void namespace's byte */
            }
            if (r == 0) {
                q = v;
                r = read_field(value, rows, &q, v + vlen);
                r = r == 0 && q != v + vlen ? -1 : r;
            }
            if (r < 0) {
                return r;
            }
            rows++;
        }
        p = v + vlen;
        if (flagged) {
            if (end - p < 2) {
                return -1;
            }
            current = p[0] << 8 | p[1];
            p += 2;
            if (current == 0xFFFF) {
                return rows;
            }
            if (current >= b->states) {
                return -1;
            }
        }
    }
}

static PyObject *
as_bytes(const Buf *b)
{
    return PyBytes_FromStringAndSize((const char *)b->data, (Py_ssize_t)b->len);
}

static PyObject *
offsets_of(Column *col)
{
    if (!variable(col->kind)) {
        Py_RETURN_NONE;
    }
    return as_bytes(&col->offsets);
}

static PyObject *
decode_block(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Block b;
    int key_kind, value_kind;
    if (!PyArg_ParseTuple(args, "y*nllliii:decode_block", &view, &b.pos, &b.kg, &b.state_id, &b.states,
                          &b.prefix, &key_kind, &value_kind)) {
        return NULL;
    }
    PyObject *result = NULL;
    Column key = {key_kind, {0}, {0}}, value = {value_kind, {0}, {0}};
    if (key_kind < K_LONG || key_kind > K_BYTES || value_kind < K_LONG || value_kind > K_BYTES ||
        (b.prefix != 1 && b.prefix != 2) || b.pos < 0) {
        PyErr_SetString(PyExc_ValueError, "decode_block: bad kind, prefix or position");
        goto done;
    }
    b.buf = view.buf;
    b.len = view.len;
    int32_t zero = 0;
    Py_ssize_t rows = -2;
    if (reserve(&key.offsets, 4) == 0 && reserve(&value.offsets, 4) == 0) {
        memcpy(key.offsets.data, &zero, 4);
        memcpy(value.offsets.data, &zero, 4);
        key.offsets.len = value.offsets.len = 4;
        if (b.pos <= b.len) {
            Py_BEGIN_ALLOW_THREADS
            rows = scan(&b, &key, &value);
            Py_END_ALLOW_THREADS
        } else {
            rows = -1;
        }
    }
    if (rows == -2) {
        PyErr_NoMemory();
    } else if (rows == -1) {
        result = Py_NewRef(Py_None);
    } else {
        result = Py_BuildValue("(nNNNN)", rows, as_bytes(&key.data), offsets_of(&key), as_bytes(&value.data),
                               offsets_of(&value));
    }
done:
    free(key.data.data);
    free(key.offsets.data);
    free(value.data.data);
    free(value.offsets.data);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_block", decode_block, METH_VARARGS,
     "decode_block(buf, pos, kg, state_id, states, prefix, key_kind, value_kind) -> columns or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_keyed_columns", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__keyed_columns(void)
{
    return PyModule_Create(&module);
}
