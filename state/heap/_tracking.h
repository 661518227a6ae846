/* Keeping a map's lists out of the cyclic collector's reach: untrack, track of the heap tables' C module */
#ifndef FLINKSTATE_TRACKING_H
#define FLINKSTATE_TRACKING_H

#include <Python.h>

/* untrack(lst): `lst`, no longer tracked by the cyclic garbage collector, which then never
 * traverses it. Only for a list that cannot be part of a reference cycle: one whose items
 * are all untracked (None, ints, or dicts the collector does not track, which hold nothing
 * it tracks) and stay so; whoever puts a tracked object in it first calls track(lst). The
 * model is state_map.untrack's fallback, which leaves the list tracked. */
static PyObject *
py_untrack(PyObject *self, PyObject *lst)
{
    if (!PyList_CheckExact(lst)) {
        PyErr_SetString(PyExc_TypeError, "expected a list");
        return NULL;
    }
    PyObject_GC_UnTrack(lst);
    return Py_NewRef(lst);
}

/* track(lst): have the collector track `lst` again (a no-op when it does). */
static PyObject *
py_track(PyObject *self, PyObject *lst)
{
    if (!PyList_CheckExact(lst)) {
        PyErr_SetString(PyExc_TypeError, "expected a list");
        return NULL;
    }
    if (!PyObject_GC_IsTracked(lst)) {
        PyObject_GC_Track(lst);
    }
    Py_RETURN_NONE;
}

#endif
