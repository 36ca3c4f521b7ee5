/*
 * store.spark._key_columns_fast: the compiled twin of store/spark/key_columns.py's key_columns
 * (same name, same arguments, same results; the Python function is the readable reference and the
 * tests compare both, and both against key_table.range_rows, the rows the Spark engine writes).
 *
 *   key_columns(view, pos, end, base, max_rows) -> (stop, pos, rows, columns)
 *
 * Reads the records of view[pos:end], already checked (record.whole_run: lengths, PHYSICALOFFSET,
 * BODYCRC), by TOTALSIZE, and lays out their key rows (key_table's COLUMNS, in its row order) as
 * Arrow buffers: for each string column (validity bitmap or None, int32 offsets, UTF-8 data), for
 * each number column its little-endian values. It stops (stop = SPECIAL) before a record whose
 * topic or properties hold a byte >= 0x80 (their text is decoded by CPython, with "replace", in the
 * reference's row path) or whose lengths do not fit it; at END, or BUDGET once max_rows rows are
 * laid out (a record's rows are never split).
 *
 * Why: the local export decoded every record into a MessageExt and every row into a tuple (10.7 us
 * a record); this lays out a range's columns in one call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_record_layout.h"

#define TX_MASK 0xC
#define TX_ROLLBACK 0xC

enum { STOP_END = 0, STOP_SPECIAL = 1, STOP_BUDGET = 2 };
enum { C_TOPIC, C_KEY, C_KIND, C_UNIQ, C_MSGID, C_OFFSET, C_SIZE, C_TS, C_TAGS, C_QID, C_QOFF, C_N };

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

/* -- growable buffers ------------------------------------------------------------------------- */

typedef struct {
    uint8_t *p;
    Py_ssize_t n, cap;
} buf_t;

static int grow(buf_t *b, Py_ssize_t more)
{
    if (b->n + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more)
        cap *= 2;
    uint8_t *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int put(buf_t *b, const void *src, Py_ssize_t n)
{
    if (grow(b, n) < 0)
        return -1;
    memcpy(b->p + b->n, src, (size_t)n);
    b->n += n;
    return 0;
}

/* A string column: offsets (int32, little-endian as Arrow's), data, validity (bit per row). */
typedef struct {
    buf_t offsets, data, valid;
    int nullable, nulls;
} str_col_t;

static int str_start(str_col_t *c)
{
    int32_t zero = 0;
    return put(&c->offsets, &zero, 4);
}

static int str_add(str_col_t *c, Py_ssize_t row, const uint8_t *s, Py_ssize_t n, int present)
{
    if (c->nullable) {
        if (grow(&c->valid, 1) < 0)
            return -1;
        if ((row & 7) == 0)
            c->valid.p[c->valid.n++] = 0;
        if (present)
            c->valid.p[c->valid.n - 1] |= (uint8_t)(1u << (row & 7));
        else
            c->nulls++;
    }
    if (present && n > 0 && put(&c->data, s, n) < 0)
        return -1;
    if (c->data.n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "key_columns: a string column over 2 GiB");
        return -1;
    }
    int32_t end = (int32_t)c->data.n;
    return put(&c->offsets, &end, 4);
}

typedef struct {
    str_col_t s[C_N];
    buf_t num[C_N];
} cols_t;

static void cols_free(cols_t *c)
{
    for (int i = 0; i < C_N; i++) {
        PyMem_Free(c->s[i].offsets.p);
        PyMem_Free(c->s[i].data.p);
        PyMem_Free(c->s[i].valid.p);
        PyMem_Free(c->num[i].p);
    }
}

static const int IS_STRING[C_N] = {1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0};

static PyObject *bytes_of(const buf_t *b) { return PyBytes_FromStringAndSize((const char *)b->p, b->n); }

static PyObject *cols_out(const cols_t *c)
{
    PyObject *list = PyList_New(C_N);
    if (list == NULL)
        return NULL;
    for (int i = 0; i < C_N; i++) {
        PyObject *item;
        if (IS_STRING[i]) {
            const str_col_t *s = &c->s[i];
            PyObject *valid = s->nullable && s->nulls ? bytes_of(&s->valid) : Py_NewRef(Py_None);
            item = valid == NULL ? NULL : Py_BuildValue("(NNN)", valid, bytes_of(&s->offsets), bytes_of(&s->data));
        } else {
            item = bytes_of(&c->num[i]);
        }
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* -- the properties: the last item with a non-empty name and value wins (string_to_properties) -- */

typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} span_t;

static int same(const uint8_t *a, Py_ssize_t n, const char *lit)
{
    return (size_t)n == strlen(lit) && memcmp(a, lit, (size_t)n) == 0;
}

static void properties(const uint8_t *pr, Py_ssize_t n, span_t *uniq, span_t *tags, span_t *keys)
{
    uniq->p = tags->p = keys->p = NULL;
    uniq->n = tags->n = keys->n = 0;
    Py_ssize_t s = 0;
    for (;;) {
        const uint8_t *sep = s <= n ? memchr(pr + s, 0x02, (size_t)(n - s)) : NULL;
        Py_ssize_t stop = sep ? sep - pr : n;
        const uint8_t *item = pr + s;
        Py_ssize_t len = stop - s;
        const uint8_t *nv = len > 0 ? memchr(item, 0x01, (size_t)len) : NULL;
        Py_ssize_t cut = nv ? nv - item : -1;
        if (cut > 0 && cut < len - 1) {
            span_t v = {item + cut + 1, len - cut - 1};
            if (same(item, cut, "UNIQ_KEY"))
                *uniq = v;
            else if (same(item, cut, "TAGS"))
                *tags = v;
            else if (same(item, cut, "KEYS"))
                *keys = v;
        }
        if (sep == NULL)
            break;
        s = stop + 1;
    }
}

static const char HEX[] = "0123456789ABCDEF";

/* -- the walk --------------------------------------------------------------------------------- */

static int add_row(cols_t *c, Py_ssize_t row, span_t topic, span_t key, const char *kind, span_t uniq,
                   const uint8_t *msgid, Py_ssize_t msgid_len, int64_t offset, int32_t size, int64_t ts, span_t tags,
                   int32_t qid, int64_t qoff)
{
    if (str_add(&c->s[C_TOPIC], row, topic.p, topic.n, 1) < 0 || str_add(&c->s[C_KEY], row, key.p, key.n, 1) < 0 ||
        str_add(&c->s[C_KIND], row, (const uint8_t *)kind, (Py_ssize_t)strlen(kind), 1) < 0 ||
        str_add(&c->s[C_UNIQ], row, uniq.p, uniq.n, uniq.p != NULL) < 0 ||
        str_add(&c->s[C_MSGID], row, msgid, msgid_len, 1) < 0 ||
        str_add(&c->s[C_TAGS], row, tags.p, tags.n, tags.p != NULL) < 0)
        return -1;
    /* Arrow's numbers are little-endian: the host's order on every platform this builds for. */
    if (put(&c->num[C_OFFSET], &offset, 8) < 0 || put(&c->num[C_SIZE], &size, 4) < 0 ||
        put(&c->num[C_TS], &ts, 8) < 0 || put(&c->num[C_QID], &qid, 4) < 0 || put(&c->num[C_QOFF], &qoff, 8) < 0)
        return -1;
    return 0;
}

static int ascii(const uint8_t *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (p[i] & 0x80)
            return 0;
    return 1;
}

static PyObject *key_columns(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t pos, end;
    long long base, max_rows;
    if (!PyArg_ParseTuple(args, "y*nnLL:key_columns", &view, &pos, &end, &base, &max_rows))
        return NULL;
    if (pos < 0 || end > view.len || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "key_columns: need 0 <= pos <= end <= len(view)");
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    cols_t c;
    memset(&c, 0, sizeof(c));
    c.s[C_UNIQ].nullable = c.s[C_TAGS].nullable = 1;
    int failed = 0, stop = STOP_END;
    Py_ssize_t rows = 0;
    for (int i = 0; i < C_N; i++)
        if (IS_STRING[i] && str_start(&c.s[i]) < 0)
            failed = 1;
    while (!failed) {
        if (pos >= end) {
            stop = STOP_END;
            break;
        }
        stop = STOP_SPECIAL;
        if (end - pos < RECORD_SIZE_MAGIC_WIDTH)
            break;
        const uint8_t *r = buf + pos;
        int64_t total = (int32_t)be32(r + RECORD_TOTAL_SIZE_AT);
        if (total < RECORD_MIN_RECORD_SIZE || total > (int64_t)(end - pos))
            break;
        int32_t magic = (int32_t)be32(r + RECORD_MAGIC_CODE_AT);
        int32_t sys_flag = (int32_t)be32(r + RECORD_SYS_FLAG_AT);
        if ((sys_flag & TX_MASK) == TX_ROLLBACK) {
            pos += (Py_ssize_t)total; /* no rows: the broker leaves it out of the index */
            continue;
        }
        int64_t p = record_body_length_at(sys_flag);
        if (p + RECORD_BODY_LENGTH_WIDTH > total)
            break;
        int64_t body_len = (int32_t)be32(r + p);
        if (body_len < 0)
            break;
        p += RECORD_BODY_LENGTH_WIDTH + body_len;
        int64_t topic_len;
        if (magic == RECORD_MAGIC_CODE_V2) {
            if (p + RECORD_TOPIC_LENGTH_WIDTH_V2 > total)
                break;
            topic_len = (int16_t)(((unsigned)r[p] << 8) | r[p + 1]);
            p += RECORD_TOPIC_LENGTH_WIDTH_V2;
        } else {
            if (p + RECORD_TOPIC_LENGTH_WIDTH_V1 > total)
                break;
            topic_len = r[p];
            p += RECORD_TOPIC_LENGTH_WIDTH_V1;
        }
        if (topic_len < 0 || p + topic_len + RECORD_PROPERTIES_LENGTH_WIDTH > total)
            break;
        span_t topic = {r + p, (Py_ssize_t)topic_len};
        p += topic_len;
        int64_t props_len = (int16_t)(((unsigned)r[p] << 8) | r[p + 1]);
        p += RECORD_PROPERTIES_LENGTH_WIDTH;
        if (props_len < 0 || p + props_len > total)
            break;
        const uint8_t *props = r + p;
        if (!ascii(topic.p, topic.n) || !ascii(props, (Py_ssize_t)props_len))
            break;
        span_t uniq, tags, keys;
        properties(props, (Py_ssize_t)props_len, &uniq, &tags, &keys);
        /* How many rows: UNIQ_KEY, then each non-empty space-separated token of KEYS. */
        Py_ssize_t want = uniq.p != NULL;
        for (Py_ssize_t i = 0; keys.p != NULL && i < keys.n; i++)
            if (keys.p[i] != ' ' && (i == 0 || keys.p[i - 1] == ' '))
                want++;
        if (rows > 0 && rows + want > max_rows) {
            stop = STOP_BUDGET;
            break;
        }
        /* The offset message id: store host (address and port) then the CommitLog offset, in hex. */
        int64_t host_at = record_store_timestamp_at(sys_flag) + RECORD_STORE_TIMESTAMP_WIDTH;
        int64_t host_len = record_store_host_width(sys_flag);
        uint8_t raw[RECORD_HOST_V6_WIDTH + 8];
        memcpy(raw, r + host_at, (size_t)host_len);
        int64_t offset = (int64_t)base + pos;
        for (int i = 0; i < 8; i++)
            raw[host_len + i] = (uint8_t)((uint64_t)offset >> (56 - 8 * i));
        uint8_t msgid[2 * (RECORD_HOST_V6_WIDTH + 8)];
        Py_ssize_t msgid_len = 2 * (host_len + 8);
        for (int64_t i = 0; i < host_len + 8; i++) {
            msgid[2 * i] = (uint8_t)HEX[raw[i] >> 4];
            msgid[2 * i + 1] = (uint8_t)HEX[raw[i] & 15];
        }
        int32_t qid = (int32_t)be32(r + RECORD_QUEUE_ID_AT);
        int64_t qoff = (int64_t)be64(r + RECORD_QUEUE_OFFSET_AT);
        int64_t ts = (int64_t)be64(r + record_store_timestamp_at(sys_flag));
        if (uniq.p != NULL && add_row(&c, rows++, topic, uniq, "UNIQ_KEY", uniq, msgid, msgid_len, offset,
                                      (int32_t)total, ts, tags, qid, qoff) < 0) {
            failed = 1;
            break;
        }
        for (Py_ssize_t i = 0; keys.p != NULL && i < keys.n && !failed;) {
            while (i < keys.n && keys.p[i] == ' ')
                i++;
            Py_ssize_t j = i;
            while (j < keys.n && keys.p[j] != ' ')
                j++;
            if (j > i) {
                span_t key = {keys.p + i, j - i};
                if (add_row(&c, rows++, topic, key, "KEYS", uniq, msgid, msgid_len, offset, (int32_t)total, ts, tags,
                            qid, qoff) < 0)
                    failed = 1;
            }
            i = j;
        }
        if (failed)
            break;
        pos += (Py_ssize_t)total;
    }
    PyObject *result = NULL;
    if (!failed) {
        PyObject *cols = cols_out(&c);
        if (cols != NULL)
            result = Py_BuildValue("(innN)", stop, pos, rows, cols);
    }
    cols_free(&c);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"key_columns", key_columns, METH_VARARGS,
     "key_columns(view, pos, end, base, max_rows) -> (stop, pos, rows, columns)\n"
     "The compiled store.spark.key_columns.key_columns (see that module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.spark._key_columns_fast",
    "Compiled twin of store.spark.key_columns: a stretch of records' key rows as Arrow buffers.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__key_columns_fast(void)
{
    return PyModule_Create(&module);
}
