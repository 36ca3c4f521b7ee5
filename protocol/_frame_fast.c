/*
 * protocol._frame_fast: the compiled twin of protocol.frame.encode_json_head (same name, same
 * arguments, same bytes; the Python function is the readable reference and the tests check that
 * both agree).
 *
 *   encode_json_head(cmd, body_len) -> bytes | None
 *
 * The frame's two length words and the JSON header of a RemotingCommand, written in one buffer, for
 * the common case only: every string plain printable ASCII without '"' or '\\' (nothing to escape,
 * so the bytes are fastjson's and msgspec's alike), code/flag/opaque/version within a Java int, the
 * language a LanguageCode member, extFields a dict of str to str. Anything else returns None and
 * the caller takes the reference path (which escapes like fastjson, or raises the encode error).
 * Field order is fastjson's: code, extFields, flag, language, opaque, remark,
 * serializeTypeCurrentRPC, version; null remark/extFields are left out.
 * Reads no files, holds no buffers: only Python objects, with the GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    char *p;
    Py_ssize_t len, cap;
    char small[512];
} out_buf;

static int ob_need(out_buf *b, Py_ssize_t more) {
    if (b->len + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap * 2;
    while (cap < b->len + more) cap *= 2;
    char *grown;
    if (b->p == b->small) {
        grown = PyMem_Malloc((size_t)cap);
        if (grown != NULL) memcpy(grown, b->p, (size_t)b->len);
    } else {
        grown = PyMem_Realloc(b->p, (size_t)cap);
    }
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = grown;
    b->cap = cap;
    return 0;
}

static int ob_add(out_buf *b, const char *s, Py_ssize_t n) {
    if (ob_need(b, n) < 0) return -1;
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
    return 0;
}

#define LIT(b, s) ob_add((b), (s), (Py_ssize_t)(sizeof(s) - 1))

/* 1 = written, 0 = not plain (fall back), -1 = error. */
static int add_plain_string(out_buf *b, PyObject *s) {
    if (!PyUnicode_Check(s) || !PyUnicode_IS_ASCII(s)) return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const unsigned char *d = PyUnicode_1BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = d[i];
        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') return 0;
    }
    if (ob_need(b, n + 2) < 0) return -1;
    b->p[b->len++] = '"';
    memcpy(b->p + b->len, d, (size_t)n);
    b->len += n;
    b->p[b->len++] = '"';
    return 1;
}

static PyObject *s_code, *s_flag, *s_opaque, *s_version, *s_ext_fields, *s_remark, *s_language, *s_name;

/* Decimal digits of x into b. */
static int add_decimal(out_buf *b, long long x) {
    char tmp[24];
    int n = 0;
    unsigned long long u = x < 0 ? (unsigned long long)(-(x + 1)) + 1 : (unsigned long long)x;
    do {
        tmp[sizeof tmp - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0) tmp[sizeof tmp - 1 - n++] = '-';
    return ob_add(b, tmp + sizeof tmp - n, n);
}

/* 1 = written, 0 = out of Java int range or not an int (fall back), -1 = error. */
static int add_int_field(out_buf *b, PyObject *cmd, PyObject *name) {
    PyObject *v = PyObject_GetAttr(cmd, name);
    if (v == NULL) return -1;
    if (!PyLong_Check(v)) {
        Py_DECREF(v);
        return 0;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (overflow || x < INT32_MIN || x > INT32_MAX) return 0;
    return add_decimal(b, x) < 0 ? -1 : 1;
}

static PyObject *encode_json_head(PyObject *self, PyObject *args) {
    PyObject *cmd;
    Py_ssize_t body_len;
    if (!PyArg_ParseTuple(args, "On:encode_json_head", &cmd, &body_len)) return NULL;
    out_buf b;
    b.p = b.small;
    b.len = 0;
    b.cap = (Py_ssize_t)sizeof b.small;
    PyObject *result = NULL, *ext = NULL, *remark = NULL, *language = NULL, *lang_name = NULL;
    int r;
    b.len = 8; /* the two length words, filled in at the end */
    if (LIT(&b, "{\"code\":") < 0) goto error;
    if ((r = add_int_field(&b, cmd, s_code)) <= 0) goto fallback_or_error;
    ext = PyObject_GetAttr(cmd, s_ext_fields);
    if (ext == NULL) goto error;
    if (ext != Py_None) {
        if (!PyDict_CheckExact(ext)) goto fallback;
        if (LIT(&b, ",\"extFields\":{") < 0) goto error;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        int first = 1;
        while (PyDict_Next(ext, &pos, &k, &v)) {
            if (!first && LIT(&b, ",") < 0) goto error;
            first = 0;
            if ((r = add_plain_string(&b, k)) <= 0) goto fallback_or_error;
            if (LIT(&b, ":") < 0) goto error;
            if ((r = add_plain_string(&b, v)) <= 0) goto fallback_or_error;
        }
        if (LIT(&b, "}") < 0) goto error;
    }
    if (LIT(&b, ",\"flag\":") < 0) goto error;
    if ((r = add_int_field(&b, cmd, s_flag)) <= 0) goto fallback_or_error;
    language = PyObject_GetAttr(cmd, s_language);
    if (language == NULL) goto error;
    if (PyLong_CheckExact(language)) goto fallback; /* a plain int: the reference maps it */
    lang_name = PyObject_GetAttr(language, s_name);
    if (lang_name == NULL) {
        PyErr_Clear();
        goto fallback;
    }
    if (LIT(&b, ",\"language\":") < 0) goto error;
    if ((r = add_plain_string(&b, lang_name)) <= 0) goto fallback_or_error;
    if (LIT(&b, ",\"opaque\":") < 0) goto error;
    if ((r = add_int_field(&b, cmd, s_opaque)) <= 0) goto fallback_or_error;
    remark = PyObject_GetAttr(cmd, s_remark);
    if (remark == NULL) goto error;
    if (remark != Py_None) {
        if (LIT(&b, ",\"remark\":") < 0) goto error;
        if ((r = add_plain_string(&b, remark)) <= 0) goto fallback_or_error;
    }
    if (LIT(&b, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":") < 0) goto error;
    if ((r = add_int_field(&b, cmd, s_version)) <= 0) goto fallback_or_error;
    if (LIT(&b, "}") < 0) goto error;
    {
        Py_ssize_t header_len = b.len - 8;
        long long length = 4 + (long long)header_len + (long long)body_len;
        if (header_len > 0xFFFFFF || body_len < 0 || length > 0x7FFFFFFFLL - 4) goto fallback;
        uint32_t l = (uint32_t)length, h = (uint32_t)header_len; /* serialize type JSON = 0 */
        unsigned char *p = (unsigned char *)b.p;
        p[0] = (unsigned char)(l >> 24);
        p[1] = (unsigned char)(l >> 16);
        p[2] = (unsigned char)(l >> 8);
        p[3] = (unsigned char)l;
        p[4] = (unsigned char)(h >> 24);
        p[5] = (unsigned char)(h >> 16);
        p[6] = (unsigned char)(h >> 8);
        p[7] = (unsigned char)h;
    }
    result = PyBytes_FromStringAndSize(b.p, b.len);
    goto done;
fallback_or_error:
    if (r < 0) goto error;
fallback:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    if (b.p != b.small) PyMem_Free(b.p);
    Py_XDECREF(ext);
    Py_XDECREF(remark);
    Py_XDECREF(language);
    Py_XDECREF(lang_name);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_json_head", encode_json_head, METH_VARARGS, "Compiled protocol.frame.encode_json_head."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._frame_fast",
    "Compiled twin of protocol.frame.encode_json_head (see that function for the reference).", -1, methods,
};

PyMODINIT_FUNC PyInit__frame_fast(void) {
    if (!(s_code = PyUnicode_InternFromString("code")) || !(s_flag = PyUnicode_InternFromString("flag")) ||
        !(s_opaque = PyUnicode_InternFromString("opaque")) ||
        !(s_version = PyUnicode_InternFromString("version")) ||
        !(s_ext_fields = PyUnicode_InternFromString("ext_fields")) ||
        !(s_remark = PyUnicode_InternFromString("remark")) ||
        !(s_language = PyUnicode_InternFromString("language")) || !(s_name = PyUnicode_InternFromString("_name_")))
        return NULL;
    return PyModule_Create(&module);
}
