/*
 * protocol._frame_fast: the compiled twins of protocol.frame.encode_json_head and
 * protocol.frame.decode_frames (same names, same arguments, same answers; the Python functions are
 * the readable references and the tests check that both agree).
 *
 *   encode_json_head(cmd, body_len) -> bytes | None
 *   bind(decode_frames, decode_payload, frame_problem, frame_error) -> None
 *   decode_frames(data, max_frame_length, max_header_length) -> (list of commands, position)
 *
 * The frame's two length words and the JSON header of a RemotingCommand, written in one buffer, for
 * the common case only: every string plain printable ASCII without '"' or '\\' (nothing to escape,
 * so the bytes are fastjson's and msgspec's alike), code/flag/opaque/version within a Java int, the
 * language a LanguageCode member, extFields a dict of str to str. Anything else returns None and
 * the caller takes the reference path (which escapes like fastjson, or raises the encode error).
 * Field order is fastjson's: code, extFields, flag, language, opaque, remark,
 * serializeTypeCurrentRPC, version; null remark/extFields are left out.
 *
 * decode_frames walks the frames of a flat byte buffer in C: the two length words of each are
 * checked here, and a JSON header of the common shape is decoded without a Python call through
 * protocol._header_json_fast's capsule (see _header_json_fast.h), the body copied to bytes. Every
 * other frame (ROCKETMQ headers, a JSON header the compiled decoder is not sure of, an unknown
 * serialize type) goes to the reference protocol.frame._decode_payload, and a bad length word to
 * protocol.frame._frame_problem, which builds the error: so every command, every error type and
 * message are the reference's. A FrameError raised for a frame gets `decoded`, the tuple of the
 * commands before it, as the reference sets it. A buffer that is not flat contiguous bytes goes to
 * the reference decode_frames whole. bind() hands over those Python functions (and FrameError);
 * protocol.frame calls it when it loads this module.
 *
 * Reads no files; holds the caller's buffer only during the call, with the GIL held.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "_header_json_fast.h"

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


/* decode_frames ----------------------------------------------------------------------------- */

static PyObject *reference_decode_frames = NULL, *decode_payload = NULL, *frame_problem = NULL,
                *frame_error = NULL;
static const header_json_fast_api *json_api = NULL;

static PyObject *bind(PyObject *self, PyObject *args) {
    PyObject *reference, *payload, *problem, *error;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOO:bind", &reference, &payload, &problem, &error)) return NULL;
    if (json_api == NULL) {
        /* Without the compiled JSON header decoder every frame goes to the reference. */
        json_api = PyCapsule_Import(HEADER_JSON_FAST_CAPSULE, 0);
        if (json_api == NULL) PyErr_Clear();
    }
    Py_INCREF(reference);
    Py_INCREF(payload);
    Py_INCREF(problem);
    Py_INCREF(error);
    Py_XSETREF(reference_decode_frames, reference);
    Py_XSETREF(decode_payload, payload);
    Py_XSETREF(frame_problem, problem);
    Py_XSETREF(frame_error, error);
    Py_RETURN_NONE;
}

static int32_t be_int32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* A limit as a C integer: Python ints beyond long long are clamped (the lengths compared with it are
 * at most 32 bits, so clamping never changes a comparison). */
static int as_limit(PyObject *value, long long *out) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow > 0) v = LLONG_MAX / 4;
    if (overflow < 0) v = LLONG_MIN / 4;
    if (v > LLONG_MAX / 4) v = LLONG_MAX / 4;
    if (v < LLONG_MIN / 4) v = LLONG_MIN / 4;
    *out = v;
    return 0;
}

/* The pending Python error, if it is a FrameError, gets `decoded` = tuple(commands). */
static void add_decoded(PyObject *commands) {
    PyObject *type, *value, *tb;
    if (!PyErr_ExceptionMatches(frame_error)) return;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *decoded = PyList_AsTuple(commands);
    if (decoded == NULL || PyObject_SetAttrString(value, "decoded", decoded) < 0) {
        Py_XDECREF(decoded);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return; /* that error replaces the frame's */
    }
    Py_DECREF(decoded);
    if (tb != NULL) PyException_SetTraceback(value, tb);
    PyErr_Restore(type, value, tb);
}

static PyObject *decode_frames(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "decode_frames(data, max_frame_length, max_header_length)");
        return NULL;
    }
    if (reference_decode_frames == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._frame_fast is not bound (protocol.frame does it)");
        return NULL;
    }
    long long max_frame_length, max_header_length;
    if (as_limit(args[1], &max_frame_length) < 0 || as_limit(args[2], &max_header_length) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
        PyErr_Clear(); /* limits that are not ints: the reference compares whatever they are */
        return PyObject_Vectorcall(reference_decode_frames, args, 3, NULL);
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        return PyObject_Vectorcall(reference_decode_frames, args, 3, NULL); /* it says what is wrong */
    }
    if (buf.ndim != 1 || buf.itemsize != 1 || !PyBuffer_IsContiguous(&buf, 'C')) {
        PyBuffer_Release(&buf);
        return PyObject_Vectorcall(reference_decode_frames, args, 3, NULL);
    }
    const unsigned char *data = buf.buf;
    Py_ssize_t size = buf.len, pos = 0;
    long long limit = max_frame_length - 4;
    PyObject *commands = PyList_New(0), *view = NULL, *result = NULL;
    if (commands == NULL) goto done;
    while (size - pos >= 4) {
        long long length = be_int32(data + pos);
        int have_header_len = size - pos >= 8;
        long long header_len = have_header_len ? (be_int32(data + pos + 4) & 0xFFFFFF) : -1;
        if (length < 4 || length > limit ||
            (have_header_len && (header_len > length - 4 || header_len > max_header_length))) {
            PyObject *hl = have_header_len ? PyLong_FromLongLong(header_len) : Py_NewRef(Py_None);
            PyObject *problem = NULL;
            if (hl != NULL) problem = PyObject_CallFunction(frame_problem, "LOOO", length, hl, args[1], args[2]);
            Py_XDECREF(hl);
            if (problem == NULL) goto done;
            if (problem == Py_None) {
                Py_DECREF(problem);
                PyErr_SetString(PyExc_RuntimeError, "frame_problem found nothing wrong with a bad frame");
                goto done;
            }
            PyErr_SetObject((PyObject *)Py_TYPE(problem), problem);
            Py_DECREF(problem);
            add_decoded(commands);
            goto done;
        }
        Py_ssize_t end = pos + 4 + (Py_ssize_t)length;
        if (end > size) break;
        PyObject *cmd = NULL;
        int decoded = 0;
        if (json_api != NULL && data[pos + 4] == 0) { /* serialize type JSON */
            Py_ssize_t header_start = pos + 8, header_end = header_start + (Py_ssize_t)header_len;
            PyObject *body = NULL;
            if (header_end < end) {
                body = PyBytes_FromStringAndSize((const char *)data + header_end, end - header_end);
                if (body == NULL) goto done;
            }
            decoded = json_api->decode_common((const char *)data + header_start, header_len, body, &cmd);
            Py_XDECREF(body);
            if (decoded < 0) goto done;
        }
        if (!decoded) {
            /* The reference decodes this frame (and raises its error), over a view as it does. */
            if (view == NULL && (view = PyMemoryView_FromObject(args[0])) == NULL) goto done;
            cmd = PyObject_CallFunction(decode_payload, "Onn", view, pos + 4, end);
            if (cmd == NULL) {
                add_decoded(commands);
                goto done;
            }
        }
        int appended = PyList_Append(commands, cmd);
        Py_DECREF(cmd);
        if (appended < 0) goto done;
        pos = end;
    }
    {
        PyObject *at = PyLong_FromSsize_t(pos);
        if (at != NULL) result = PyTuple_Pack(2, commands, at);
        Py_XDECREF(at);
    }
done:
    Py_XDECREF(commands);
    Py_XDECREF(view);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_json_head", encode_json_head, METH_VARARGS, "Compiled protocol.frame.encode_json_head."},
    {"bind", bind, METH_VARARGS,
     "bind(decode_frames, decode_payload, frame_problem, frame_error): the reference and its parts."},
    {"decode_frames", (PyCFunction)(void (*)(void))decode_frames, METH_FASTCALL, "Compiled protocol.frame.decode_frames."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._frame_fast",
    "Compiled twins of protocol.frame.encode_json_head and decode_frames (see those for the references).", -1,
    methods,
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
