/* A heap change record split into the ids still present and those removed: split_known, recorded_pairs of the heap tables' C module */
#ifndef FLINKSTATE_CHANGES_H
#define FLINKSTATE_CHANGES_H

#include <Python.h>

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

#endif /* FLINKSTATE_CHANGES_H */
