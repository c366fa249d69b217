/*
 * Slot access for the one C accelerator that still works on instances of a Python
 * class of kafkette: send_plain in kafkette/producer/_accumulate.c reads seven slots
 * of ProducerCore (kafkette/producer/core.py). The accumulator's, batches' and
 * futures' state is in C types (_accumulate.c) and _append.c is pure; when
 * ProducerCore's plain-send state moves into a C type too, this header goes.
 *
 * A class's __slots__ are found by name once, when the extension is bound to
 * the class (find_slots), and kept as offsets; the hot code then reads and
 * writes the slots directly, as the Python code does through the slots'
 * descriptors. A renamed or missing slot fails the binding at import.
 */
#ifndef KAFKETTE_SLOTS_H
#define KAFKETTE_SLOTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* Offsets of the object slots `names` of `type`: 0, or -1 with an exception. */
static int
find_slots(PyTypeObject *type, const char **names, int count, Py_ssize_t *out)
{
    for (int i = 0; i < count; i++) {
        PyObject *descr = PyObject_GetAttrString((PyObject *)type, names[i]);
        if (descr == NULL)
            return -1;
        int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
                 ((PyMemberDescrObject *)descr)->d_member->type == T_OBJECT_EX;
        if (ok)
            out[i] = ((PyMemberDescrObject *)descr)->d_member->offset;
        Py_DECREF(descr);
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "%s.%s is not a slot", type->tp_name, names[i]);
            return -1;
        }
    }
    return 0;
}

/* The object in the slot at `offset` of `obj` (borrowed; NULL when unset). */
#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

/* The int in a slot into *out: 0, or -1 (with an exception unless the slot is unset
 * or holds something else than an int). */
static inline int
slot_ll(PyObject *obj, Py_ssize_t offset, long long *out)
{
    PyObject *v = SLOT(obj, offset);
    if (v == NULL || !PyLong_CheckExact(v))
        return -1;
    *out = PyLong_AsLongLong(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* Store a new reference in a slot (stolen). */
static inline void
slot_set(PyObject *obj, Py_ssize_t offset, PyObject *value)
{
    PyObject *old = SLOT(obj, offset);
    SLOT(obj, offset) = value;
    Py_XDECREF(old);
}

static inline int
slot_set_ll(PyObject *obj, Py_ssize_t offset, long long value)
{
    PyObject *v = PyLong_FromLongLong(value);
    if (v == NULL)
        return -1;
    slot_set(obj, offset, v);
    return 0;
}

#endif /* KAFKETTE_SLOTS_H */
