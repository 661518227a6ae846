/* Rows built as they are consumed: the rows(cls, columns) iterator of the process loop's C module */
#ifndef FLINKSTATE_ROWS_H
#define FLINKSTATE_ROWS_H

#include <Python.h>

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

#endif /* FLINKSTATE_ROWS_H */
