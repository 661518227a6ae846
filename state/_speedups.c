/*
 * Optional C accelerator for flinkstate.state.keygroups.
 *
 * Computes Java hashCode() semantics (String over UTF-16 code units, Integer,
 * Long) and Flink's murmur finalizer, then the key group. The pure-Python
 * functions in keygroups.py define the semantics; tests check both agree.
 * Also reads int keys and values out of dict buckets into int64 buffers (snapshots), and
 * looks ids up in a table of dict buckets (a snapshot's changed entries).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int32_t
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

static int
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

static int32_t
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

static PyObject *
bucket_at(PyObject *table, Py_ssize_t n, Py_hash_t h)
{
    Py_ssize_t slot = (Py_ssize_t)(h % n);
    if (slot < 0) {
        slot += n;
    }
    return PyList_GET_ITEM(table, slot);
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
        Py_ssize_t slot = (Py_ssize_t)(h % n);
        __builtin_prefetch(&PyList_GET_ITEM(table, slot < 0 ? slot + n : slot));
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


/* ---- the per-record loop of KeyedProcessOperator.process_elements ------------------- */

#include "_slots.h" /* member_offset: the key context's slots */

/* The backend's live key-setter description (AbstractKeyedStateBackend.key_setter_spec):
 * [python key type, key-group function, max parallelism, range start, range count,
 *  key context, key listeners]. Updated in place by the backend, so read per record. */
enum { SPEC_PYTYPE, SPEC_KG_FN, SPEC_MAX_P, SPEC_START, SPEC_COUNT, SPEC_CTX, SPEC_LISTENERS, SPEC_SIZE };

static PyObject *str_key, *str_kgi, *str_ts, *str_extend;

/* Where a key context keeps `key` and `kgi`: its object slots (written directly, as
 * PyMember_SetOne does), or, when it has none (offsets 0), set through setattr. */
typedef struct {
    PyObject *ctx; /* the context the offsets are for (a strong reference) */
    Py_ssize_t key, kgi;
} KeySlots;

static void
find_slots(KeySlots *slots, PyObject *ctx)
{
    Py_INCREF(ctx);
    Py_XSETREF(slots->ctx, ctx);
    slots->key = member_offset(Py_TYPE(ctx), str_key);
    slots->kgi = member_offset(Py_TYPE(ctx), str_kgi);
    if (slots->key == 0 || slots->kgi == 0) {
        slots->key = slots->kgi = 0;
    }
}

static void
put_slot(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject **at = (PyObject **)((char *)obj + offset);
    PyObject *old = *at;
    Py_INCREF(value);
    *at = value;
    Py_XDECREF(old);
}

static int
intern_names(void)
{
    if (str_extend != NULL) {
        return 0;
    }
    str_key = PyUnicode_InternFromString("key");
    str_kgi = PyUnicode_InternFromString("kgi");
    str_ts = PyUnicode_InternFromString("ts");
    str_extend = PyUnicode_InternFromString("extend");
    return (str_key && str_kgi && str_ts && str_extend) ? 0 : -1;
}

/* The key group of `key` by `fn`, computed here when `fn` is one of this module's own
 * functions (what the backend would call). 1 with *group set; 0 when the Python setter
 * must decide (it raises the typed error, or coerces); -1 on an error to propagate. */
static int
key_group_of(PyObject *fn, PyObject *key, PyObject *maxp_obj, long maxp, long *group)
{
    if (PyCFunction_Check(fn)) {
        PyCFunction c = PyCFunction_GET_FUNCTION(fn);
        int32_t code;
        if (c == (PyCFunction)(void (*)(void))py_key_group_for_string) {
            if (!PyUnicode_Check(key)) {
                return 0;
            }
            code = string_hash(key);
        } else if (c == (PyCFunction)(void (*)(void))py_key_group_for_long
                   || c == (PyCFunction)(void (*)(void))py_key_group_for_int) {
            int overflow;
            if (!PyLong_Check(key)) {
                return 0;
            }
            long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
            if (overflow || (v == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                return 0;
            }
            if (c == (PyCFunction)(void (*)(void))py_key_group_for_int) {
                if (v < INT32_MIN || v > INT32_MAX) {
                    return 0;
                }
                code = (int32_t)v;
            } else {
                uint64_t u = (uint64_t)v;
                code = (int32_t)(uint32_t)(u ^ (u >> 32));
            }
        } else {
            goto generic;
        }
        *group = murmur(code) % maxp;
        return 1;
    }
generic:;
    PyObject *call_args[2] = {key, maxp_obj};
    PyObject *res = PyObject_Vectorcall(fn, call_args, 2, NULL);
    if (res == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            return -1;
        }
        PyErr_Clear(); /* the Python setter raises it again, typed */
        return 0;
    }
    int overflow = 0, exact = PyLong_CheckExact(res);
    long g = exact ? PyLong_AsLongAndOverflow(res, &overflow) : -1;
    Py_DECREF(res);
    if (!exact || overflow || (g == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *group = g;
    return 1;
}

static int
spec_long(PyObject *spec, int at, long *out)
{
    PyObject *v = PyList_GET_ITEM(spec, at);
    *out = PyLong_Check(v) ? PyLong_AsLong(v) : -1;
    if (!PyLong_Check(v) || (*out == -1 && PyErr_Occurred())) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "key setter spec: expected an int");
        }
        return -1;
    }
    return 0;
}

/* AbstractKeyedStateBackend.set_current_key(key) done here when the key's type is the
 * backend's and its key group is in range; otherwise `set_key(key)` (the Python setter). */
static int
set_current_key(PyObject *spec, PyObject *set_key, PyObject *key, KeySlots *slots)
{
    if (!PyList_CheckExact(spec) || PyList_GET_SIZE(spec) != SPEC_SIZE) {
        PyErr_SetString(PyExc_TypeError, "key setter spec: expected a list of 7");
        return -1;
    }
    int done = 0;
    long group = 0, maxp, start, count;
    if ((PyObject *)Py_TYPE(key) == PyList_GET_ITEM(spec, SPEC_PYTYPE)) {
        if (spec_long(spec, SPEC_MAX_P, &maxp) < 0 || spec_long(spec, SPEC_START, &start) < 0
            || spec_long(spec, SPEC_COUNT, &count) < 0) {
            return -1;
        }
        if (maxp <= 0) {
            PyErr_SetString(PyExc_ValueError, "max parallelism must be positive");
            return -1;
        }
        PyObject *fn = PyList_GET_ITEM(spec, SPEC_KG_FN);
        PyObject *maxp_obj = PyList_GET_ITEM(spec, SPEC_MAX_P);
        Py_INCREF(fn);
        Py_INCREF(maxp_obj);
        done = key_group_of(fn, key, maxp_obj, maxp, &group);
        Py_DECREF(fn);
        Py_DECREF(maxp_obj);
        if (done < 0) {
            return -1;
        }
        group -= start;
        if (done && (group < 0 || group >= count)) {
            done = 0; /* the Python setter raises KEY_GROUP_OUT_OF_RANGE */
        }
    }
    if (!done) {
        PyObject *r = PyObject_CallOneArg(set_key, key);
        Py_XDECREF(r);
        return r == NULL ? -1 : 0;
    }
    if (PyList_GET_SIZE(spec) != SPEC_SIZE) {
        PyErr_SetString(PyExc_TypeError, "key setter spec: expected a list of 7");
        return -1;
    }
    PyObject *ctx = PyList_GET_ITEM(spec, SPEC_CTX);
    PyObject *listeners = PyList_GET_ITEM(spec, SPEC_LISTENERS);
    PyObject *kgi = PyLong_FromLong(group);
    if (kgi == NULL) {
        return -1;
    }
    Py_INCREF(ctx);
    Py_INCREF(listeners);
    if (ctx != slots->ctx) {
        find_slots(slots, ctx);
    }
    int err = 0;
    if (slots->key != 0) {
        put_slot(ctx, slots->key, key);
        put_slot(ctx, slots->kgi, kgi);
    } else {
        err = PyObject_SetAttr(ctx, str_key, key);
        if (err == 0) {
            err = PyObject_SetAttr(ctx, str_kgi, kgi);
        }
    }
    Py_DECREF(kgi);
    Py_DECREF(ctx);
    if (err == 0 && !PyList_Check(listeners)) {
        PyErr_SetString(PyExc_TypeError, "key setter spec: listeners must be a list");
        err = -1;
    }
    /* as iterating the list in Python: listeners added meanwhile are called too */
    for (Py_ssize_t i = 0; err == 0 && i < PyList_GET_SIZE(listeners); i++) {
        PyObject *listener = PyList_GET_ITEM(listeners, i);
        Py_INCREF(listener);
        PyObject *r = PyObject_CallNoArgs(listener);
        Py_DECREF(listener);
        Py_XDECREF(r);
        err = r == NULL ? -1 : 0;
    }
    Py_DECREF(listeners);
    return err;
}

/* The exception the user function raised becomes fail(exc), raised "from exc" (its cause
 * and its context, as a raise in an except block). BaseExceptions that are not
 * Exceptions pass unchanged. Always returns -1. */
static int
raise_failed(PyObject *fail)
{
    if (!PyErr_ExceptionMatches(PyExc_Exception)) {
        return -1;
    }
    PyObject *type, *exc, *tb;
    PyErr_Fetch(&type, &exc, &tb);
    PyErr_NormalizeException(&type, &exc, &tb);
    if (tb != NULL) {
        PyException_SetTraceback(exc, tb);
    }
    Py_XDECREF(type);
    Py_XDECREF(tb);
    PyObject *wrapped = PyObject_CallOneArg(fail, exc);
    if (wrapped == NULL) {
        PyObject *t2, *e2, *tb2;
        PyErr_Fetch(&t2, &e2, &tb2);
        PyErr_NormalizeException(&t2, &e2, &tb2);
        if (e2 != exc) {
            PyException_SetContext(e2, exc); /* steals exc */
        } else {
            Py_DECREF(exc);
        }
        PyErr_Restore(t2, e2, tb2);
        return -1;
    }
    if (!PyExceptionInstance_Check(wrapped)) {
        Py_DECREF(wrapped);
        Py_DECREF(exc);
        PyErr_SetString(PyExc_TypeError, "fail() must return an exception");
        return -1;
    }
    Py_INCREF(exc);
    PyException_SetCause(wrapped, exc); /* steals one reference */
    PyException_SetContext(wrapped, exc); /* steals the other */
    PyObject *wtype = (PyObject *)Py_TYPE(wrapped);
    Py_INCREF(wtype);
    PyErr_Restore(wtype, wrapped, NULL);
    return -1;
}

/* The next item of an iterator: 1 with *item set, 0 when exhausted, -1 on an error. */
static int
next_item(PyObject *it, PyObject **item)
{
    *item = Py_TYPE(it)->tp_iternext(it);
    if (*item != NULL) {
        return 1;
    }
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_StopIteration)) {
            return -1;
        }
        PyErr_Clear();
    }
    return 0;
}

/* Emits `result` (not None) to `output`: a tuple's items directly, anything else by
 * output.extend(result), as the Python loop does. */
static int
emit(PyObject *output, PyObject *result)
{
    if (PyTuple_CheckExact(result)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(result); i++) {
            if (PyList_Append(output, PyTuple_GET_ITEM(result, i)) < 0) {
                return -1;
            }
        }
        return 0;
    }
    PyObject *r = PyObject_CallMethodOneArg(output, str_extend, result);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
}

/* One record: the watermark step (event time with a delay), the key, ctx.ts, the call. */
static int
process_one(PyObject *const *a, PyObject *key, PyObject *value, PyObject *stamp, PyObject **watermark,
            KeySlots *slots)
{
    PyObject *spec = a[0], *set_key = a[1], *function = a[5], *ctx = a[6], *output = a[7];
    PyObject *fail = a[8], *delay = a[9], *advance = a[11];
    if (stamp != Py_None && delay != Py_None) {
        PyObject *late = PyNumber_Subtract(stamp, delay);
        PyObject *one = late == NULL ? NULL : PyLong_FromLong(1);
        PyObject *due = one == NULL ? NULL : PyNumber_Subtract(late, one);
        Py_XDECREF(late);
        Py_XDECREF(one);
        if (due == NULL) {
            return -1;
        }
        int later = PyObject_RichCompareBool(due, *watermark, Py_GT);
        if (later > 0) {
            PyObject *moved = PyObject_CallOneArg(advance, due);
            if (moved != NULL) {
                Py_SETREF(*watermark, moved);
            } else {
                later = -1;
            }
        }
        Py_DECREF(due);
        if (later < 0) {
            return -1;
        }
    }
    if (set_current_key(spec, set_key, key, slots) < 0 || PyObject_SetAttr(ctx, str_ts, stamp) < 0) {
        return -1;
    }
    PyObject *call_args[3] = {NULL, value, ctx};
    PyObject *result = PyObject_Vectorcall(function, call_args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (result == NULL) {
        return raise_failed(fail);
    }
    int err = result == Py_None ? 0 : emit(output, result);
    Py_DECREF(result);
    return err < 0 ? raise_failed(fail) : 0;
}

/* process_keyed(spec, set_key, keys, values, stamps, function, ctx, output, fail, delay,
 * watermark, advance): KeyedProcessOperator.process_elements' loop over
 * zip(keys, values, stamps or repeat(None, len(keys)), strict=True), with its errors. */
static PyObject *
py_process_keyed(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "process_keyed expects 12 arguments");
        return NULL;
    }
    if (intern_names() < 0) {
        return NULL;
    }
    if (!PyList_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError, "process_keyed: output must be a list");
        return NULL;
    }
    PyObject *its[3] = {NULL, NULL, NULL};
    Py_ssize_t nits = args[4] == Py_None ? 2 : 3;
    Py_ssize_t remaining = 0; /* repeat(None, len(keys)) when there are no stamps */
    if (nits == 2 && (remaining = PyObject_Length(args[2])) < 0) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nits; i++) {
        if ((its[i] = PyObject_GetIter(args[2 + i])) == NULL) {
            goto fail;
        }
    }
    PyObject *watermark = args[10];
    Py_INCREF(watermark);
    KeySlots slots = {NULL, 0, 0};
    for (;;) {
        PyObject *items[3] = {NULL, NULL, Py_None};
        Py_ssize_t at = 0;
        int got = 1;
        for (; at < 3 && got > 0; at++) {
            if (at == 2 && nits == 2) {
                got = remaining > 0;
                remaining -= got;
            } else {
                got = next_item(its[at], &items[at]);
            }
        }
        if (got <= 0) {
            at -= 1; /* the argument that ended (or failed) */
            Py_XDECREF(items[0]);
            Py_XDECREF(items[1]);
            if (got < 0) {
                goto fail_watermark;
            }
            const char *plural = at == 1 ? " " : "s 1-";
            if (at > 0) {
                PyErr_Format(PyExc_ValueError, "zip() argument %zd is shorter than argument%s%zd",
                             at + 1, plural, at);
                goto fail_watermark;
            }
            for (Py_ssize_t i = 1; i < 3; i++) { /* keys ended: the others must end too */
                PyObject *extra = NULL;
                int more = i == 2 && nits == 2 ? remaining > 0 : next_item(its[i], &extra);
                Py_XDECREF(extra);
                if (more < 0) {
                    goto fail_watermark;
                }
                if (more > 0) {
                    PyErr_Format(PyExc_ValueError, "zip() argument %zd is longer than argument%s%zd",
                                 i + 1, i == 1 ? " " : "s 1-", i);
                    goto fail_watermark;
                }
            }
            break;
        }
        int err = process_one(args, items[0], items[1], items[2], &watermark, &slots);
        Py_DECREF(items[0]);
        Py_DECREF(items[1]);
        if (nits == 3) {
            Py_DECREF(items[2]);
        }
        if (err < 0) {
            goto fail_watermark;
        }
    }
    Py_DECREF(watermark);
    Py_XDECREF(slots.ctx);
    for (Py_ssize_t i = 0; i < nits; i++) {
        Py_DECREF(its[i]);
    }
    Py_RETURN_NONE;
fail_watermark:
    Py_DECREF(watermark);
    Py_XDECREF(slots.ctx);
fail:
    for (Py_ssize_t i = 0; i < 3; i++) {
        Py_XDECREF(its[i]);
    }
    return NULL;
}

/* ---- rows built as they are consumed ------------------------------------------------- */

/* rows(cls, columns): an iterator of cls instances (a tuple subclass) whose fields are
 * the columns' (lists') items at one index, as map(partial(tuple.__new__, cls),
 * zip(*columns, strict=True)) builds them (with zip's errors), without the intermediate
 * tuple and calls. */
typedef struct {
    PyObject_HEAD
    PyTypeObject *cls;
    PyObject *columns; /* a tuple of lists */
    Py_ssize_t at;      /* the next row's index; PY_SSIZE_T_MAX once exhausted */
} RowIter;

static void
rowiter_dealloc(RowIter *it)
{
    PyTypeObject *type = Py_TYPE(it);
    Py_XDECREF(it->cls);
    Py_XDECREF(it->columns);
    type->tp_free((PyObject *)it);
    Py_DECREF(type);
}

static PyObject *
rowiter_next(RowIter *it)
{
    Py_ssize_t width = PyTuple_GET_SIZE(it->columns), at = it->at;
    for (Py_ssize_t j = 0; j < width; j++) { /* zip(*columns, strict=True)'s checks */
        if (PyList_GET_SIZE(PyTuple_GET_ITEM(it->columns, j)) > at) {
            continue;
        }
        if (j > 0) {
            return PyErr_Format(PyExc_ValueError, "zip() argument %zd is shorter than argument%s%zd", j + 1,
                                j == 1 ? " " : "s 1-", j);
        }
        for (Py_ssize_t k = 1; k < width; k++) {
            if (PyList_GET_SIZE(PyTuple_GET_ITEM(it->columns, k)) > at) {
                return PyErr_Format(PyExc_ValueError, "zip() argument %zd is longer than argument%s%zd",
                                    k + 1, k == 1 ? " " : "s 1-", k);
            }
        }
        it->at = PY_SSIZE_T_MAX; /* exhausted for good, as zip */
        return NULL;
    }
    if (width == 0) {
        return NULL;
    }
    PyObject *row = it->cls == &PyTuple_Type ? PyTuple_New(width) : it->cls->tp_alloc(it->cls, width);
    if (row == NULL) {
        return NULL;
    }
    for (Py_ssize_t j = 0; j < width; j++) {
        PyObject *item = PyList_GET_ITEM(PyTuple_GET_ITEM(it->columns, j), at);
        Py_INCREF(item);
        PyTuple_SET_ITEM(row, j, item);
    }
    it->at = at + 1;
    return (PyObject *)row;
}

static PyType_Slot rowiter_slots[] = {
    {Py_tp_dealloc, rowiter_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, rowiter_next},
    {0, NULL},
};

static PyType_Spec rowiter_spec = {
    "flinkstate.state._speedups.rows", sizeof(RowIter), 0, Py_TPFLAGS_DEFAULT, rowiter_slots,
};

static PyObject *rowiter_type;

static PyObject *
py_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0]) || !PySequence_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "expected (cls: a tuple subclass, columns: a sequence of lists)");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    if (!PyType_IsSubtype(cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "rows: cls must be tuple or a subclass of it");
        return NULL;
    }
    PyObject *columns = PySequence_Tuple(args[1]);
    if (columns == NULL) {
        return NULL;
    }
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(columns); j++) {
        if (!PyList_Check(PyTuple_GET_ITEM(columns, j))) {
            Py_DECREF(columns);
            PyErr_SetString(PyExc_TypeError, "rows: every column must be a list");
            return NULL;
        }
    }
    if (rowiter_type == NULL && (rowiter_type = PyType_FromSpec(&rowiter_spec)) == NULL) {
        Py_DECREF(columns);
        return NULL;
    }
    RowIter *it = PyObject_New(RowIter, (PyTypeObject *)rowiter_type);
    if (it == NULL) {
        Py_DECREF(columns);
        return NULL;
    }
    Py_INCREF(cls);
    it->cls = cls;
    it->columns = columns;
    it->at = 0;
    return (PyObject *)it;
}

/* ---- a heap change record split into the ids still present and those removed --------- */

/* (ids recorded with a state, those states, ids recorded with `absent`) of a dict of
 * id -> state, in the dict's order: the model is state_map.split_known_py. */
static PyObject *
py_split_known(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "expected (recorded: dict, absent)");
        return NULL;
    }
    PyObject *recorded = args[0], *absent = args[1];
    Py_ssize_t pos = 0;
    PyObject *id, *state;
    int any_absent = 0;
    while (PyDict_Next(recorded, &pos, &id, &state)) {
        if (state == absent) {
            any_absent = 1;
            break;
        }
    }
    PyObject *found = NULL, *states = NULL, *others = NULL;
    if (!any_absent) {
        found = PyDict_Keys(recorded);
        states = PyDict_Values(recorded);
        others = PyList_New(0);
    } else {
        found = PyList_New(0);
        states = PyList_New(0);
        others = PyList_New(0);
        if (found != NULL && states != NULL && others != NULL) {
            pos = 0;
            while (PyDict_Next(recorded, &pos, &id, &state)) {
                int err = state == absent ? PyList_Append(others, id)
                          : PyList_Append(found, id) < 0 ? -1 : PyList_Append(states, state);
                if (err < 0) {
                    goto fail;
                }
            }
        }
    }
    if (found == NULL || states == NULL || others == NULL) {
        goto fail;
    }
    PyObject *out = PyTuple_Pack(3, found, states, others);
    Py_DECREF(found);
    Py_DECREF(states);
    Py_DECREF(others);
    return out;
fail:
    Py_XDECREF(found);
    Py_XDECREF(states);
    Py_XDECREF(others);
    return NULL;
}

/* A change list of id, state pairs as a dict of id -> its last state (the model is
 * state_table.recorded_py). The ids and states lie wherever they were allocated: each is
 * fetched some pairs ahead (the checkpoint converts the states next). */
#define RECORDED_AHEAD 8
static PyObject *
py_recorded_pairs(PyObject *self, PyObject *changed)
{
    if (!PyList_Check(changed) || PyList_GET_SIZE(changed) % 2) {
        PyErr_SetString(PyExc_TypeError, "expected a list of id, state pairs");
        return NULL;
    }
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i + 1 < PyList_GET_SIZE(changed); i += 2) {
#if defined(__GNUC__) || defined(__clang__)
        if (i + 2 * RECORDED_AHEAD + 1 < PyList_GET_SIZE(changed)) { /* hashing reads the id */
            __builtin_prefetch(PyList_GET_ITEM(changed, i + 2 * RECORDED_AHEAD));
            __builtin_prefetch(PyList_GET_ITEM(changed, i + 2 * RECORDED_AHEAD + 1));
        }
#endif
        PyObject *id = PyList_GET_ITEM(changed, i), *state = PyList_GET_ITEM(changed, i + 1);
        Py_INCREF(id);
        Py_INCREF(state);
        int err = PyDict_SetItem(out, id, state); /* may run __hash__/__eq__: refs held */
        Py_DECREF(id);
        Py_DECREF(state);
        if (err < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyMethodDef methods[] = {
    {"resolve_in_table", (PyCFunction)(void (*)(void))py_resolve_in_table, METH_FASTCALL,
     "(found ids, states, missing ids) of ids looked up in one table of dict buckets."},
    {"int64_items", py_int64_items, METH_O,
     "Keys and values of lists of dict buckets as native int64 bytes, or None."},
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
    {"process_keyed", (PyCFunction)(void (*)(void))py_process_keyed, METH_FASTCALL,
     "The per-record loop of KeyedProcessOperator.process_elements."},
    {"rows", (PyCFunction)(void (*)(void))py_rows, METH_FASTCALL,
     "Rows of a tuple (sub)class from columns (lists), one per index, built as consumed."},
    {"recorded_pairs", py_recorded_pairs, METH_O,
     "A change list of id, state pairs as a dict of id -> its last state."},
    {"split_known", (PyCFunction)(void (*)(void))py_split_known, METH_FASTCALL,
     "(ids with a recorded state, the states, ids recorded as absent) of a change record."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_speedups", "C accelerator for key-group assignment.", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
