/*
 * Optional C accelerator for flinkstate.state.process: the per-record loop of
 * KeyedProcessOperator.process_elements and the rows it builds. operator.py holds the
 * Python loop that defines the semantics; tests run both.
 */
#include "../keygroups/_javahash.h"
#include <string.h>

/* ---- the per-record loop of KeyedProcessOperator.process_elements ------------------- */

#include "../_slots.h" /* member_offset: the key context's slots */

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

/* The C functions of keygroups/_hashing.c the backend's key setter may be (found by
 * pointer, once): their key groups are computed here, without the call. NULL when that
 * accelerator is not built. */
static PyCFunction kg_string, kg_long, kg_int;
static int kg_loaded;

static void
load_key_group_functions(void)
{
    kg_loaded = 1;
    PyObject *mod = PyImport_ImportModule("flinkstate.state.keygroups._hashing");
    if (mod == NULL) {
        PyErr_Clear();
        return;
    }
    const char *names[3] = {"key_group_for_string", "key_group_for_long", "key_group_for_int"};
    PyCFunction *slots[3] = {&kg_string, &kg_long, &kg_int};
    for (int i = 0; i < 3; i++) {
        PyObject *fn = PyObject_GetAttrString(mod, names[i]);
        if (fn != NULL && PyCFunction_Check(fn)) {
            *slots[i] = PyCFunction_GET_FUNCTION(fn);
        }
        Py_XDECREF(fn);
        PyErr_Clear();
    }
    Py_DECREF(mod);
}

/* The key group of `key` by `fn`, computed here when `fn` is one of this module's own
 * functions (what the backend would call). 1 with *group set; 0 when the Python setter
 * must decide (it raises the typed error, or coerces); -1 on an error to propagate. */
static int
key_group_of(PyObject *fn, PyObject *key, PyObject *maxp_obj, long maxp, long *group)
{
    if (!kg_loaded) {
        load_key_group_functions();
    }
    if (PyCFunction_Check(fn)) {
        PyCFunction c = PyCFunction_GET_FUNCTION(fn);
        int32_t code;
        if (c == kg_string) {
            if (!PyUnicode_Check(key)) {
                return 0;
            }
            code = string_hash(key);
        } else if (c == kg_long
                   || c == kg_int) {
            int overflow;
            if (!PyLong_Check(key)) {
                return 0;
            }
            long long v = PyLong_AsLongLongAndOverflow(key, &overflow);
            if (overflow || (v == -1 && PyErr_Occurred())) {
                PyErr_Clear();
                return 0;
            }
            if (c == kg_int) {
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

#include "_rows.h" /* Rows built as they are consumed */

static PyMethodDef methods[] = {
    {"process_keyed", (PyCFunction)(void (*)(void))py_process_keyed, METH_FASTCALL,
     "The per-record loop of KeyedProcessOperator.process_elements."},
    {"rows", (PyCFunction)(void (*)(void))py_rows, METH_FASTCALL,
     "Rows of a tuple (sub)class from columns (lists), one per index, built as consumed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_loop", "C accelerator for the per-record loop of KeyedProcessOperator.", -1, methods,
};

PyMODINIT_FUNC
PyInit__loop(void)
{
    return PyModule_Create(&module);
}
