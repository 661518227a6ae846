/* TimerQueue.register() in C, for its fast path: the current key already has a timer at
 * that time (the common case of a function that registers a timer for every element).
 *
 * The Python method in timers.py defines the semantics and stays the fallback: this takes
 * the same fast path it takes (a plain int timestamp in int64 range, a current key, the
 * pair (timestamp, key) among the live timers) and hands every other call to it. install()
 * replaces the class's method with a method descriptor of this function; the slots read
 * here are found by name once, from the classes' member descriptors.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../_slots.h" /* member_offset */

typedef struct {
    PyTypeObject *type; /* the type the offset is for (a strong reference: never reused) */
    Py_ssize_t offset;  /* 0: not a writable object slot */
} Slot;

static PyObject *slow_register;         /* the Python method */
static Slot s_key_ctx, s_live, s_key;   /* TimerQueue._key, TimerQueue._live, KeyContext.key */
static PyObject *n_key_ctx, *n_live, *n_key;

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

/* 1: the current key has a live timer at `timestamp`; 0: take the Python path; -1: error. */
static int
known(PyObject *self, PyObject *timestamp)
{
    if (!PyLong_CheckExact(timestamp)) {
        return 0;
    }
    int overflow = 0;
    long long ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow);
    if (overflow || (ts == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    PyObject *ctx = slot(self, &s_key_ctx, n_key_ctx);
    PyObject *live = slot(self, &s_live, n_live);
    if (ctx == NULL || live == NULL || !PySet_CheckExact(live)) {
        return 0;
    }
    PyObject *key = slot(ctx, &s_key, n_key);
    if (key == NULL || key == Py_None) {
        return 0;
    }
    PyObject *pair = PyTuple_Pack(2, timestamp, key);
    if (pair == NULL) {
        return -1;
    }
    int found = PySet_Contains(live, pair);
    Py_DECREF(pair);
    return found;
}

static PyObject *
register_timer(PyObject *self, PyObject *timestamp)
{
    int found = known(self, timestamp);
    if (found < 0) {
        return NULL;
    }
    if (found) {
        Py_RETURN_NONE;
    }
    return PyObject_CallFunctionObjArgs(slow_register, self, timestamp, NULL);
}

static PyMethodDef register_def = {
    "register", register_timer, METH_O, "A timer at timestamp for the current key (C fast path)."};

static PyObject *
install(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "install() expects the TimerQueue class");
        return NULL;
    }
    PyObject *py_register = PyObject_GetAttrString(cls, "register");
    if (py_register == NULL) {
        return NULL;
    }
    if (!PyFunction_Check(py_register)) {
        Py_DECREF(py_register);
        PyErr_SetString(PyExc_TypeError, "install() expects the Python register() on the class");
        return NULL;
    }
    PyObject *descr = PyDescr_NewMethod((PyTypeObject *)cls, &register_def);
    if (descr == NULL || PyObject_SetAttrString(cls, "register", descr) < 0) {
        Py_XDECREF(descr);
        Py_DECREF(py_register);
        return NULL;
    }
    Py_DECREF(descr);
    Py_XSETREF(slow_register, py_register);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"install", install, METH_O, "Put the C fast path of register() on the class."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_timerpath", "TimerQueue.register()'s fast path in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__timerpath(void)
{
    PyObject **names[] = {&n_key_ctx, &n_live, &n_key};
    const char *texts[] = {"_key", "_live", "key"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        *names[i] = PyUnicode_InternFromString(texts[i]);
        if (*names[i] == NULL) {
            return NULL;
        }
    }
    return PyModule_Create(&module_def);
}
