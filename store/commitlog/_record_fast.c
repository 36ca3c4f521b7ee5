/*
 * store.commitlog._record_fast: the compiled twin of store/commitlog/record.py's check (same name, same answers).
 *
 * Is there a whole record at buf[pos] within end: its size; BLANK (0) for the end-of-file marker;
 * INVALID (-1) for anything else. Same rules as the reference: TOTALSIZE and MAGICCODE, optionally
 * PHYSICALOFFSET equal to expected_offset, the variable lengths adding up to TOTALSIZE and, with
 * check_crc, BODYCRC. Every CommitLog walk (opening a store, following a live one, indexing) calls
 * it once per record, which is why it is compiled. Reads stay inside [pos, end).
 *
 * whole_run is the reput's loop over check (store/reput/walk.py): how far whole records go on from
 * pos, each checked at its own PHYSICALOFFSET with BODYCRC, in one call (GIL released) per run.
 *
 * hop is the Spark planner's step (store/spark/ranges.py): records followed by TOTALSIZE alone;
 * hop_span also gives their smallest and largest STORETIMESTAMP (a time-filtered plan's pruning).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_crc32.h"
#include "_record_layout.h"

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

static long check_record(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int has_expected, int64_t expected,
                         int check_crc)
{
    if (pos + RECORD_SIZE_MAGIC_WIDTH > end)
        return -1;
    const uint8_t *p0 = buf + pos;
    int64_t total = (int32_t)be32(p0 + RECORD_TOTAL_SIZE_AT);
    int32_t magic = (int32_t)be32(p0 + RECORD_MAGIC_CODE_AT);
    if (magic == RECORD_BLANK_MAGIC_CODE)
        return 0;
    if (magic != RECORD_MAGIC_CODE_V1 && magic != RECORD_MAGIC_CODE_V2)
        return -1;
    if (total < RECORD_MIN_RECORD_SIZE || total > (int64_t)(end - pos))
        return -1;
    if (has_expected && (int64_t)be64(p0 + RECORD_PHYSICAL_OFFSET_AT) != expected)
        return -1;
    int32_t sys_flag = (int32_t)be32(p0 + RECORD_SYS_FLAG_AT);
    int64_t p = record_body_length_at(sys_flag);
    if (p + RECORD_BODY_LENGTH_WIDTH > total)
        return -1;
    int64_t body_len = (int32_t)be32(p0 + p);
    if (body_len < 0)
        return -1;
    p += RECORD_BODY_LENGTH_WIDTH;
    if (p + body_len > total)
        return -1;
    if (check_crc && (crc32_ieee(p0 + p, (size_t)body_len) & 0x7FFFFFFFu) != be32(p0 + RECORD_BODY_CRC_AT))
        return -1;
    p += body_len;
    int64_t topic_len;
    if (magic == RECORD_MAGIC_CODE_V2) {
        if (p + RECORD_TOPIC_LENGTH_WIDTH_V2 > total)
            return -1;
        topic_len = (int16_t)(((unsigned)p0[p] << 8) | p0[p + 1]);
        p += RECORD_TOPIC_LENGTH_WIDTH_V2;
    } else {
        if (p + RECORD_TOPIC_LENGTH_WIDTH_V1 > total)
            return -1;
        topic_len = p0[p]; /* unsigned here, as the reference reads it */
        p += RECORD_TOPIC_LENGTH_WIDTH_V1;
    }
    if (topic_len < 0)
        return -1;
    p += topic_len;
    if (p + RECORD_PROPERTIES_LENGTH_WIDTH > total)
        return -1;
    int64_t props_len = (int16_t)(((unsigned)p0[p] << 8) | p0[p + 1]);
    p += RECORD_PROPERTIES_LENGTH_WIDTH;
    if (props_len > 0)
        p += props_len;
    if (p != total)
        return -1;
    return (long)total;
}

static PyObject *check(PyObject *self, PyObject *args, PyObject *kwargs)
{
    (void)self;
    static char *names[] = {"buf", "pos", "end", "expected_offset", "check_crc", NULL};
    Py_buffer buf;
    Py_ssize_t pos, end;
    PyObject *expected = Py_None;
    int check_crc = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*nn|O$p:check", names, &buf, &pos, &end, &expected,
                                     &check_crc))
        return NULL;
    int64_t want = 0;
    int has_expected = expected != Py_None;
    if (has_expected) {
        want = PyLong_AsLongLong(expected);
        if (want == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&buf);
            if (!PyErr_ExceptionMatches(PyExc_OverflowError))
                return NULL;
            PyErr_Clear(); /* an offset no record can carry */
            return PyLong_FromLong(-1);
        }
    }
    if (pos < 0 || end > buf.len) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "check: need 0 <= pos and end <= len(buf)");
        return NULL;
    }
    long result = check_record((const uint8_t *)buf.buf, pos, end, has_expected, want, check_crc);
    PyBuffer_Release(&buf);
    return PyLong_FromLong(result);
}

static PyObject *whole_run(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer buf;
    Py_ssize_t pos, end, soft_end, max_records;
    long long base;
    if (!PyArg_ParseTuple(args, "y*nnLnn:whole_run", &buf, &pos, &end, &base, &soft_end, &max_records))
        return NULL;
    if (pos < 0 || end > buf.len) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "whole_run: need 0 <= pos and end <= len(buf)");
        return NULL;
    }
    Py_ssize_t records = 0;
    const uint8_t *p = (const uint8_t *)buf.buf;
    Py_BEGIN_ALLOW_THREADS
    while (pos < soft_end && records < max_records) {
        long size = check_record(p, pos, end, 1, (int64_t)base + (int64_t)pos, 1);
        if (size <= 0)
            break;
        pos += size;
        records++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return Py_BuildValue("(nn)", pos, records);
}

/* The planner's step, one loop for hop and hop_span: records followed by TOTALSIZE alone from pos, to
 * the first position at or past soft_end or not such a record; with lo and hi, also the smallest and
 * largest STORETIMESTAMP hopped. A hopped record holds at least RECORD_MIN_RECORD_SIZE bytes, more than
 * the header up to STORETIMESTAMP with both hosts IPv6, so that read stays in the record. */
static inline Py_ssize_t hop_records(const uint8_t *p, Py_ssize_t length, Py_ssize_t pos, Py_ssize_t soft_end,
                                     int64_t *lo, int64_t *hi)
{
    while (pos < soft_end && pos + RECORD_SIZE_MAGIC_WIDTH <= length) {
        int64_t total = (int32_t)be32(p + pos + RECORD_TOTAL_SIZE_AT);
        int32_t magic = (int32_t)be32(p + pos + RECORD_MAGIC_CODE_AT);
        if ((magic != RECORD_MAGIC_CODE_V1 && magic != RECORD_MAGIC_CODE_V2) || total < RECORD_MIN_RECORD_SIZE ||
            total > (int64_t)(length - pos))
            break;
        if (lo != NULL) {
            int32_t sys_flag = (int32_t)be32(p + pos + RECORD_SYS_FLAG_AT);
            int64_t ts = (int64_t)be64(p + pos + record_store_timestamp_at(sys_flag));
            if (ts < *lo)
                *lo = ts;
            if (ts > *hi)
                *hi = ts;
        }
        pos += (Py_ssize_t)total;
    }
    return pos;
}

/* hop's and hop_span's arguments (format "y*nn:<name>"): the buffer, pos and soft_end; 0, or -1 with
 * the error set. */
static int hop_args(PyObject *args, const char *format, const char *name, Py_buffer *buf, Py_ssize_t *pos,
                    Py_ssize_t *soft_end)
{
    if (!PyArg_ParseTuple(args, format, buf, pos, soft_end))
        return -1;
    if (*pos < 0) {
        PyBuffer_Release(buf);
        PyErr_Format(PyExc_ValueError, "%s: need 0 <= pos", name);
        return -1;
    }
    return 0;
}

static PyObject *hop(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer buf;
    Py_ssize_t pos, soft_end;
    if (hop_args(args, "y*nn:hop", "hop", &buf, &pos, &soft_end) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    pos = hop_records((const uint8_t *)buf.buf, buf.len, pos, soft_end, NULL, NULL);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(pos);
}

/* hop, and the smallest and largest STORETIMESTAMP of the records hopped (the reference's NO_SPAN,
 * INT64_MAX and INT64_MIN, for none). */
static PyObject *hop_span(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer buf;
    Py_ssize_t pos, soft_end;
    if (hop_args(args, "y*nn:hop_span", "hop_span", &buf, &pos, &soft_end) < 0)
        return NULL;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    Py_BEGIN_ALLOW_THREADS
    pos = hop_records((const uint8_t *)buf.buf, buf.len, pos, soft_end, &lo, &hi);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buf);
    return Py_BuildValue("(nLL)", pos, (long long)lo, (long long)hi);
}

static PyMethodDef methods[] = {
    {"hop", hop, METH_VARARGS,
     "hop(buf, pos, soft_end) -> pos\n"
     "The compiled store.commitlog.record.hop (see that module)."},
    {"hop_span", hop_span, METH_VARARGS,
     "hop_span(buf, pos, soft_end) -> (pos, lo, hi)\n"
     "The compiled store.commitlog.record.hop_span (see that module)."},
    {"whole_run", whole_run, METH_VARARGS,
     "whole_run(buf, pos, end, base, soft_end, max_records) -> (pos, records)\n"
     "The compiled store.commitlog.record.whole_run (see that module)."},
    {"check", (PyCFunction)(void (*)(void))check, METH_VARARGS | METH_KEYWORDS,
     "check(buf, pos, end, expected_offset=None, *, check_crc=False) -> size, 0 (BLANK) or -1 (INVALID)\n"
     "The compiled store.commitlog.record.check (see that module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.commitlog._record_fast", "Compiled twin of store.commitlog.record.check.", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__record_fast(void)
{
    crc_init();
    return PyModule_Create(&module);
}
