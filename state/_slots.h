/* Where an object of a class with __slots__ keeps one of them, for C code that reads or
 * writes it directly (as PyMember_GetOne/SetOne do): shared by the state accelerators. */
#ifndef FLINKSTATE_SLOTS_H
#define FLINKSTATE_SLOTS_H

#include <Python.h>
#include <structmember.h> /* T_OBJECT_EX, READONLY */

/* The byte offset of slot `name` in objects of `type`, or 0 when it is not a writable
 * object slot (or the type's attribute access is not the generic one). */
static Py_ssize_t
member_offset(PyTypeObject *type, PyObject *name)
{
    if (type->tp_setattro != PyObject_GenericSetAttr) {
        return 0;
    }
    PyObject *d = PyObject_GetAttr((PyObject *)type, name);
    if (d == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t offset = 0;
    if (Py_IS_TYPE(d, &PyMemberDescr_Type)) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY)) {
            offset = m->offset;
        }
    }
    Py_DECREF(d);
    return offset;
}

#endif
