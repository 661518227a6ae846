/* Moving a bucket's entries into a rehash table: spread of the heap tables' C module */
#ifndef FLINKSTATE_SPREAD_H
#define FLINKSTATE_SPREAD_H

#include <Python.h>

/* Entries between the stages of a pass: a key is fetched, then hashed and its target
 * bucket fetched; a value is fetched, then the target's keys header, then the slots the
 * insert writes. */
#define SPREAD_AHEAD 4

#if PREFETCH_STAGES == 6
/* Stage 2 fetches a target's keys header, stage 3 the index slot and the entry an insert
 * of `h` writes (checked as prefetch_lookup's reads are; nothing read decides a result). */
static inline __attribute__((always_inline)) void
prefetch_insert(PyObject *target, Py_hash_t h, int stage)
{
    KeysLayout *keys = keys_of(target);
    if (keys == NULL) {
        return;
    }
    if (stage == 2) {
        __builtin_prefetch(keys, 1);
        return;
    }
    int w;
    Py_ssize_t at = index_offset(keys, h, &w);
    if (at < 0 || keys->dk_nentries < 0 || keys->dk_nentries >= ((Py_ssize_t)1 << keys->dk_log2_size)) {
        return;
    }
    __builtin_prefetch(keys->dk_indices + at, 1);
    size_t size = keys->dk_kind == 0 ? 3 * sizeof(void *) : 2 * sizeof(void *);
    __builtin_prefetch(keys->dk_indices + ((size_t)1 << keys->dk_log2_index_bytes) +
                       (size_t)keys->dk_nentries * size, 1);
}
#elif defined(__GNUC__) || defined(__clang__)
static inline __attribute__((always_inline)) void
prefetch_insert(PyObject *target, Py_hash_t h, int stage)
{
    (void)h;
    if (stage == 2 && PyDict_CheckExact(target)) {
        __builtin_prefetch(((PyDictObject *)target)->ma_keys, 1);
    }
}
#else
static void
prefetch_insert(PyObject *target, Py_hash_t h, int stage)
{
    (void)target;
    (void)h;
    (void)stage;
}
#endif

#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH_WRITE(p) __builtin_prefetch((p), 1)
#else
#define PREFETCH_WRITE(p) ((void)(p))
#endif

/* Drops the references held on the first `held` entries, and the buffers. */
static void
spread_release(PyObject **pairs, Py_ssize_t held, Py_hash_t *hashes)
{
    for (Py_ssize_t i = 0; i < 2 * held; i++) {
        Py_DECREF(pairs[i]);
    }
    PyMem_Free(pairs);
    PyMem_Free(hashes);
}

/* Puts every entry of dict `bucket` into bucket `table[hash(key) % len(table)]`: a new
 * dict where the slot is None (`versions` of that slot set to `version`), and the slot's
 * `hints` set to None. The memory each move touches (key and value objects, target bucket,
 * its keys) is fetched ahead: a rehash of a large map moves entries created far apart.
 * Every entry is held, its hash taken and its target checked before the first one moves,
 * so a failing hash, a wrong table or a bucket changed meanwhile moves nothing (an insert
 * can still fail on memory, or on a key's __eq__). The model is state_map.spread_py. */
static PyObject *
py_spread(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyDict_CheckExact(args[0]) || !PyList_CheckExact(args[1]) ||
        !PyList_CheckExact(args[2]) || !PyList_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "expected (bucket: dict, table: list, versions: list, hints: list, version)");
        return NULL;
    }
    PyObject *bucket = args[0], *table = args[1], *versions = args[2], *hints = args[3], *version = args[4];
    Py_ssize_t n = PyList_GET_SIZE(table);
    if (n == 0 || PyList_GET_SIZE(versions) != n || PyList_GET_SIZE(hints) != n) {
        PyErr_SetString(PyExc_ValueError, "table, versions and hints must have one equal, non-zero size");
        return NULL;
    }
    Py_ssize_t count = PyDict_GET_SIZE(bucket);
    PyObject **pairs = PyMem_Malloc((size_t)(count > 0 ? count : 1) * 2 * sizeof(PyObject *));
    Py_hash_t *hashes = PyMem_Malloc((size_t)(count > 0 ? count : 1) * sizeof(Py_hash_t));
    if (pairs == NULL || hashes == NULL) {
        PyMem_Free(pairs);
        PyMem_Free(hashes);
        return PyErr_NoMemory();
    }
    Py_ssize_t pos = 0, got = 0, held = 0;
    PyObject *key, *value;
    while (got < count && PyDict_Next(bucket, &pos, &key, &value)) {
        pairs[2 * got] = key;
        pairs[2 * got + 1] = value;
        got++;
    }
    /* First every entry held (its key and value referenced, as they are reached), its hash
     * taken and its target checked: a failure there moves nothing. Each key and value,
     * then its target bucket, fetched ahead. */
    for (Py_ssize_t i = -2 * SPREAD_AHEAD; i < count; i++) {
        Py_ssize_t e = i + 2 * SPREAD_AHEAD;
        if (e < count) {
            PREFETCH_WRITE(pairs[2 * e]);
            PREFETCH_WRITE(pairs[2 * e + 1]);
        }
        e = i + SPREAD_AHEAD;
        if (e >= 0 && e < count) {
            if (PyDict_GET_SIZE(bucket) != count || PyList_GET_SIZE(table) != n) {
                goto changed;
            }
            Py_INCREF(pairs[2 * e]);
            Py_INCREF(pairs[2 * e + 1]);
            held = e + 1;
            hashes[e] = PyObject_Hash(pairs[2 * e]);
            if (hashes[e] == -1 && PyErr_Occurred()) {
                goto fail;
            }
            PREFETCH_WRITE(PyList_GET_ITEM(table, slot_of(hashes[e], n)));
        }
        if (i >= 0) {
            PyObject *target = PyList_GET_ITEM(table, slot_of(hashes[i], n));
            if (target != Py_None && !PyDict_CheckExact(target)) {
                PyErr_SetString(PyExc_TypeError, "a bucket is neither a dict nor None");
                goto fail;
            }
        }
    }
    /* Then the moves, each target's keys and the slots the insert writes fetched ahead. */
    for (Py_ssize_t i = -3 * SPREAD_AHEAD; i < count; i++) {
        if (PyList_GET_SIZE(table) != n || PyDict_GET_SIZE(bucket) != count) {
            goto changed;
        }
        Py_ssize_t e = i + 3 * SPREAD_AHEAD;
        if (e < count) {
            PREFETCH_WRITE(PyList_GET_ITEM(table, slot_of(hashes[e], n)));
        }
        for (int stage = 2; stage <= 3; stage++) {
            e = i + (Py_ssize_t)(4 - stage) * SPREAD_AHEAD;
            if (e >= 0 && e < count) {
                prefetch_insert(PyList_GET_ITEM(table, slot_of(hashes[e], n)), hashes[e], stage);
            }
        }
        if (i < 0) {
            continue;
        }
        Py_ssize_t j = slot_of(hashes[i], n);
        PyObject *target = PyList_GET_ITEM(table, j);
        if (target == Py_None) {
            target = PyDict_New();
            if (target == NULL) {
                goto fail;
            }
            Py_INCREF(version);
            PyList_SetItem(versions, j, version);
            PyList_SetItem(table, j, target); /* steals the new dict */
        } else if (!PyDict_CheckExact(target)) {
            PyErr_SetString(PyExc_TypeError, "a bucket is neither a dict nor None");
            goto fail;
        }
        if (PyList_GET_ITEM(hints, j) != Py_None) {
            Py_INCREF(Py_None);
            PyList_SetItem(hints, j, Py_None);
        }
        if (PyDict_SetItem(target, pairs[2 * i], pairs[2 * i + 1]) < 0) {
            goto fail;
        }
    }
    spread_release(pairs, held, hashes);
    Py_RETURN_NONE;
changed:
    PyErr_SetString(PyExc_RuntimeError, "a table changed size during a rehash");
fail:
    spread_release(pairs, held, hashes);
    return NULL;
}

#endif
