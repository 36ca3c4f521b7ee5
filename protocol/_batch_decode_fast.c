/*
 * protocol._batch_decode_fast: the compiled twin of protocol/send_message.py's decode_batch_body
 * (the reference, decode_batch_body_python: same items, same bytes; tests/protocol/
 * test_batch_decode_fast.py compares both on the Java producer's batches and on random ones).
 *
 *   decode_batch_body(data: bytes, suffix: bytes, item_type) -> list | None
 *
 * Each message of a SEND_BATCH_MESSAGE body (TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODY length and
 * bytes, PROPERTIES length and bytes) as an ``item_type`` (BatchItem: flag, body, properties), its
 * properties with ``suffix`` (the batch's own properties) appended after a 0x02 when they do not
 * end with one, as the broker's batch encoder does (``needAppendLastPropertySeparator``).
 *
 * Why: a batch of 32 cost ~30 us of Python to split (unpack, three slices and a tuple a message)
 * and as much again to join each message's properties with the batch's: a large part of the
 * batch's server time when the server is otherwise idle.
 *
 * None when the body does not parse (a length running past it): the reference then decodes it
 * again and raises its MessageDecodeError, so the error and its text are always the reference's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_batch_body.h" /* the body's format and the properties' join, shared with the request path */

static PyObject *joined_properties(const batch_item_t *item, const char *suffix, Py_ssize_t suffix_len) {
    int sep = batch_needs_separator(item->properties, item->properties_n, suffix_len);
    PyObject *out = PyBytes_FromStringAndSize(NULL, item->properties_n + sep + suffix_len);
    if (out == NULL) return NULL;
    batch_join_properties(item->properties, item->properties_n, (const unsigned char *)suffix, suffix_len,
                          (unsigned char *)PyBytes_AS_STRING(out));
    return out;
}

static PyObject *decode_batch_body(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode_batch_body(data, suffix, item_type)");
        return NULL;
    }
    PyObject *data = args[0], *suffix = args[1], *type_obj = args[2];
    if (!PyBytes_CheckExact(data) || !PyBytes_CheckExact(suffix)) {
        PyErr_SetString(PyExc_TypeError, "data and suffix must be bytes");
        return NULL;
    }
    if (!PyType_Check(type_obj) || !PyType_IsSubtype((PyTypeObject *)type_obj, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "item_type must be a tuple type");
        return NULL;
    }
    PyTypeObject *item_type = (PyTypeObject *)type_obj;
    if (item_type->tp_basicsize != PyTuple_Type.tp_basicsize || item_type->tp_dictoffset != 0) {
        PyErr_SetString(PyExc_TypeError, "item_type must be a tuple type without instance fields");
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t end = PyBytes_GET_SIZE(data);
    const char *sfx = PyBytes_AS_STRING(suffix);
    Py_ssize_t sfx_len = PyBytes_GET_SIZE(suffix);

    /* A first pass checks every length, so that a body that does not parse allocates nothing. */
    Py_ssize_t pos = 0, count = 0;
    batch_item_t one;
    int got;
    while ((got = batch_body_next(buf, end, &pos, &one)) > 0) count++;
    if (got < 0) Py_RETURN_NONE;
    PyObject *items = PyList_New(count);
    if (items == NULL) return NULL;
    pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        batch_body_next(buf, end, &pos, &one);
        PyObject *item = item_type->tp_alloc(item_type, 3);
        if (item == NULL) goto fail;
        PyList_SET_ITEM(items, i, item);
        PyObject *flag_obj = PyLong_FromLong(one.flag);
        if (flag_obj == NULL) goto fail;
        PyTuple_SET_ITEM(item, 0, flag_obj);
        PyObject *body = PyBytes_FromStringAndSize((const char *)one.body, one.body_n);
        if (body == NULL) goto fail;
        PyTuple_SET_ITEM(item, 1, body);
        PyObject *props = joined_properties(&one, sfx, sfx_len);
        if (props == NULL) goto fail;
        PyTuple_SET_ITEM(item, 2, props);
    }
    return items;
fail:
    Py_DECREF(items);
    return NULL;
}

static PyMethodDef methods[] = {
    {"decode_batch_body", (PyCFunction)(void (*)(void))decode_batch_body, METH_FASTCALL,
     "Compiled protocol.send_message.decode_batch_body (None where the reference would raise)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._batch_decode_fast",
    "Compiled twin of protocol.send_message.decode_batch_body (see that module for the reference).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__batch_decode_fast(void) { return PyModule_Create(&module); }
