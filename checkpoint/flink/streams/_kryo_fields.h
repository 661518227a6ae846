/* Kryo values decoded into one column per declared field, for the keyed-state decoder
 * (_keyed_columns.c). The model is checkpoint/flink/types/kryo_read.py (KryoReader): the
 * class (a varint: 1 then a name id and the class name, else the registration id + 2), the
 * reference marker 1, then FieldSerializer's fields in Kryo's order: long/int zigzag varints,
 * short/char/byte/float/double fixed (little-endian in Kryo 5, big-endian in Kryo 2; a char is
 * one UTF-16 unit, given as its UTF-8, a surrogate half not taken), boolean a
 * byte, and a marker byte (0 null, 1 a value) before nullable fields and every string. What
 * the model would refuse or give as a null object is not taken here. */
#ifndef FLINKSTATE_KRYO_FIELDS_H
#define FLINKSTATE_KRYO_FIELDS_H

#include "_columns.h"

typedef struct {
    int big_endian;      /* Kryo 2 (Flink 1.x) */
    Py_ssize_t nfields;
    Column *fields;      /* in Kryo's write order */
    long long class_id;  /* -1: not known yet, set by the first value */
    const uint8_t *name; /* the Java class, UTF-8, for values that name it */
    Py_ssize_t name_len;
    Buf units, text;     /* scratch */
} Kryo;

/* Kryo's unsigned varint: 7 bits a byte, low first; the 9th byte (of a long) has 8 bits. */
static int
kryo_varint(const uint8_t **p, const uint8_t *end, int max_bytes, uint64_t *out)
{
    uint64_t result = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*p >= end) {
            return NOT_TAKEN;
        }
        uint8_t b = *(*p)++;
        if (i == 8) {
            *out = result | (uint64_t)b << 56;
            return TAKEN;
        }
        result |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            *out = result;
            return TAKEN;
        }
    }
    return NOT_TAKEN;
}

/* Output.writeString at *p: an ASCII run whose last byte has bit 7 set, or a flagged varint
 * of the char count + 1 (0: null) and the chars in Kryo's UTF-8. Appends the text's UTF-8 to
 * ``out`` (``units`` is scratch); *is_null for the null string. */
static int
kryo_string(const uint8_t **p, const uint8_t *end, Buf *out, Buf *units, int *is_null)
{
    const uint8_t *s = *p;
    *is_null = 0;
    if (s >= end) {
        return NOT_TAKEN;
    }
    if (!(*s & 0x80)) {
        const uint8_t *e = s;
        while (e < end && !(*e & 0x80)) {
            e++;
        }
        if (e == end || reserve(out, (size_t)(e - s) + 1) < 0) {
            return e == end ? NOT_TAKEN : NO_MEMORY;
        }
        memcpy(out->data + out->len, s, (size_t)(e - s));
        out->len += (size_t)(e - s);
        out->data[out->len++] = *e & 0x7F;
        *p = e + 1;
        return TAKEN;
    }
    uint64_t count = *s & 0x3F, rest;
    (*p)++;
    if (*s & 0x40) {
        if (kryo_varint(p, end, 4, &rest) < 0) {
            return NOT_TAKEN;
        }
        count |= rest << 6;
    }
    if (count == 0) {
        *is_null = 1;
        return TAKEN;
    }
    count -= 1;
    if ((uint64_t)(end - *p) < count) {
        return NOT_TAKEN; /* every char takes a byte at least */
    }
    units->len = 0;
    if (reserve(units, (size_t)count * 2) < 0) {
        return NO_MEMORY;
    }
    uint16_t *u = (uint16_t *)units->data;
    const uint8_t *q = *p;
    for (uint64_t i = 0; i < count; i++) {
        if (q >= end) {
            return NOT_TAKEN;
        }
        int high = q[0] >> 4;
        if (high < 8) {
            u[i] = q[0];
            q += 1;
        } else if ((high == 12 || high == 13) && end - q >= 2) {
            u[i] = (uint16_t)((q[0] & 0x1F) << 6 | (q[1] & 0x3F));
            q += 2;
        } else if (high == 14 && end - q >= 3) {
            u[i] = (uint16_t)((q[0] & 0x0F) << 12 | (q[1] & 0x3F) << 6 | (q[2] & 0x3F));
            q += 3;
        } else {
            return NOT_TAKEN;
        }
    }
    *p = q;
    units->len = (size_t)count * 2;
    return put_units(out, units);
}

static int
kryo_text(Kryo *k, Column *col, Py_ssize_t row, const uint8_t **p, const uint8_t *end)
{
    int is_null, r = kryo_string(p, end, &col->data, &k->units, &is_null);
    if (r < 0) {
        return r;
    }
    if (is_null && !col->nullable) {
        return NOT_TAKEN; /* a null in a NOT NULL field: the general path decides */
    }
    if (col->nullable && set_bit(&col->validity, row, !is_null) < 0) {
        return NO_MEMORY;
    }
    return end_value(col);
}

static int
kryo_field(Kryo *k, Column *col, Py_ssize_t row, const uint8_t **p, const uint8_t *end)
{
    if (col->kind == K_STRING || col->nullable) {
        if (*p >= end || **p > 1) {
            return NOT_TAKEN; /* a marker past 1 is a back reference */
        }
        if (*(*p)++ == 0) {
            return col->nullable ? put_null(col, row) : NOT_TAKEN;
        }
    }
    if (col->kind == K_STRING) {
        return kryo_text(k, col, row, p, end);
    }
    if (col->nullable && set_bit(&col->validity, row, 1) < 0) {
        return NO_MEMORY;
    }
    if (col->kind == K_LONG || col->kind == K_INT) {
        uint64_t v;
        if (kryo_varint(p, end, col->kind == K_LONG ? 9 : 5, &v) < 0) {
            return NOT_TAKEN;
        }
        v = col->kind == K_INT ? v & 0xFFFFFFFFu : v;
        return put_fixed(col, (v >> 1) ^ (0 - (v & 1)), col->kind == K_LONG ? 8 : 4);
    }
    if (col->kind == K_BOOL) {
        if (*p >= end || **p > 1) {
            return NOT_TAKEN;
        }
        return set_bit(&col->data, row, *(*p)++ == 1);
    }
    if (col->kind == K_CHAR) {
        if (end - *p < 2) {
            return NOT_TAKEN;
        }
        uint32_t c = (uint32_t)load(*p, 2, k->big_endian);
        if ((c >= 0xD800 && c <= 0xDFFF) || reserve(&col->data, 3) < 0) {
            return c >= 0xD800 && c <= 0xDFFF ? NOT_TAKEN : NO_MEMORY;
        }
        *p += 2;
        put_utf8(col->data.data, &col->data.len, c);
        return end_value(col);
    }
    int width = fixed_width(col->kind);
    if (end - *p < width) {
        return NOT_TAKEN;
    }
    uint64_t bits = load(*p, width, k->big_endian);
    *p += width;
    return put_fixed(col, bits, width);
}

/* One writeClassAndObject value at *p into the field columns (row ``row``). */
static int
kryo_value(Kryo *k, Py_ssize_t row, const uint8_t **p, const uint8_t *end)
{
    uint64_t class_id, name_id, marker;
    if (kryo_varint(p, end, 5, &class_id) < 0 || class_id == 0) {
        return NOT_TAKEN; /* a null object is the general path's */
    }
    if (class_id == 1) {
        int is_null;
        k->text.len = 0;
        int r = kryo_varint(p, end, 5, &name_id);
        r = r < 0 ? r : kryo_string(p, end, &k->text, &k->units, &is_null);
        if (r < 0) {
            return r;
        }
        if (is_null || k->text.len != (size_t)k->name_len || memcmp(k->text.data, k->name, k->text.len)) {
            return NOT_TAKEN;
        }
    } else if (k->class_id < 0) {
        k->class_id = (long long)class_id;
    } else if ((long long)class_id != k->class_id) {
        return NOT_TAKEN;
    }
    if (kryo_varint(p, end, 5, &marker) < 0 || marker != 1) {
        return NOT_TAKEN;
    }
    for (Py_ssize_t i = 0; i < k->nfields; i++) {
        int r = kryo_field(k, &k->fields[i], row, p, end);
        if (r < 0) {
            return r;
        }
    }
    return TAKEN;
}

#endif
