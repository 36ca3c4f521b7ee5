/* The compiled twins of store/platform/file_facts.py: (inode, link count, size) of a file, from one
 * fstat(2) or stat(2), without building an os.stat_result (its float and nanosecond times are most
 * of what a per-put check of a file paid beside the system call). The GIL is released around the
 * call as os.fstat and os.stat release it; a failure raises what they raise: OSError, made into its
 * subclass by errno, with the path for path_facts. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

static PyObject *facts(const struct stat *st)
{
    return Py_BuildValue("(KKL)", (unsigned long long)st->st_ino, (unsigned long long)st->st_nlink,
                         (long long)st->st_size);
}

static PyObject *fd_facts(PyObject *module, PyObject *arg)
{
    (void)module;
    /* an int, as os.fstat takes it (a negative one is the system call's EBADF, not a ValueError) */
    long value = PyLong_AsLong(arg);
    if (value == -1 && PyErr_Occurred())
        return NULL;
    if (value < INT_MIN || value > INT_MAX) {
        PyErr_SetString(PyExc_OverflowError, "fd is out of range for a file descriptor");
        return NULL;
    }
    int fd = (int)value;
    struct stat st;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = fstat(fd, &st);
    Py_END_ALLOW_THREADS
    if (rc != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return facts(&st);
}

static PyObject *path_facts(PyObject *module, PyObject *arg)
{
    (void)module;
    /* the str or bytes the path object stands for: what os.stat names in its error */
    PyObject *named = PyOS_FSPath(arg);
    if (named == NULL)
        return NULL;
    PyObject *encoded = NULL;
    if (!PyUnicode_FSConverter(named, &encoded)) {
        Py_DECREF(named);
        return NULL;
    }
    struct stat st;
    int rc;
    const char *path = PyBytes_AS_STRING(encoded);
    Py_BEGIN_ALLOW_THREADS
    rc = stat(path, &st);
    Py_END_ALLOW_THREADS
    Py_DECREF(encoded);
    if (rc != 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, named);
        Py_DECREF(named);
        return NULL;
    }
    Py_DECREF(named);
    return facts(&st);
}

static PyMethodDef methods[] = {
    {"fd_facts", fd_facts, METH_O, "(inode, link count, size) of the file open as fd (fstat)."},
    {"path_facts", path_facts, METH_O, "(inode, link count, size) of the file at path (stat)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_file_facts_fast", "The compiled twins of store/platform/file_facts.py.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__file_facts_fast(void)
{
    return PyModule_Create(&module);
}
