/*
 * protocol._index_key_fast: the compiled twin of protocol/index_key.py's two hash functions (same
 * names, same results; the Python module is the readable reference, and tests check that both
 * agree on the broker's 230 hashed keys and on random strings with surrogates and astral code points).
 *
 *   java_string_hash(s) -> int    Java's String.hashCode over UTF-16 code units, as a signed int32
 *   index_key_hash(s) -> int      IndexFile.indexKeyHashMethod: abs(hashCode), 0 for Integer.MIN_VALUE
 *
 * Why: every QUERY_MESSAGE hashes "topic#key"; the Python loop costs ~2 us for "TopicA#k-3" and
 * ~7-12 us for a 32-56 character UNIQ_KEY, a large part of a ~45 us request.
 *
 * A code point above U+FFFF counts as its surrogate pair (as Java stores it); a lone surrogate in a
 * Python str (what "surrogatepass" decoding gives) is one code unit, as the reference encodes it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_index_key_hash.h"

static int check_str(PyObject *s) {
    if (!PyUnicode_Check(s)) {
        PyErr_Format(PyExc_TypeError, "a str is required, not %.100s", Py_TYPE(s)->tp_name);
        return -1;
    }
    return PyUnicode_READY(s);
}

static PyObject *java_string_hash(PyObject *self, PyObject *s) {
    if (check_str(s) < 0) return NULL;
    return PyLong_FromLong(java_hash_str(0, s));
}

static PyObject *index_key_hash(PyObject *self, PyObject *s) {
    if (check_str(s) < 0) return NULL;
    return PyLong_FromLong(java_index_hash(java_hash_str(0, s)));
}

static PyMethodDef methods[] = {
    {"java_string_hash", java_string_hash, METH_O, "Compiled protocol.index_key.java_string_hash."},
    {"index_key_hash", index_key_hash, METH_O, "Compiled protocol.index_key.index_key_hash."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._index_key_fast",
    "Compiled twins of protocol.index_key (see that module for the reference).", -1, methods,
};

PyMODINIT_FUNC PyInit__index_key_fast(void) { return PyModule_Create(&module); }
