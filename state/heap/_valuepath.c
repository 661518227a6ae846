/* HeapValueState.value() and .update() in C, for their fast path only.
 *
 * The Python methods in value_state.py define the semantics and stay the fallback: these
 * take the same fast path they take (a copy-on-write map's fast table, the void namespace,
 * a key that is not a plain tuple, and for update an entry already present) and hand every
 * other case to them. install() replaces the class's two methods with method descriptors
 * of these functions; the slots read here are found by name once, from the classes'
 * member descriptors, and checked again whenever an object of another type comes by.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_slots.h" /* member_offset */

typedef struct {
    PyTypeObject *type; /* the type the offset is for (a strong reference: never reused) */
    Py_ssize_t offset;  /* 0: not a writable object slot */
} Slot;

static PyObject *slow_value, *slow_update, *compact_fn; /* the Python fallbacks */
static Slot s_ctx, s_maps, s_ns, s_changes, s_compact_at; /* HeapValueState's slots */
static Slot s_key, s_kgi;                                 /* the key context's */
static Slot s_fast_table;                                 /* the state map's */
static PyObject *n_ctx, *n_maps, *n_ns, *n_changes, *n_compact_at, *n_key, *n_kgi, *n_fast_table;

/* The object in slot `name` of `obj` (borrowed), or NULL when `obj` has no such slot or
 * it is unset: the caller then takes the Python path. */
static inline PyObject *
slot(PyObject *obj, Slot *s, PyObject *name)
{
    PyTypeObject *type = Py_TYPE(obj);
    if (type != s->type) {
        Py_INCREF(type);
        Py_XSETREF(s->type, type);
        s->offset = member_offset(type, name);
    }
    if (s->offset == 0) {
        return NULL;
    }
    return *(PyObject **)((char *)obj + s->offset);
}

/* The bucket dict of the current key when the fast path applies (borrowed; Py_None: an
 * empty bucket), with the key-group index, key and table; NULL to take the Python path. */
static PyObject *
fast_bucket(PyObject *self, Py_ssize_t *kgi_out, PyObject **key_out, PyObject **table_out)
{
    PyObject *ctx = slot(self, &s_ctx, n_ctx);
    PyObject *maps = slot(self, &s_maps, n_maps);
    PyObject *ns = slot(self, &s_ns, n_ns);
    if (ctx == NULL || maps == NULL || ns != Py_None || !PyList_CheckExact(maps)) {
        return NULL;
    }
    PyObject *key = slot(ctx, &s_key, n_key);
    PyObject *kgi_obj = slot(ctx, &s_kgi, n_kgi);
    if (key == NULL || kgi_obj == NULL || PyTuple_CheckExact(key) || !PyLong_CheckExact(kgi_obj)) {
        return NULL;
    }
    Py_ssize_t kgi = PyLong_AsSsize_t(kgi_obj);
    if (kgi < 0 || kgi >= PyList_GET_SIZE(maps)) { /* -1: no current key, the guard's */
        PyErr_Clear();
        return NULL;
    }
    PyObject *table = slot(PyList_GET_ITEM(maps, kgi), &s_fast_table, n_fast_table);
    if (table == NULL || !PyList_CheckExact(table) || PyList_GET_SIZE(table) == 0) {
        return NULL;
    }
    Py_hash_t h = PyObject_Hash(key);
    if (h == -1) {
        PyErr_Clear(); /* the Python path raises it */
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(table);
    Py_ssize_t i = (Py_ssize_t)(h % n);
    if (i < 0) {
        i += n; /* Python's modulo */
    }
    PyObject *bucket = PyList_GET_ITEM(table, i);
    if (bucket != Py_None && !PyDict_CheckExact(bucket)) {
        return NULL;
    }
    *kgi_out = kgi;
    *key_out = key;
    *table_out = table;
    return bucket;
}

static PyObject *
value(PyObject *self, PyObject *unused)
{
    Py_ssize_t kgi;
    PyObject *key, *table;
    PyObject *bucket = fast_bucket(self, &kgi, &key, &table);
    if (bucket == NULL) {
        return PyObject_CallOneArg(slow_value, self);
    }
    if (bucket == Py_None) {
        Py_RETURN_NONE;
    }
    PyObject *state = PyDict_GetItemWithError(bucket, key);
    if (state == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    return Py_NewRef(state);
}

static PyObject *
update(PyObject *self, PyObject *state)
{
    Py_ssize_t kgi;
    PyObject *key, *table;
    PyObject *bucket = state == Py_None ? NULL : fast_bucket(self, &kgi, &key, &table);
    if (bucket == NULL || bucket == Py_None) {
        return PyObject_CallFunctionObjArgs(slow_update, self, state, NULL);
    }
    int present = PyDict_Contains(bucket, key);
    if (present <= 0) {
        return present < 0 ? NULL : PyObject_CallFunctionObjArgs(slow_update, self, state, NULL);
    }
    if (PyDict_SetItem(bucket, key, state) < 0) {
        return NULL;
    }
    if (!PyObject_GC_IsTracked(table) && PyObject_GC_IsTracked(bucket)) {
        PyObject_GC_Track(table); /* the bucket holds a tracked object now: see cow_map.py */
    }
    PyObject *changes = slot(self, &s_changes, n_changes);
    if (changes == NULL || !PyList_CheckExact(changes) || PyList_GET_SIZE(changes) == 0) {
        Py_RETURN_NONE; /* not recording */
    }
    if (kgi >= PyList_GET_SIZE(changes)) {
        PyErr_SetString(PyExc_RuntimeError, "change record shorter than the key groups");
        return NULL;
    }
    PyObject *changed = PyList_GET_ITEM(changes, kgi);
    if (!PyList_Check(changed)) {
        PyErr_SetString(PyExc_RuntimeError, "a change record entry that is not a list");
        return NULL;
    }
    if (PyList_Append(changed, key) < 0 || PyList_Append(changed, state) < 0) {
        return NULL;
    }
    PyObject *limit = slot(self, &s_compact_at, n_compact_at);
    if (limit == NULL || !PyLong_CheckExact(limit)) {
        PyErr_SetString(PyExc_RuntimeError, "a heap state without its compaction threshold");
        return NULL;
    }
    Py_ssize_t at = PyLong_AsSsize_t(limit);
    if (at == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (PyList_GET_SIZE(changed) > at) { /* drop the repeats: compact() in state_table.py */
        PyObject *next = PyObject_CallOneArg(compact_fn, changed);
        if (next == NULL) {
            return NULL;
        }
        int err = PyObject_SetAttr(self, n_compact_at, next);
        Py_DECREF(next);
        if (err < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef value_def = {"value", value, METH_NOARGS, "The current key's value (None: none)."};
static PyMethodDef update_def = {"update", update, METH_O, "Set the current key's value (None removes it)."};

/* install(cls, compact): make cls.value and cls.update these functions, the methods they
 * replace becoming their fallbacks. */
static PyObject *
install(PyObject *module, PyObject *args)
{
    PyObject *cls, *compact;
    if (!PyArg_ParseTuple(args, "O!O:install", &PyType_Type, &cls, &compact)) {
        return NULL;
    }
    PyObject *py_value = PyObject_GetAttrString(cls, "value");
    PyObject *py_update = PyObject_GetAttrString(cls, "update");
    if (py_value == NULL || py_update == NULL || !PyFunction_Check(py_value) || !PyFunction_Check(py_update)) {
        Py_XDECREF(py_value);
        Py_XDECREF(py_update);
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "install() expects the Python value() and update() on the class");
        }
        return NULL;
    }
    PyObject *d_value = PyDescr_NewMethod((PyTypeObject *)cls, &value_def);
    PyObject *d_update = PyDescr_NewMethod((PyTypeObject *)cls, &update_def);
    int err = d_value == NULL || d_update == NULL || PyObject_SetAttrString(cls, "value", d_value) < 0 ||
              PyObject_SetAttrString(cls, "update", d_update) < 0;
    Py_XDECREF(d_value);
    Py_XDECREF(d_update);
    if (err) {
        Py_DECREF(py_value);
        Py_DECREF(py_update);
        return NULL;
    }
    Py_XSETREF(slow_value, py_value);
    Py_XSETREF(slow_update, py_update);
    Py_INCREF(compact);
    Py_XSETREF(compact_fn, compact);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", install, METH_VARARGS, "Put the C fast paths of value() and update() on the class."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_valuepath", "HeapValueState's fast path in C.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__valuepath(void)
{
    PyObject **names[] = {&n_ctx, &n_maps, &n_ns, &n_changes, &n_compact_at, &n_key, &n_kgi, &n_fast_table};
    const char *texts[] = {"_ctx", "_maps", "_ns", "_changes", "_compact_at", "key", "kgi", "fast_table"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i] = PyUnicode_InternFromString(texts[i]);
        if (*names[i] == NULL) {
            return NULL;
        }
    }
    return PyModule_Create(&module_def);
}
