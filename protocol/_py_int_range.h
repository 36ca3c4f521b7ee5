/*
 * An int a compiled module takes from Python, within bounds: the one rule the batch append
 * (store/write/_batch_encode_fast.c) and the plain SENDs (server/remoting/_request_path_plain.h) apply
 * to the numbers the writer hands them (offsets, sizes, timestamps, ports), so a value out of range
 * sends the call back to the Python reference instead of being truncated.
 */
#ifndef RMQ_PY_INT_RANGE_H
#define RMQ_PY_INT_RANGE_H

#include <Python.h>

/* 1 and *out set when o is an int within [lo, hi]; 0 otherwise, with no error left set. */
static inline int py_int_in_range(PyObject *o, long long lo, long long hi, long long *out)
{
    if (o == NULL || !PyLong_Check(o))
        return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (v < lo || v > hi)
        return 0;
    *out = v;
    return 1;
}

#endif
