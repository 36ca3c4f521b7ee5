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
 *
 * The read itself is view_locate() of _view_read_core.h, shared with the compiled request path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_record_layout.h"
#include "_view_read_core.h"

static PyObject *size_name; /* "size", interned */

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
    if (view_as_int64(args[3], &max_offset) < 0 || view_as_int64(args[4], &offset) < 0 ||
        view_as_int64(args[5], &max_size) < 0)
        return NULL;
    view_record rec;
    int found = view_locate(maps, starts, lengths, max_offset, offset, max_size, shrunk, size_name, &rec);
    PyObject *result;
    if (found < 0)
        result = NULL;
    else if (found == VIEW_NONE)
        result = Py_NewRef(Py_None);
    else
        result = PyBytes_FromStringAndSize((const char *)rec.buf.buf + rec.pos, rec.size);
    view_release(&rec);
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
