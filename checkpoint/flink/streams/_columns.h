/* Growing Arrow-ready columns of the keyed-state decoder (_keyed_columns.c): data, int32
 * offsets for the variable-width kinds and a validity bitmap for nullable ones. */
#ifndef FLINKSTATE_COLUMNS_H
#define FLINKSTATE_COLUMNS_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The kinds of state/serializers/batch.py (and _batch.c). */
enum { K_LONG = 1, K_INT, K_SHORT, K_BYTE, K_BOOL, K_DOUBLE, K_FLOAT, K_CHAR, K_STRING, K_BYTES };

/* What a reader returns: done, not taken (the general decoder decides), out of memory. */
enum { TAKEN = 0, NOT_TAKEN = -1, NO_MEMORY = -2 };

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Buf;

typedef struct {
    int kind;
    int nullable;
    Buf data, offsets, validity;
    Buf units; /* scratch: a string's UTF-16 units */
} Column;

/* Room for ``more`` bytes (data is never NULL after it: memcpy of nothing stays defined). */
static int
reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap && b->data != NULL) {
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

static void
column_free(Column *col)
{
    free(col->data.data);
    free(col->offsets.data);
    free(col->validity.data);
    free(col->units.data);
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

/* Row ``row``'s bit in a bitmap that grows a byte every eight rows. */
static int
set_bit(Buf *b, Py_ssize_t row, int on)
{
    if ((size_t)(row >> 3) == b->len) {
        if (reserve(b, 1) < 0) {
            return NO_MEMORY;
        }
        b->data[b->len++] = 0;
    }
    if (on) {
        b->data[row >> 3] |= (uint8_t)(1 << (row & 7));
    }
    return TAKEN;
}

/* Closes a variable-width value: its end offset (text and bytes past 2 GiB are not taken). */
static int
end_value(Column *col)
{
    if (col->data.len > INT32_MAX) {
        return NOT_TAKEN;
    }
    if (reserve(&col->offsets, 4) < 0) {
        return NO_MEMORY;
    }
    int32_t off = (int32_t)col->data.len;
    memcpy(col->offsets.data + col->offsets.len, &off, 4);
    col->offsets.len += 4;
    return TAKEN;
}

/* Appends a fixed-width value given as its bits (the low ``width`` bytes of ``bits``), native. */
static int
put_fixed(Column *col, uint64_t bits, int width)
{
    if (reserve(&col->data, 8) < 0) {
        return NO_MEMORY;
    }
    uint8_t *o = col->data.data + col->data.len;
    switch (width) {
    case 8: { uint64_t v = bits; memcpy(o, &v, 8); break; }
    case 4: { uint32_t v = (uint32_t)bits; memcpy(o, &v, 4); break; }
    case 2: { uint16_t v = (uint16_t)bits; memcpy(o, &v, 2); break; }
    default: o[0] = (uint8_t)bits;
    }
    col->data.len += (size_t)width;
    return TAKEN;
}

/* Appends a null: the validity bit off and an empty value (zeros, an unchanged offset). */
static int
put_null(Column *col, Py_ssize_t row)
{
    if (set_bit(&col->validity, row, 0) < 0) {
        return NO_MEMORY;
    }
    if (col->kind == K_BOOL) {
        return set_bit(&col->data, row, 0);
    }
    return variable(col->kind) ? end_value(col) : put_fixed(col, 0, fixed_width(col->kind));
}

static uint64_t
load(const uint8_t *p, int width, int big_endian)
{
    uint64_t v = 0;
    for (int i = 0; i < width; i++) {
        v |= (uint64_t)p[big_endian ? width - 1 - i : i] << (8 * i);
    }
    return v;
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

/* Appends UTF-16 ``units`` as UTF-8: a high surrogate must be followed by a low one (the two
 * make one code point); a lone surrogate is not taken (the general path refuses it). */
static int
put_units(Buf *out, const Buf *scratch)
{
    const uint16_t *units = (const uint16_t *)scratch->data;
    size_t n = scratch->len / 2;
    if (reserve(out, n * 3) < 0) {
        return NO_MEMORY;
    }
    size_t len = out->len;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = units[i];
        if (c >= 0xDC00 && c <= 0xDFFF) {
            return NOT_TAKEN;
        }
        if (c >= 0xD800 && c <= 0xDBFF) {
            if (++i == n || units[i] < 0xDC00 || units[i] > 0xDFFF) {
                return NOT_TAKEN;
            }
            c = 0x10000 + ((c - 0xD800) << 10) + (units[i] - 0xDC00u);
        }
        put_utf8(out->data, &len, c);
    }
    out->len = len;
    return TAKEN;
}

#endif
