/*
 * store.commitlog._view_read_fast: the compiled twin of store/commitlog/view_read.py (same function name, same
 * arguments, same results; the Python module is the readable reference and the tests check that
 * both agree, on the golden store and on hostile input).
 *
 *   copy_record(maps, starts, lengths, max_offset, offset, max_size, shrunk) -> bytes | None
 *
 * Safety contract (a file can shrink under its map; touching a mapped page past the new end of
 * file raises SIGBUS):
 *   - The file's current size is asked of its map on every call (mmap.size(), an fstat of the
 *     mapped inode), after the buffer export is taken: an exported mmap refuses close(), so the
 *     memory cannot be unmapped between the check and the copy by another thread.
 *   - Only bytes below min(mapped length, current size, written end, buffer length) are read: the
 *     size word only when all four of its bytes are, the record only when all of it is.
 *   - A size word <= 0 or over max_size is refused before anything is copied (a garbage size read
 *     inside a record may claim up to 2 GiB).
 * The GIL is held throughout (a record is copied in well under a microsecond), except inside
 * mmap.size() itself, which releases it around fstat as any Python caller would.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_record_layout.h"

static PyObject *size_name; /* "size", interned */

static inline int32_t be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* An int argument as a C long long; beyond a long long it saturates (*clamped set), so comparisons
 * against in-range values still come out as they would in Python. -1 with an error set otherwise. */
static int as_int64(PyObject *obj, long long *out)
{
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (overflow > 0)
        v = LLONG_MAX;
    else if (overflow < 0)
        v = LLONG_MIN;
    *out = v;
    return 0;
}

/* The file's current size (view_read.current_size): 0 for None or a closed map; -1 on another error. */
static int current_size(PyObject *mm, long long *out)
{
    *out = 0;
    if (mm == Py_None)
        return 0;
    PyObject *r = PyObject_CallMethodNoArgs(mm, size_name);
    if (r == NULL) {
        if (PyErr_ExceptionMatches(PyExc_OSError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    int rc = as_int64(r, out);
    Py_DECREF(r);
    return rc;
}

static PyObject *copy_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "copy_record() takes 7 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *maps = args[0], *starts = args[1], *lengths = args[2], *shrunk = args[6];
    if (!PyList_Check(maps) || !PyList_Check(starts) || !PyList_Check(lengths)) {
        PyErr_SetString(PyExc_TypeError, "copy_record() takes maps, starts and lengths as lists");
        return NULL;
    }
    long long max_offset, offset, max_size;
    if (as_int64(args[3], &max_offset) < 0 || as_int64(args[4], &offset) < 0 || as_int64(args[5], &max_size) < 0)
        return NULL;
    if (offset < 0 || offset >= max_offset)
        Py_RETURN_NONE;

    /* bisect_right(starts, offset) - 1 */
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(starts);
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        long long s;
        if (as_int64(PyList_GET_ITEM(starts, mid), &s) < 0)
            return NULL;
        if (offset < s)
            hi = mid;
        else
            lo = mid + 1;
    }
    Py_ssize_t i = lo - 1;
    if (i < 0)
        Py_RETURN_NONE;
    if (i >= PyList_GET_SIZE(lengths) || i >= PyList_GET_SIZE(maps)) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return NULL;
    }
    long long start, length;
    if (as_int64(PyList_GET_ITEM(starts, i), &start) < 0 || as_int64(PyList_GET_ITEM(lengths, i), &length) < 0)
        return NULL;
    /* offset >= start + length (offset >= start here; a difference past a long long is past any length) */
    long long pos;
    if (length <= 0 || __builtin_sub_overflow(offset, start, &pos) || pos >= length)
        Py_RETURN_NONE;

    PyObject *mm = PyList_GET_ITEM(maps, i);
    Py_INCREF(mm); /* the list may change under the calls below */
    Py_buffer buf;
    int have_buf = 0;
    PyObject *result = NULL;
    if (mm != Py_None) {
        if (PyObject_GetBuffer(mm, &buf, PyBUF_SIMPLE) == 0)
            have_buf = 1;
        else if (PyErr_ExceptionMatches(PyExc_ValueError))
            PyErr_Clear(); /* a closed map: its size is 0 below, as in the reference */
        else
            goto done;
    }
    long long now;
    if (current_size(mm, &now) < 0)
        goto done;
    if (now < length) {
        PyObject *r = PyObject_CallFunction(shrunk, "nL", i, now);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
        length = now;
    }
    long long limit = length, to_end;
    if (!__builtin_sub_overflow(max_offset, start, &to_end) && to_end < limit)
        limit = to_end; /* (an overflow means the written end is beyond any length) */
    long long buf_len = have_buf ? (long long)buf.len : 0;
    if (buf_len < limit)
        limit = buf_len;
    if (pos > limit - RECORD_TOTAL_SIZE_WIDTH) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    int32_t size = be32((const unsigned char *)buf.buf + pos + RECORD_TOTAL_SIZE_AT);
    if (size <= 0 || size > limit - pos || size > max_size) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyBytes_FromStringAndSize((const char *)buf.buf + pos, size);
done:
    if (have_buf)
        PyBuffer_Release(&buf);
    Py_DECREF(mm);
    return result;
}

static PyMethodDef methods[] = {
    {"copy_record", (PyCFunction)(void (*)(void))copy_record, METH_FASTCALL,
     "Compiled store.commitlog.view_read.copy_record."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.commitlog._view_read_fast",
    "Compiled twin of store.commitlog.view_read (see that module for the reference).", -1, methods,
};

PyMODINIT_FUNC PyInit__view_read_fast(void)
{
    size_name = PyUnicode_InternFromString("size");
    if (size_name == NULL)
        return NULL;
    return PyModule_Create(&module);
}
