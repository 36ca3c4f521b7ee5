/*
 * server.remoting._request_path_fast: the compiled request path (issue 22). One call per received
 * read answers the VIEW_MESSAGE_BY_ID frames at its start: it splits the frames, reads their JSON
 * headers, reads each record from the CommitLog's maps and writes every answer (length words, JSON
 * header, record) into one output buffer. The Python path (FrameDecoder, Dispatcher,
 * QueryMessageProcessor.view_message_by_id, encode_frame_parts) is the reference: this path only
 * takes a frame it is sure of and stops at the first one it is not, which the caller then hands,
 * with everything after it, to the Python path. Its answers are the reference's bytes
 * (tests/server/remoting/test_request_path.py feeds the same reads to a connection with and without
 * it and compares the bytes written).
 *
 *   bind(ok_a, ok_b, err_a, err_b, err_c) -> None
 *       the answer templates, made once by server/remoting/request_path.py with the Python encoder
 *       (so the answer format stays stated in one place): a found record is answered
 *       ok_a + opaque + ok_b (the JSON header) and the record; a missing one
 *       err_a + opaque + err_b + offset + err_c.
 *   answer_views(data, pos, maps, starts, lengths, max_offset, max_size, shrunk,
 *                max_frame_length, max_header_length, flush_bytes)
 *       -> (answers: bytes | None, pos: int, answered: int, found: int, found_bytes: int)
 *       answers the frames of data[pos:] it is sure of, in order, stopping at the first other one,
 *       at an incomplete frame, or once the answers reach flush_bytes. pos is where it stopped.
 *       found is how many were answered with their record (the others SYSTEM_ERROR, no message),
 *       found_bytes the records' total size (the store's served-bytes accounting).
 *
 * A frame is taken only when all of this holds, anything else is left to the Python path:
 *   - its length words are within the limits and the frame is whole in data; JSON serialization;
 *     no body;
 *   - its header is one flat JSON object without whitespace or escapes whose keys are among code,
 *     extFields, flag, language, opaque, remark, serializeTypeCurrentRPC, version, each at most once;
 *     code, flag, opaque and version are int32 JSON numbers (missing ones are 0, as in the
 *     reference decoder); language is a plain string; remark a plain string or null;
 *     serializeTypeCurrentRPC "JSON"; extFields exactly {"offset":"<1-18 digits>"};
 *   - code is VIEW_MESSAGE_BY_ID (33) and the flag has neither the response nor the oneway bit.
 * The record is read by view_locate() (store/commitlog/_view_read_core.h, the same code as
 * CommitLog.read_record_copy's compiled twin), so the safe-length rules are the same. A Python error
 * on the way (only MemoryError or a failing shrink reporter can raise) is cleared and the frame left
 * to the Python path, which meets it again and answers it the reference's way.
 *
 * The GIL is held throughout except inside mmap.size(), as in copy_record. No file is written.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_record_layout.h"
#include "_view_read_core.h"

#define VIEW_MESSAGE_BY_ID 33
#define RPC_TYPE_RESPONSE 1
#define RPC_ONEWAY 2
#define HEADER_LENGTH_MASK 0xFFFFFF

static PyObject *size_name;                                    /* "size", interned */
static PyObject *ok_a, *ok_b, *err_a, *err_b, *err_c;          /* bytes templates (bind) */

/* -- output buffer ------------------------------------------------------------------------------ */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} out_buf;

static int ob_need(out_buf *b, Py_ssize_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *grown = PyMem_Realloc(b->p, (size_t)cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = grown;
    b->cap = cap;
    return 0;
}

static inline void put(out_buf *b, const void *s, Py_ssize_t n)
{
    memcpy(b->p + b->len, s, (size_t)n);
    b->len += n;
}

static inline void put_be32(out_buf *b, uint32_t v)
{
    unsigned char w[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                          (unsigned char)v};
    put(b, w, 4);
}

/* The decimal digits of x into tmp (at least 21 bytes); returns the start, *n the count. */
static char *decimal(long long x, char *tmp, int size, int *n)
{
    int k = 0;
    unsigned long long u = x < 0 ? (unsigned long long)(-(x + 1)) + 1 : (unsigned long long)x;
    do {
        tmp[size - 1 - k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        tmp[size - 1 - k++] = '-';
    *n = k;
    return tmp + size - k;
}

/* -- the request header ------------------------------------------------------------------------- */

#define SURE 1
#define UNSURE 0

typedef struct {
    const unsigned char *p, *end;
} cursor;

/* A JSON int32: -?(0|[1-9][0-9]*) within the int32 range ("-0" is left to the reference). */
static int parse_int32(cursor *c, long long *out)
{
    const unsigned char *p = c->p;
    int neg = 0;
    if (p < c->end && *p == '-') {
        neg = 1;
        p++;
    }
    if (p >= c->end || *p < '0' || *p > '9')
        return UNSURE;
    if (*p == '0') {
        p++;
        if (neg)
            return UNSURE;
        if (p < c->end && *p >= '0' && *p <= '9')
            return UNSURE;
        *out = 0;
        c->p = p;
        return SURE;
    }
    long long v = 0;
    int digits = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        if (++digits > 10)
            return UNSURE;
        v = v * 10 + (*p - '0');
        p++;
    }
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E'))
        return UNSURE;
    if (neg)
        v = -v;
    if (v < INT32_MIN || v > INT32_MAX)
        return UNSURE;
    *out = v;
    c->p = p;
    return SURE;
}

/* A string of printable ASCII without escapes; [*s, *s + *n) is its text. */
static int plain_string(cursor *c, const unsigned char **s, Py_ssize_t *n)
{
    const unsigned char *p = c->p;
    if (p >= c->end || *p != '"')
        return UNSURE;
    const unsigned char *start = ++p;
    while (p < c->end && *p != '"') {
        if (*p < 0x20 || *p >= 0x7f || *p == '\\')
            return UNSURE;
        p++;
    }
    if (p >= c->end)
        return UNSURE;
    *s = start;
    *n = p - start;
    c->p = p + 1;
    return SURE;
}

static inline int expect(cursor *c, unsigned char ch)
{
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return SURE;
    }
    return UNSURE;
}

static inline int literal(cursor *c, const char *s, Py_ssize_t n)
{
    if (c->end - c->p >= n && memcmp(c->p, s, (size_t)n) == 0) {
        c->p += n;
        return SURE;
    }
    return UNSURE;
}

#define LITERAL(c, s) literal((c), (s), (Py_ssize_t)(sizeof(s) - 1))

enum { F_CODE = 1, F_EXT = 2, F_FLAG = 4, F_LANGUAGE = 8, F_OPAQUE = 16, F_REMARK = 32, F_SER = 64, F_VERSION = 128 };

typedef struct {
    long long code, flag, opaque, offset;
} view_request;

/* extFields of a VIEW: exactly {"offset":"<1-18 digits>"} (an 18-digit number fits a long long). */
static int parse_offset_fields(cursor *c, long long *offset)
{
    if (!LITERAL(c, "{\"offset\":\""))
        return UNSURE;
    const unsigned char *p = c->p;
    long long v = 0;
    int digits = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        if (++digits > 18)
            return UNSURE;
        v = v * 10 + (*p - '0');
        p++;
    }
    if (digits == 0)
        return UNSURE;
    c->p = p;
    if (!LITERAL(c, "\"}"))
        return UNSURE;
    *offset = v;
    return SURE;
}

static int parse_header(const unsigned char *data, Py_ssize_t size, view_request *r)
{
    cursor c = {data, data + size};
    unsigned seen = 0;
    r->code = r->flag = r->opaque = 0;
    if (!expect(&c, '{'))
        return UNSURE;
    if (expect(&c, '}'))
        return UNSURE; /* no fields: not a VIEW */
    for (;;) {
        const unsigned char *key;
        Py_ssize_t n;
        if (!plain_string(&c, &key, &n) || !expect(&c, ':'))
            return UNSURE;
        unsigned field;
        long long ignored;
        int ok;
        if (n == 4 && memcmp(key, "code", 4) == 0) {
            field = F_CODE;
            ok = parse_int32(&c, &r->code);
        } else if (n == 9 && memcmp(key, "extFields", 9) == 0) {
            field = F_EXT;
            ok = parse_offset_fields(&c, &r->offset);
        } else if (n == 4 && memcmp(key, "flag", 4) == 0) {
            field = F_FLAG;
            ok = parse_int32(&c, &r->flag);
        } else if (n == 8 && memcmp(key, "language", 8) == 0) {
            const unsigned char *s;
            Py_ssize_t sn;
            field = F_LANGUAGE;
            ok = plain_string(&c, &s, &sn);
        } else if (n == 6 && memcmp(key, "opaque", 6) == 0) {
            field = F_OPAQUE;
            ok = parse_int32(&c, &r->opaque);
        } else if (n == 6 && memcmp(key, "remark", 6) == 0) {
            const unsigned char *s;
            Py_ssize_t sn;
            field = F_REMARK;
            ok = LITERAL(&c, "null") || plain_string(&c, &s, &sn);
        } else if (n == 23 && memcmp(key, "serializeTypeCurrentRPC", 23) == 0) {
            field = F_SER;
            ok = LITERAL(&c, "\"JSON\"");
        } else if (n == 7 && memcmp(key, "version", 7) == 0) {
            field = F_VERSION;
            ok = parse_int32(&c, &ignored);
        } else {
            return UNSURE;
        }
        if (!ok || (seen & field))
            return UNSURE;
        seen |= field;
        if (expect(&c, ','))
            continue;
        if (expect(&c, '}'))
            break;
        return UNSURE;
    }
    if (c.p != c.end || !(seen & F_CODE) || !(seen & F_EXT))
        return UNSURE;
    return SURE;
}

/* -- the batch ---------------------------------------------------------------------------------- */

static PyObject *answer_views(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 11) {
        PyErr_Format(PyExc_TypeError, "answer_views() takes 11 arguments (%zd given)", nargs);
        return NULL;
    }
    if (ok_a == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "answer_views() before bind()");
        return NULL;
    }
    PyObject *maps = args[2], *starts = args[3], *lengths = args[4], *shrunk = args[7];
    if (!PyList_Check(maps) || !PyList_Check(starts) || !PyList_Check(lengths)) {
        PyErr_SetString(PyExc_TypeError, "answer_views() takes maps, starts and lengths as lists");
        return NULL;
    }
    long long pos, max_offset, max_size, max_frame, max_header, flush_bytes;
    if (view_as_int64(args[1], &pos) < 0 || view_as_int64(args[5], &max_offset) < 0 ||
        view_as_int64(args[6], &max_size) < 0 || view_as_int64(args[8], &max_frame) < 0 ||
        view_as_int64(args[9], &max_header) < 0 || view_as_int64(args[10], &flush_bytes) < 0)
        return NULL;
    Py_buffer in;
    if (PyObject_GetBuffer(args[0], &in, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *data = (const unsigned char *)in.buf;
    long long size = (long long)in.len;
    if (pos < 0 || pos > size)
        pos = size; /* nothing to answer */

    const Py_ssize_t ok_a_n = PyBytes_GET_SIZE(ok_a), ok_b_n = PyBytes_GET_SIZE(ok_b);
    const Py_ssize_t err_a_n = PyBytes_GET_SIZE(err_a), err_b_n = PyBytes_GET_SIZE(err_b),
                     err_c_n = PyBytes_GET_SIZE(err_c);
    out_buf out = {NULL, 0, 0};
    long long answered = 0, found_count = 0, found_bytes = 0;
    PyObject *result = NULL;

    while (out.len < flush_bytes && size - pos >= 8) {
        const unsigned char *f = data + pos;
        int32_t length = view_be32(f);
        if (length < 4 || (long long)length > max_frame - 4)
            break; /* the reference says what is wrong */
        uint32_t word = (uint32_t)view_be32(f + 4);
        long long header_len = word & HEADER_LENGTH_MASK;
        if ((word >> 24) != 0 || header_len != (long long)length - 4 || header_len > max_header)
            break; /* not JSON, a body (a VIEW has none) or a header over the limit */
        if (size - pos - 4 < length)
            break; /* incomplete: the decoder keeps it */
        view_request req;
        if (!parse_header(f + 8, (Py_ssize_t)header_len, &req) || req.code != VIEW_MESSAGE_BY_ID ||
            (req.flag & (RPC_TYPE_RESPONSE | RPC_ONEWAY)))
            break;
        view_record rec;
        int found = view_locate(maps, starts, lengths, max_offset, req.offset, max_size, shrunk, size_name, &rec);
        if (found < 0) {
            view_release(&rec);
            PyErr_Clear(); /* the Python path meets it again and answers as the reference does */
            break;
        }
        char optmp[24], offtmp[24];
        int opn, offn;
        const char *opdigits = decimal(req.opaque, optmp, (int)sizeof optmp, &opn);
        Py_ssize_t header_n, body_n = 0;
        const char *offdigits = NULL;
        if (found == VIEW_FOUND) {
            header_n = ok_a_n + opn + ok_b_n;
            body_n = rec.size;
        } else {
            offdigits = decimal(req.offset, offtmp, (int)sizeof offtmp, &offn);
            header_n = err_a_n + opn + err_b_n + offn + err_c_n;
        }
        if (ob_need(&out, 8 + header_n + body_n) < 0) {
            view_release(&rec);
            goto done;
        }
        put_be32(&out, (uint32_t)(4 + header_n + body_n));
        put_be32(&out, (uint32_t)header_n); /* JSON: serialize type 0 in the top byte */
        if (found == VIEW_FOUND) {
            put(&out, PyBytes_AS_STRING(ok_a), ok_a_n);
            put(&out, opdigits, opn);
            put(&out, PyBytes_AS_STRING(ok_b), ok_b_n);
            put(&out, (const char *)rec.buf.buf + rec.pos, body_n);
            found_bytes += body_n;
            found_count++;
        } else {
            put(&out, PyBytes_AS_STRING(err_a), err_a_n);
            put(&out, opdigits, opn);
            put(&out, PyBytes_AS_STRING(err_b), err_b_n);
            put(&out, offdigits, offn);
            put(&out, PyBytes_AS_STRING(err_c), err_c_n);
        }
        view_release(&rec);
        answered++;
        pos += 4 + (long long)length;
    }
    PyObject *answers = out.len ? PyBytes_FromStringAndSize(out.p, out.len) : Py_NewRef(Py_None);
    if (answers != NULL)
        result = Py_BuildValue("(NLLLL)", answers, pos, answered, found_count, found_bytes);
done:
    PyMem_Free(out.p);
    PyBuffer_Release(&in);
    return result;
}

static PyObject *bind(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *a, *b, *c, *d, *e;
    if (!PyArg_ParseTuple(args, "SSSSS:bind", &a, &b, &c, &d, &e))
        return NULL;
    Py_XSETREF(ok_a, Py_NewRef(a));
    Py_XSETREF(ok_b, Py_NewRef(b));
    Py_XSETREF(err_a, Py_NewRef(c));
    Py_XSETREF(err_b, Py_NewRef(d));
    Py_XSETREF(err_c, Py_NewRef(e));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"answer_views", (PyCFunction)(void (*)(void))answer_views, METH_FASTCALL,
     "Answer the VIEW_MESSAGE_BY_ID frames at the start of a read (see the module comment)."},
    {"bind", bind, METH_VARARGS, "Hand over the answer templates made by server.remoting.request_path."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "server.remoting._request_path_fast",
    "The compiled request path (see server/remoting/request_path.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__request_path_fast(void)
{
    size_name = PyUnicode_InternFromString("size");
    if (size_name == NULL)
        return NULL;
    return PyModule_Create(&module);
}
