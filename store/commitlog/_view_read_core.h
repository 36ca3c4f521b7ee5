/*
 * The VIEW_MESSAGE_BY_ID read, stated once for the compiled code that needs it: the twin of
 * store/commitlog/view_read.copy_record (store/commitlog/_view_read_fast.c) and the compiled request
 * path (server/remoting/_request_path_fast.c), which copies the record straight into its output
 * buffer instead of into a bytes object. The rules and the safety contract are view_read.py's and
 * _view_read_fast.c's header comment's: the file's current size is asked of its map on every read
 * (after the buffer export is taken, so the map cannot be closed under the copy), nothing at or past
 * min(mapped length, current size, written end, buffer length) is read, a size word <= 0 or over
 * max_size is no record.
 *
 * view_locate() finds the record; on VIEW_FOUND the caller reads rec->buf.buf[rec->pos, rec->pos +
 * rec->size) and must call view_release(rec) afterwards (on every result, -1 included).
 */
#ifndef RMQ_VIEW_READ_CORE_H
#define RMQ_VIEW_READ_CORE_H

#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "_record_layout.h"

#define VIEW_NONE 0
#define VIEW_FOUND 1

typedef struct {
    PyObject *mm; /* a strong reference to the map while its buffer is held (or NULL) */
    Py_buffer buf;
    int have_buf;
    long long pos;  /* the record's position in buf */
    int32_t size;   /* its size word */
} view_record;

static inline int32_t view_be32(const unsigned char *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* An int as a C long long; beyond a long long it saturates, so comparisons against in-range values
 * still come out as they would in Python. -1 with an error set otherwise. */
/* The big-endian int64 at p (a consume queue entry's offset and tags code, a record's timestamps). */
static inline int64_t view_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int view_as_int64(PyObject *obj, long long *out)
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
/* bisect_right(starts, x) - 1 into *out: the last of the ascending ints in the list `starts` that
 * is <= x (-1 when none). 0, or -1 with an error set. */
static int view_bisect(PyObject *starts, long long x, Py_ssize_t *out)
{
    Py_ssize_t lo = 0, hi = PyList_GET_SIZE(starts);
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        long long s;
        if (view_as_int64(PyList_GET_ITEM(starts, mid), &s) < 0)
            return -1;
        if (x < s)
            hi = mid;
        else
            lo = mid + 1;
    }
    *out = lo - 1;
    return 0;
}

/* mmap.mmap and its size method, found at the first map of that type: a map of exactly that type
 * has its size() called straight, the call PyObject_CallMethodNoArgs makes after looking the name
 * up (the lookup was a fifth of the per-read size check's own instructions). Anything else, a
 * subclass included, is asked by name. Strong references, kept for the process's life. */
static PyTypeObject *view_mmap_type = NULL;
static PyObject *view_mmap_size = NULL;

static inline PyObject *view_call_size(PyObject *mm, PyObject *size_name)
{
    PyTypeObject *type = Py_TYPE(mm);
    if (type == view_mmap_type)
        return PyObject_Vectorcall(view_mmap_size, &mm, 1, NULL);
    if (view_mmap_type == NULL && strcmp(type->tp_name, "mmap.mmap") == 0) {
        PyObject *method = PyObject_GetAttr((PyObject *)type, size_name);
        if (method == NULL)
            return NULL;
        Py_INCREF(type);
        view_mmap_type = type;
        view_mmap_size = method;
        return PyObject_Vectorcall(view_mmap_size, &mm, 1, NULL);
    }
    return PyObject_CallMethodNoArgs(mm, size_name);
}

static inline int view_current_size(PyObject *mm, PyObject *size_name, long long *out)
{
    *out = 0;
    if (mm == Py_None)
        return 0;
    PyObject *r = view_call_size(mm, size_name);
    if (r == NULL) {
        if (PyErr_ExceptionMatches(PyExc_OSError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    int rc = view_as_int64(r, out);
    Py_DECREF(r);
    return rc;
}

static inline void view_release(view_record *rec)
{
    if (rec->have_buf)
        PyBuffer_Release(&rec->buf);
    rec->have_buf = 0;
    Py_CLEAR(rec->mm);
}

/* The record at CommitLog `offset`: VIEW_FOUND (rec filled), VIEW_NONE, or -1 with an error set.
 * maps, starts and lengths must be lists; size_name is the interned "size". */
static int view_locate(PyObject *maps, PyObject *starts, PyObject *lengths, long long max_offset,
                       long long offset, long long max_size, PyObject *shrunk, PyObject *size_name,
                       view_record *rec)
{
    rec->mm = NULL;
    rec->have_buf = 0;
    if (offset < 0 || offset >= max_offset)
        return VIEW_NONE;
    Py_ssize_t i;
    if (view_bisect(starts, offset, &i) < 0)
        return -1;
    if (i < 0)
        return VIEW_NONE;
    if (i >= PyList_GET_SIZE(lengths) || i >= PyList_GET_SIZE(maps)) {
        PyErr_SetString(PyExc_IndexError, "list index out of range");
        return -1;
    }
    long long start, length;
    if (view_as_int64(PyList_GET_ITEM(starts, i), &start) < 0 ||
        view_as_int64(PyList_GET_ITEM(lengths, i), &length) < 0)
        return -1;
    /* offset >= start + length (offset >= start here; a difference past a long long is past any length) */
    long long pos;
    if (length <= 0 || __builtin_sub_overflow(offset, start, &pos) || pos >= length)
        return VIEW_NONE;

    PyObject *mm = PyList_GET_ITEM(maps, i);
    Py_INCREF(mm); /* the list may change under the calls below */
    rec->mm = mm;
    if (mm != Py_None) {
        if (PyObject_GetBuffer(mm, &rec->buf, PyBUF_SIMPLE) == 0)
            rec->have_buf = 1;
        else if (PyErr_ExceptionMatches(PyExc_ValueError))
            PyErr_Clear(); /* a closed map: its size is 0 below, as in the reference */
        else
            return -1;
    }
    long long now;
    if (view_current_size(mm, size_name, &now) < 0)
        return -1;
    if (now < length) {
        PyObject *r = PyObject_CallFunction(shrunk, "nL", i, now);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
        length = now;
    }
    long long limit = length, to_end;
    if (!__builtin_sub_overflow(max_offset, start, &to_end) && to_end < limit)
        limit = to_end; /* (an overflow means the written end is beyond any length) */
    long long buf_len = rec->have_buf ? (long long)rec->buf.len : 0;
    if (buf_len < limit)
        limit = buf_len;
    if (pos > limit - RECORD_TOTAL_SIZE_WIDTH)
        return VIEW_NONE;
    int32_t size = view_be32((const unsigned char *)rec->buf.buf + pos + RECORD_TOTAL_SIZE_AT);
    if (size <= 0 || size > limit - pos || size > max_size)
        return VIEW_NONE;
    rec->pos = pos;
    rec->size = size;
    return VIEW_FOUND;
}

#endif
