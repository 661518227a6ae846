/*
 * Optional C accelerator for the heap backend's tables (state_map.py, state_table.py):
 * reads int keys and values out of dict buckets into int64 buffers (snapshots), looks ids
 * up in a table of dict buckets (a snapshot's changed entries), splits change records,
 * moves a bucket's entries into a rehash table, and keeps a map's lists out of the cyclic
 * garbage collector's reach.
 * The pure Python functions beside each caller define the semantics.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Adds the int64 value of `item` at `at` in `dst`; 0 when `item` is not an int (exactly)
 * in int64 range, -1 on an error. */
static int
put_int64(PyObject *item, char *dst, Py_ssize_t at)
{
    int overflow;
    if (!PyLong_CheckExact(item)) {
        return 0;
    }
    long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
    if (overflow) {
        return 0;
    }
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    int64_t w = (int64_t)v;
    memcpy(dst + at * 8, &w, 8);
    return 1;
}

/* The keys and values of buckets (a list of lists of dicts or None) as two bytes objects
 * of native int64, in iteration order; None when some key or value is not an int
 * (exactly) in int64 range: the caller then converts generically, with its own errors. */
static PyObject *
py_int64_items(PyObject *self, PyObject *tables)
{
    if (!PyList_Check(tables)) {
        PyErr_SetString(PyExc_TypeError, "expected a list of lists of dicts");
        return NULL;
    }
    Py_ssize_t count = 0;
    for (Py_ssize_t t = 0; t < PyList_GET_SIZE(tables); t++) {
        PyObject *table = PyList_GET_ITEM(tables, t);
        if (!PyList_Check(table)) {
            PyErr_SetString(PyExc_TypeError, "expected a list of lists of dicts");
            return NULL;
        }
        for (Py_ssize_t b = 0; b < PyList_GET_SIZE(table); b++) {
            PyObject *bucket = PyList_GET_ITEM(table, b);
            if (bucket == Py_None) {
                continue;
            }
            if (!PyDict_Check(bucket)) {
                PyErr_SetString(PyExc_TypeError, "a bucket is neither a dict nor None");
                return NULL;
            }
            count += PyDict_GET_SIZE(bucket);
        }
    }
    PyObject *keys = PyBytes_FromStringAndSize(NULL, count * 8);
    PyObject *values = PyBytes_FromStringAndSize(NULL, count * 8);
    if (keys == NULL || values == NULL) {
        Py_XDECREF(keys);
        Py_XDECREF(values);
        return NULL;
    }
    char *kd = PyBytes_AS_STRING(keys);
    char *vd = PyBytes_AS_STRING(values);
    Py_ssize_t at = 0;
    int ok = 1;
    for (Py_ssize_t t = 0; ok > 0 && t < PyList_GET_SIZE(tables); t++) {
        PyObject *table = PyList_GET_ITEM(tables, t);
        for (Py_ssize_t b = 0; ok > 0 && b < PyList_GET_SIZE(table); b++) {
            PyObject *bucket = PyList_GET_ITEM(table, b);
            if (bucket == Py_None) {
                continue;
            }
            Py_ssize_t pos = 0;
            PyObject *key, *value;
            while (ok > 0 && PyDict_Next(bucket, &pos, &key, &value)) {
                ok = at < count ? put_int64(key, kd, at) : 0;
                if (ok > 0) {
                    ok = put_int64(value, vd, at);
                }
                at++;
            }
        }
    }
    if (ok > 0 && at != count) {
        ok = 0;
    }
    if (ok <= 0) {
        Py_DECREF(keys);
        Py_DECREF(values);
        if (ok < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *out = PyTuple_Pack(2, keys, values);
    Py_DECREF(keys);
    Py_DECREF(values);
    return out;
}

/* Ids looked up ahead of the current one: the memory their lookups will touch is fetched
 * into the cache early, so the latency of many lookups overlaps (a large map is not cached). */
#define PREFETCH_AHEAD 3

/* The bucket index of hash `h` in a table of `n` buckets, as Python's `h % n`. */
static Py_ssize_t
slot_of(Py_hash_t h, Py_ssize_t n)
{
    Py_ssize_t slot = (Py_ssize_t)(h % n);
    return slot < 0 ? slot + n : slot;
}

static PyObject *
bucket_at(PyObject *table, Py_ssize_t n, Py_hash_t h)
{
    return PyList_GET_ITEM(table, slot_of(h, n));
}

#if (defined(__GNUC__) || defined(__clang__)) && PY_VERSION_HEX >= 0x030B0000 && \
    PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED)
/* A dict's keys object as CPython 3.11 to 3.13 lay it out (Include/internal/pycore_dict.h),
 * read only to know which index slot and entry a lookup probes first, so they can be
 * prefetched stage by stage (keys header, index slot, entry, then the entry's key and value
 * objects). Every read is checked against the object's own sizes; what is read never
 * decides a result, only what is prefetched. */
typedef struct {
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size;
    uint8_t dk_log2_index_bytes;
    uint8_t dk_kind; /* 0: entries of (hash, key, value); else (key, value) */
    uint32_t dk_version;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;
    char dk_indices[];
} KeysLayout;
#define PREFETCH_STAGES 6

static KeysLayout *
keys_of(PyObject *bucket)
{
    if (bucket == Py_None || !PyDict_CheckExact(bucket) || ((PyDictObject *)bucket)->ma_values != NULL) {
        return NULL;
    }
    return (KeysLayout *)((PyDictObject *)bucket)->ma_keys;
}

/* The byte offset of the first index slot probed for `h`, or -1 if the header looks wrong. */
static Py_ssize_t
index_offset(const KeysLayout *keys, Py_hash_t h, int *width)
{
    int log2 = keys->dk_log2_size;
    int w = log2 < 8 ? 0 : log2 < 16 ? 1 : log2 < 32 ? 2 : 3; /* log2 of the slot width */
    if (log2 > 48 || keys->dk_log2_index_bytes != log2 + w) {
        return -1;
    }
    *width = w;
    return (Py_ssize_t)(((size_t)h & (((size_t)1 << log2) - 1)) << w);
}

/* The entry probed first for `h` (NULL when the slot is empty or the header looks wrong). */
static const char *
first_entry(const KeysLayout *keys, Py_hash_t h)
{
    int w;
    Py_ssize_t at = index_offset(keys, h, &w);
    if (at < 0) {
        return NULL;
    }
    const char *slot = keys->dk_indices + at;
    int64_t ix = w == 0 ? *(const int8_t *)slot : w == 1 ? *(const int16_t *)slot
               : w == 2 ? *(const int32_t *)slot : *(const int64_t *)slot;
    if (ix < 0 || ix >= keys->dk_nentries) {
        return NULL;
    }
    size_t size = keys->dk_kind == 0 ? 3 * sizeof(void *) : 2 * sizeof(void *);
    return keys->dk_indices + ((size_t)1 << keys->dk_log2_index_bytes) + (size_t)ix * size;
}

/* Stage 0 fetches the bucket's slot of the table, 1 the bucket, 2 its keys header, 3 the
 * index slot, 4 the entry, 5 the entry's key and value. Always inlined: GCC takes a function
 * that only reads and prefetches for a pure one and drops its calls. */
static inline __attribute__((always_inline)) void
prefetch_lookup(PyObject *table, Py_ssize_t n, Py_hash_t h, int stage)
{
    if (stage == 0) {
        __builtin_prefetch(&PyList_GET_ITEM(table, slot_of(h, n)));
        return;
    }
    PyObject *bucket = bucket_at(table, n, h);
    if (stage == 1) {
        __builtin_prefetch(bucket);
        return;
    }
    KeysLayout *keys = keys_of(bucket);
    if (keys == NULL) {
        return;
    }
    if (stage == 2) {
        __builtin_prefetch(keys);
        return;
    }
    if (stage == 3) {
        int w;
        Py_ssize_t at = index_offset(keys, h, &w);
        if (at >= 0) {
            __builtin_prefetch(keys->dk_indices + at);
        }
        return;
    }
    const char *entry = first_entry(keys, h);
    if (entry == NULL) {
        return;
    }
    if (stage == 4) {
        __builtin_prefetch(entry);
        return;
    }
    PyObject *const *pair = (PyObject *const *)(keys->dk_kind == 0 ? entry + sizeof(void *) : entry);
    if (pair[0] != NULL) {
        __builtin_prefetch(pair[0]);
    }
    if (pair[1] != NULL) {
        __builtin_prefetch(pair[1]);
    }
}
#elif defined(__GNUC__) || defined(__clang__)
#define PREFETCH_STAGES 1

static inline __attribute__((always_inline)) void
prefetch_lookup(PyObject *table, Py_ssize_t n, Py_hash_t h, int stage)
{
    PyObject *bucket = bucket_at(table, n, h);
    (void)stage;
    if (bucket != Py_None && PyDict_CheckExact(bucket)) {
        __builtin_prefetch(((PyDictObject *)bucket)->ma_keys);
    }
}
#else
#define PREFETCH_STAGES 0

static void
prefetch_lookup(PyObject *table, Py_ssize_t n, Py_hash_t h, int stage)
{
    (void)table;
    (void)n;
    (void)h;
    (void)stage;
}
#endif

/* Looks ids up in one table of buckets (a list of dicts or None), as Python does:
 * bucket ``table[hash(id) % len(table)]``, then the bucket's get. Returns (found ids,
 * their states, missing ids) in the order of `ids`; a state of None counts as missing.
 * All hashes are taken first, then the lookups run with their memory fetched ahead. */
static PyObject *
py_resolve_in_table(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "expected (table: list, ids: list)");
        return NULL;
    }
    PyObject *table = args[0];
    PyObject *ids = PySequence_List(args[1]); /* a private copy: the ids stay put */
    if (ids == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(table);
    Py_ssize_t count = PyList_GET_SIZE(ids);
    Py_hash_t *hashes = PyMem_Malloc((size_t)(count > 0 ? count : 1) * sizeof(Py_hash_t));
    PyObject *found = PyList_New(0);
    PyObject *states = PyList_New(0);
    PyObject *missing = PyList_New(0);
    if (hashes == NULL || found == NULL || states == NULL || missing == NULL) {
        if (hashes == NULL) {
            PyErr_NoMemory();
        }
        goto fail;
    }
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "empty bucket table");
        goto fail;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        hashes[i] = PyObject_Hash(PyList_GET_ITEM(ids, i));
        if (hashes[i] == -1) {
            goto fail;
        }
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (PyList_GET_SIZE(table) != n) {
            PyErr_SetString(PyExc_RuntimeError, "bucket table changed size during lookup");
            goto fail;
        }
        for (int stage = 0; stage < PREFETCH_STAGES; stage++) {
            Py_ssize_t ahead = i + (Py_ssize_t)(PREFETCH_STAGES - stage) * PREFETCH_AHEAD;
            if (ahead < count) {
                prefetch_lookup(table, n, hashes[ahead], stage);
            }
        }
        PyObject *id = PyList_GET_ITEM(ids, i);
        PyObject *bucket = bucket_at(table, n, hashes[i]);
        PyObject *state = NULL;
        if (bucket != Py_None) {
            if (!PyDict_Check(bucket)) {
                PyErr_SetString(PyExc_TypeError, "a bucket is neither a dict nor None");
                goto fail;
            }
            Py_INCREF(bucket);
            state = PyDict_GetItemWithError(bucket, id);
            Py_XINCREF(state);
            Py_DECREF(bucket);
            if (state == NULL && PyErr_Occurred()) {
                goto fail;
            }
        }
        int err;
        if (state == NULL || state == Py_None) {
            err = PyList_Append(missing, id);
        } else {
            err = PyList_Append(found, id);
            if (err == 0) {
                err = PyList_Append(states, state);
            }
        }
        Py_XDECREF(state);
        if (err < 0) {
            goto fail;
        }
    }
    PyMem_Free(hashes);
    Py_DECREF(ids);
    PyObject *out = PyTuple_Pack(3, found, states, missing);
    Py_DECREF(found);
    Py_DECREF(states);
    Py_DECREF(missing);
    return out;
fail:
    PyMem_Free(hashes);
    Py_DECREF(ids);
    Py_XDECREF(found);
    Py_XDECREF(states);
    Py_XDECREF(missing);
    return NULL;
}


#include "_changes.h" /* A heap change record split into the ids still present and those removed */
#include "_spread.h"  /* Moving a bucket's entries into a rehash table */
#include "_tracking.h" /* Keeping a map's lists out of the cyclic collector's reach */

static PyMethodDef methods[] = {
    {"resolve_in_table", (PyCFunction)(void (*)(void))py_resolve_in_table, METH_FASTCALL,
     "(found ids, states, missing ids) of ids looked up in one table of dict buckets."},
    {"int64_items", py_int64_items, METH_O,
     "Keys and values of lists of dict buckets as native int64 bytes, or None."},
    {"recorded_pairs", py_recorded_pairs, METH_O,
     "A change list of id, state pairs as a dict of id -> its last state."},
    {"split_known", (PyCFunction)(void (*)(void))py_split_known, METH_FASTCALL,
     "(ids with a recorded state, the states, ids recorded as absent) of a change record."},
    {"spread", (PyCFunction)(void (*)(void))py_spread, METH_FASTCALL,
     "Puts a bucket's entries into a table of dict buckets (a rehash's move)."},
    {"untrack", py_untrack, METH_O, "The list, no longer tracked by the cyclic garbage collector."},
    {"track", py_track, METH_O, "Have the cyclic garbage collector track the list again."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tables", "C accelerator for the heap backend's tables.", -1, methods,
};

PyMODINIT_FUNC
PyInit__tables(void)
{
    return PyModule_Create(&module);
}
