/*
 * store.consumequeue._consume_queue_build_fast: the compiled twin of
 * store/consumequeue/consume_queue_build.py's extract_entries (same name, same arguments, same
 * results; the Python function is the readable reference and the tests compare both, record by
 * record and on the golden stores).
 *
 *   extract_entries(view, pos, end, base, max_records) -> (stop, pos, seen, groups)
 *
 * Walks the whole, checked records of view[pos:end] (one CommitLog file's run, base = the offset of
 * view[0]) and, for each, computes what store.reput.decode.dispatch_entry computes: no entry for a
 * PREPARED or ROLLBACK record; otherwise (topic, queueId, queueOffset, tagsCode, storeTimestamp).
 * The entries are grouped by (topic bytes, queueId) in the order the queues are first seen; each
 * group is (topic, queue_id, entries, queue_offsets, store_timestamps, consecutive): the 20-byte
 * consume queue entries (commitLogOffset = base + record position, size, tagsCode; big-endian, as
 * the broker writes them) ready for one write, the queue offsets and store times as native int64
 * arrays, and whether each queue offset is the previous one plus one.
 *
 * Why: the consume queue dispatcher spent ~3 us of interpreter time per record (decode, appender
 * rules, one pwrite each); this returns a run's entries already laid out per queue, so the builder
 * writes one batch per queue per call.
 *
 * It stops (stop = SPECIAL) before a record whose entry it leaves to dispatch_entry: a
 * SCHEDULE_TOPIC_XXXX record with a DELAY property (its tagsCode is a delivery time computed from
 * the broker's delay levels, and a DELAY that is not an int is refused), or one whose topic or
 * properties lengths do not fit inside the record. Otherwise at END (pos reached end) or BUDGET
 * (max_records records seen). Every read is bounded by [pos, end) and by the record's own size.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_record_layout.h"

#define UNIT 20
#define TX_MASK 0xC
#define TX_PREPARED 0x4
#define TX_ROLLBACK 0xC

enum { STOP_END = 0, STOP_SPECIAL = 1, STOP_BUDGET = 2 };

static const char SCHEDULE_TOPIC[] = "SCHEDULE_TOPIC_XXXX";

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(((unsigned)p[0] << 8) | p[1]); }

static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* -- one queue's entries ---------------------------------------------------------------------- */

typedef struct {
    const uint8_t *topic; /* inside the view: valid for the call */
    Py_ssize_t topic_len;
    int32_t queue_id;
    uint32_t hash;
    Py_ssize_t n, cap;
    uint8_t *entries;
    int64_t *qoffs;
    int64_t *ts;
    int consecutive;
} group_t;

typedef struct {
    group_t *g;
    Py_ssize_t n, cap;
    Py_ssize_t *slots; /* index + 1 into g; 0: empty */
    Py_ssize_t nslots;
} groups_t;

static void groups_free(groups_t *gs)
{
    for (Py_ssize_t i = 0; i < gs->n; i++) {
        PyMem_Free(gs->g[i].entries);
        PyMem_Free(gs->g[i].qoffs);
        PyMem_Free(gs->g[i].ts);
    }
    PyMem_Free(gs->g);
    PyMem_Free(gs->slots);
}

static uint32_t key_hash(const uint8_t *t, Py_ssize_t n, int32_t qid)
{
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ t[i]) * 16777619u;
    return (h ^ (uint32_t)qid) * 16777619u;
}

static int rehash(groups_t *gs, Py_ssize_t nslots)
{
    Py_ssize_t *slots = PyMem_Calloc((size_t)nslots, sizeof(Py_ssize_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < gs->n; i++) {
        Py_ssize_t s = (Py_ssize_t)(gs->g[i].hash & (uint32_t)(nslots - 1));
        while (slots[s])
            s = (s + 1) & (nslots - 1);
        slots[s] = i + 1;
    }
    PyMem_Free(gs->slots);
    gs->slots = slots;
    gs->nslots = nslots;
    return 0;
}

/* The group of (topic, qid), created when new; NULL with an exception set when out of memory. */
static group_t *group_for(groups_t *gs, const uint8_t *t, Py_ssize_t n, int32_t qid)
{
    uint32_t h = key_hash(t, n, qid);
    if (gs->nslots == 0 && rehash(gs, 64) < 0)
        return NULL;
    Py_ssize_t s = (Py_ssize_t)(h & (uint32_t)(gs->nslots - 1));
    while (gs->slots[s]) {
        group_t *g = &gs->g[gs->slots[s] - 1];
        if (g->hash == h && g->queue_id == qid && g->topic_len == n && memcmp(g->topic, t, (size_t)n) == 0)
            return g;
        s = (s + 1) & (gs->nslots - 1);
    }
    if (gs->n == gs->cap) {
        Py_ssize_t cap = gs->cap ? gs->cap * 2 : 16;
        group_t *grown = PyMem_Realloc(gs->g, (size_t)cap * sizeof(group_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        gs->g = grown;
        gs->cap = cap;
    }
    group_t *g = &gs->g[gs->n];
    memset(g, 0, sizeof(*g));
    g->topic = t;
    g->topic_len = n;
    g->queue_id = qid;
    g->hash = h;
    g->consecutive = 1;
    gs->slots[s] = ++gs->n;
    if (gs->n * 2 > gs->nslots && rehash(gs, gs->nslots * 2) < 0)
        return NULL;
    return &gs->g[gs->n - 1];
}

static int group_add(group_t *g, int64_t offset, int32_t size, int64_t code, int64_t qoff, int64_t ts)
{
    if (g->n == g->cap) {
        Py_ssize_t cap = g->cap ? g->cap * 2 : 64;
        uint8_t *e = PyMem_Realloc(g->entries, (size_t)cap * UNIT);
        if (e == NULL)
            goto oom;
        g->entries = e;
        int64_t *q = PyMem_Realloc(g->qoffs, (size_t)cap * sizeof(int64_t));
        if (q == NULL)
            goto oom;
        g->qoffs = q;
        int64_t *s = PyMem_Realloc(g->ts, (size_t)cap * sizeof(int64_t));
        if (s == NULL)
            goto oom;
        g->ts = s;
        g->cap = cap;
    }
    if (g->n > 0 && (g->qoffs[g->n - 1] == INT64_MAX || qoff != g->qoffs[g->n - 1] + 1))
        g->consecutive = 0;
    uint8_t *e = g->entries + g->n * UNIT;
    put64(e, (uint64_t)offset);
    put32(e + 8, (uint32_t)size);
    put64(e + 12, (uint64_t)code);
    g->qoffs[g->n] = qoff;
    g->ts[g->n] = ts;
    g->n++;
    return 0;
oom:
    PyErr_NoMemory();
    return -1;
}

/* -- tagsCode: Java's String.hashCode of the TAGS value ---------------------------------------- */

/* The last non-empty value of TAGS (0x02 separates items, 0x01 name from value), and whether a
 * DELAY item is present (protocol.message_properties' rules, as dispatch_entry reads them). */
static void scan_properties(const uint8_t *pr, Py_ssize_t n, const uint8_t **tags, Py_ssize_t *tags_len,
                            int *has_delay)
{
    *tags = NULL;
    *tags_len = 0;
    *has_delay = 0;
    Py_ssize_t s = 0;
    for (;;) {
        const uint8_t *sep = s < n ? memchr(pr + s, 0x02, (size_t)(n - s)) : NULL;
        Py_ssize_t stop = sep ? sep - pr : n;
        Py_ssize_t item = stop - s;
        if (item > 5 && memcmp(pr + s, "TAGS\x01", 5) == 0) {
            *tags = pr + s + 5;
            *tags_len = item - 5;
        } else if (item >= 6 && memcmp(pr + s, "DELAY\x01", 6) == 0) {
            *has_delay = 1;
        }
        if (sep == NULL)
            break;
        s = stop + 1;
    }
}

/* 0 and the hash in *out; -1 with an exception set. Non-ASCII text goes through CPython's UTF-8
 * decoder with "replace", as the reference decodes it, and is hashed over UTF-16 code units. */
static int tags_hash(const uint8_t *v, Py_ssize_t n, int32_t *out)
{
    uint32_t h = 0;
    int ascii = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (v[i] & 0x80) {
            ascii = 0;
            break;
        }
        h = h * 31u + v[i];
    }
    if (!ascii) {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)v, n, "replace");
        if (text == NULL)
            return -1;
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        Py_ssize_t length = PyUnicode_GET_LENGTH(text);
        h = 0;
        for (Py_ssize_t i = 0; i < length; i++) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (c >= 0x10000) { /* a surrogate pair in Java's UTF-16 */
                c -= 0x10000;
                h = h * 31u + (0xD800u + (c >> 10));
                h = h * 31u + (0xDC00u + (c & 0x3FFu));
            } else {
                h = h * 31u + c;
            }
        }
        Py_DECREF(text);
    }
    *out = (int32_t)h;
    return 0;
}

/* -- the walk --------------------------------------------------------------------------------- */

static PyObject *build_groups(groups_t *gs)
{
    PyObject *list = PyList_New(gs->n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < gs->n; i++) {
        group_t *g = &gs->g[i];
        PyObject *item = Py_BuildValue("(y#iy#y#y#O)", (const char *)g->topic, g->topic_len, (int)g->queue_id,
                                       (const char *)g->entries, g->n * UNIT, (const char *)g->qoffs,
                                       (Py_ssize_t)(g->n * (Py_ssize_t)sizeof(int64_t)), (const char *)g->ts,
                                       (Py_ssize_t)(g->n * (Py_ssize_t)sizeof(int64_t)),
                                       g->consecutive ? Py_True : Py_False);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *extract_entries(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t pos, end;
    long long base, budget;
    if (!PyArg_ParseTuple(args, "y*nnLL:extract_entries", &view, &pos, &end, &base, &budget))
        return NULL;
    if (pos < 0 || end > view.len || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "extract_entries: need 0 <= pos <= end <= len(view)");
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    groups_t gs;
    memset(&gs, 0, sizeof(gs));
    long long seen = 0;
    int stop = STOP_END, failed = 0;
    for (;;) {
        if (pos >= end) {
            stop = STOP_END;
            break;
        }
        if (seen >= budget) {
            stop = STOP_BUDGET;
            break;
        }
        stop = STOP_SPECIAL;
        if (end - pos < RECORD_SIZE_MAGIC_WIDTH)
            break;
        const uint8_t *r = buf + pos;
        int64_t total = (int32_t)be32(r + RECORD_TOTAL_SIZE_AT);
        if (total < RECORD_MIN_RECORD_SIZE || total > (int64_t)(end - pos))
            break;
        int32_t sys_flag = (int32_t)be32(r + RECORD_SYS_FLAG_AT);
        int tran = sys_flag & TX_MASK;
        if (tran == TX_PREPARED || tran == TX_ROLLBACK) {
            seen++;
            pos += (Py_ssize_t)total;
            continue;
        }
        int32_t magic = (int32_t)be32(r + RECORD_MAGIC_CODE_AT);
        int32_t queue_id = (int32_t)be32(r + RECORD_QUEUE_ID_AT);
        int64_t queue_offset = (int64_t)be64(r + RECORD_QUEUE_OFFSET_AT);
        int64_t store_ts = (int64_t)be64(r + record_store_timestamp_at(sys_flag));
        int64_t p = record_body_length_at(sys_flag);
        if (p + RECORD_BODY_LENGTH_WIDTH > total)
            break;
        int64_t body_len = (int32_t)be32(r + p);
        p += RECORD_BODY_LENGTH_WIDTH + (body_len > 0 ? body_len : 0);
        int64_t topic_len;
        if (magic == RECORD_MAGIC_CODE_V2) {
            if (p + RECORD_TOPIC_LENGTH_WIDTH_V2 > total)
                break;
            topic_len = (int16_t)be16(r + p);
            p += RECORD_TOPIC_LENGTH_WIDTH_V2;
        } else {
            if (p + RECORD_TOPIC_LENGTH_WIDTH_V1 > total)
                break;
            topic_len = r[p]; /* dispatch_entry reads a V1 topic length as an unsigned byte */
            p += RECORD_TOPIC_LENGTH_WIDTH_V1;
        }
        if (topic_len < 0 || p + topic_len + RECORD_PROPERTIES_LENGTH_WIDTH > total)
            break;
        const uint8_t *topic = r + p;
        p += topic_len;
        int64_t props_len = (int16_t)be16(r + p);
        p += RECORD_PROPERTIES_LENGTH_WIDTH;
        int32_t code = 0;
        if (props_len > 0) {
            if (p + props_len > total)
                break;
            const uint8_t *tags;
            Py_ssize_t tags_len;
            int has_delay;
            scan_properties(r + p, (Py_ssize_t)props_len, &tags, &tags_len, &has_delay);
            if (has_delay && topic_len == (int64_t)(sizeof(SCHEDULE_TOPIC) - 1) &&
                memcmp(topic, SCHEDULE_TOPIC, sizeof(SCHEDULE_TOPIC) - 1) == 0)
                break; /* a delivery time: dispatch_entry's */
            if (tags != NULL && tags_hash(tags, tags_len, &code) < 0) {
                failed = 1;
                break;
            }
        }
        group_t *g = group_for(&gs, topic, (Py_ssize_t)topic_len, queue_id);
        if (g == NULL || group_add(g, (int64_t)base + pos, (int32_t)total, code, queue_offset, store_ts) < 0) {
            failed = 1;
            break;
        }
        seen++;
        pos += (Py_ssize_t)total;
    }
    PyObject *result = NULL;
    if (!failed) {
        PyObject *groups = build_groups(&gs);
        if (groups != NULL)
            result = Py_BuildValue("(inLN)", stop, pos, seen, groups);
    }
    groups_free(&gs);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"extract_entries", extract_entries, METH_VARARGS,
     "extract_entries(view, pos, end, base, max_records) -> (stop, pos, seen, groups)\n"
     "The compiled store.consumequeue.consume_queue_build.extract_entries (see that module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.consumequeue._consume_queue_build_fast",
    "Compiled twin of store.consumequeue.consume_queue_build: a run's consume queue entries, per queue.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__consume_queue_build_fast(void)
{
    return PyModule_Create(&module);
}
