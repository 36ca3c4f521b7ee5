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
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "_record_layout.h"

#define UNIT 20
#define TX_MASK 0xC
#define TX_PREPARED 0x4
#define TX_ROLLBACK 0xC

enum { STOP_END = 0, STOP_SPECIAL = 1, STOP_BUDGET = 2, STOP_GROUPS = 3 /* append_entries' only */ };

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

/* The walk of view[*pos:end] shared by extract_entries and append_entries: the records' entries
 * added to gs, *pos moved past the records taken, *seen counted, *stop said why it stopped. With
 * max_groups > 0 it stops (STOP_GROUPS) once a record would make more groups than that: append_entries
 * hands such a run back, so walking the rest of it would be wasted.
 * 0, or -1 with an exception set (out of memory, a tags value CPython cannot decode). */
static int walk_records(const uint8_t *buf, Py_ssize_t *pos_io, Py_ssize_t end, long long base, long long budget,
                        Py_ssize_t max_groups, groups_t *gs, long long *seen_out, int *stop_out)
{
    Py_ssize_t pos = *pos_io;
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
        group_t *g = group_for(gs, topic, (Py_ssize_t)topic_len, queue_id);
        if (g != NULL && max_groups > 0 && gs->n > max_groups) {
            stop = STOP_GROUPS;
            break;
        }
        if (g == NULL || group_add(g, (int64_t)base + pos, (int32_t)total, code, queue_offset, store_ts) < 0) {
            failed = 1;
            break;
        }
        seen++;
        pos += (Py_ssize_t)total;
    }
    *pos_io = pos;
    *seen_out = seen;
    *stop_out = stop;
    return failed ? -1 : 0;
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
    groups_t gs;
    memset(&gs, 0, sizeof(gs));
    long long seen = 0;
    int stop = STOP_END;
    PyObject *result = NULL;
    if (walk_records((const uint8_t *)view.buf, &pos, end, base, budget, 0, &gs, &seen, &stop) == 0) {
        PyObject *groups = build_groups(&gs);
        if (groups != NULL)
            result = Py_BuildValue("(inLN)", stop, pos, seen, groups);
    }
    groups_free(&gs);
    PyBuffer_Release(&view);
    return result;
}

/* -- append_entries: the common case of the builder's dispatch, written here ---------------------- */

/* One queue's write side as the builder keeps it (store/consumequeue/builder.py, _QueueAppender's
 * state): an array("q") of these fields, which the Python appender reads and writes too. */
enum { ST_FD = 0, ST_LAST_START = 1, ST_WROTE = 2, ST_FILE_SIZE = 3, ST_MAX_PHYSIC = 4, ST_FIELDS = 5 };

/* Groups one call takes at most (the queues of one run: more go the Python way). */
#define MAX_FAST_GROUPS 64
/* Records one call takes at most (the builder's BATCH_RECORDS: a longer run goes the Python way). */
#define MAX_FAST_RECORDS 65536

/* A fault for the tests (_set_fault): the calls' writes together take fault_left more bytes, then
 * either fail as a full disk fails (a short write, then ENOSPC) or, with fault_tear, stop there as
 * a kill -9 would leave them (the write torn at that byte, nothing after it, nothing undone). */
static long long fault_left = -1;
static int fault_tear = 0;
static PyObject *Killed = NULL;

/* pwrite all of data at `at`; 0, or -1 with errno set and (as builder._write_all does) any part
 * written zeroed again. With a tear fault hit: 1 (what was written is left as it is). A full-disk
 * fault leaves the build mark's writes alone (`is_mark`: its block exists once made). */
static int write_all(int fd, const uint8_t *data, Py_ssize_t len, int64_t at, int is_mark)
{
    Py_ssize_t done = 0;
    int saved = 0;
    int faulty = fault_left >= 0 && (fault_tear || !is_mark);
    while (done < len) {
        Py_ssize_t want = len - done;
        if (faulty && want > fault_left) {
            /* the tests' fault: what is left of it is written, then the kill or the full disk */
            if (fault_left > 0) {
                ssize_t n = pwrite(fd, data + done, (size_t)fault_left, (off_t)(at + done));
                if (n > 0)
                    done += n;
            }
            fault_left = 0;
            if (fault_tear)
                return 1;
            saved = ENOSPC;
            break;
        }
        ssize_t n = pwrite(fd, data + done, (size_t)want, (off_t)(at + done));
        if (n <= 0) {
            saved = n < 0 ? errno : ENOSPC;
            break;
        }
        done += n;
        if (faulty)
            fault_left -= n;
    }
    if (!saved)
        return 0;
    static const uint8_t zeros[4096];
    for (Py_ssize_t z = 0; z < done;) {
        Py_ssize_t k = done - z < (Py_ssize_t)sizeof(zeros) ? done - z : (Py_ssize_t)sizeof(zeros);
        if (pwrite(fd, zeros, (size_t)k, (off_t)(at + z)) != (ssize_t)k)
            break; /* left past the written end: the next entry written there covers it */
        z += k;
    }
    errno = saved;
    return -1;
}

/*
 *   append_entries(view, pos, end, base, queues, changed, built, mark_fd)
 *       -> None | False | (put, pos, seen, last_ts, errno, marked)
 *
 * The builder's dispatch of view[pos:end] (whole, checked records, as extract_entries takes them)
 * when every queue's entries go in whole where the queue ends: each queue's group consecutive, its
 * first queue offset the queue's end, past the queue's last entry's record (max_physic), and inside
 * the queue's open last file. Then each group is one pwrite at the queue's end, the queue's state
 * array moved on, its key added to `changed` and `built`; with several groups the build mark
 * (mark_fd, the builder's _Mark) is set to base + pos before and cleared after, as _write_groups
 * does. `queues` maps (topic bytes, queue id) to (key, state array).
 *
 * None, with nothing written, for anything else (a queue not in `queues`, a roll, a hole, the first
 * file's blank entries, a duplicate, a record left to dispatch_entry, a transaction's PREPARED or
 * ROLLBACK record, too many records or queues): the builder's Python path, the reference, takes the
 * run. False, with nothing written, when the run is that case for several queues but mark_fd is -1
 * (the builder's mark not made yet): the builder makes it and calls again. A failed write returns its errno with the entries
 * put before it (the failed one zeroed again); the builder then gives the run to the Python path,
 * which skips what went in as duplicates and meets the failure as it always does.
 */
static PyObject *append_entries(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t pos, end;
    long long base;
    int mark_fd;
    PyObject *queues, *changed, *built;
    if (!PyArg_ParseTuple(args, "y*nnLO!O!O!i:append_entries", &view, &pos, &end, &base, &PyDict_Type, &queues,
                          &PySet_Type, &changed, &PySet_Type, &built, &mark_fd))
        return NULL;
    if (pos < 0 || end > view.len || pos > end) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "append_entries: need 0 <= pos <= end <= len(view)");
        return NULL;
    }
    groups_t gs;
    memset(&gs, 0, sizeof(gs));
    Py_buffer states[MAX_FAST_GROUPS];
    PyObject *keys[MAX_FAST_GROUPS];
    Py_ssize_t held = 0;
    PyObject *result = NULL;
    long long seen = 0;
    int stop = STOP_END;
    const Py_ssize_t start = pos;
    if (walk_records((const uint8_t *)view.buf, &pos, end, base, MAX_FAST_RECORDS, MAX_FAST_GROUPS, &gs, &seen,
                     &stop) < 0)
        goto done;
    {
        Py_ssize_t with_entries = 0;
        for (Py_ssize_t i = 0; i < gs.n; i++)
            with_entries += gs.g[i].n;
        if (stop != STOP_END || gs.n == 0 || gs.n > MAX_FAST_GROUPS || with_entries != seen)
            goto fallback;
    }
    /* every group checked before anything is written */
    for (Py_ssize_t i = 0; i < gs.n; i++) {
        group_t *g = &gs.g[i];
        if (!g->consecutive)
            goto fallback;
        PyObject *topic = PyBytes_FromStringAndSize((const char *)g->topic, g->topic_len);
        if (topic == NULL)
            goto done;
        PyObject *qid = PyLong_FromLong(g->queue_id);
        if (qid == NULL) {
            Py_DECREF(topic);
            goto done;
        }
        PyObject *lookup = PyTuple_Pack(2, topic, qid);
        Py_DECREF(topic);
        Py_DECREF(qid);
        if (lookup == NULL)
            goto done;
        PyObject *found = PyDict_GetItemWithError(queues, lookup); /* borrowed */
        Py_DECREF(lookup);
        if (found == NULL) {
            if (PyErr_Occurred())
                goto done;
            goto fallback;
        }
        if (!PyTuple_Check(found) || PyTuple_GET_SIZE(found) != 2) {
            PyErr_SetString(PyExc_TypeError, "append_entries: queues' values are (key, state)");
            goto done;
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(found, 1), &states[held], PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
            goto done;
        keys[held] = PyTuple_GET_ITEM(found, 0);
        held++;
        Py_buffer *st = &states[held - 1];
        for (Py_ssize_t j = 0; j < held - 1; j++)
            if (states[j].buf == st->buf)
                goto fallback; /* two topics' bytes naming one queue (decoded with "replace") */
        if (st->len != ST_FIELDS * (Py_ssize_t)sizeof(int64_t) || st->itemsize != (Py_ssize_t)sizeof(int64_t)) {
            PyErr_SetString(PyExc_TypeError, "append_entries: a queue's state is an array('q') of 5");
            goto done;
        }
        const int64_t *s = (const int64_t *)st->buf;
        int64_t fd = s[ST_FD], last_start = s[ST_LAST_START], wrote = s[ST_WROTE], file_size = s[ST_FILE_SIZE];
        int64_t first_offset = (int64_t)be64(g->entries);
        int64_t first_size = (int32_t)be32(g->entries + 8);
        int64_t qoff = g->qoffs[0];
        if (fd < 0 || fd > INT32_MAX || last_start < 0 || wrote < 0 || wrote >= file_size || qoff < 0 ||
            qoff > INT64_MAX / UNIT || qoff * UNIT != last_start + wrote || first_offset + first_size <= s[ST_MAX_PHYSIC] ||
            g->n > (file_size - wrote) / UNIT)
            goto fallback;
    }
    if (gs.n > 1 && mark_fd < 0) {
        result = Py_NewRef(Py_False); /* the builder opens its mark and calls again */
        goto done;
    }
    long long put = 0, last_ts = 0;
    int64_t last_at = -1;
    int err = 0, marked = gs.n > 1;
    uint8_t mark[8];
    if (marked) {
        put64(mark, (uint64_t)((int64_t)base + start));
        int w = write_all(mark_fd, mark, 8, 0, 1);
        if (w == 1)
            goto killed;
        if (w < 0)
            goto fallback; /* the Python path sets it again, or writes one record at a time */
    }
    for (Py_ssize_t i = 0; i < gs.n; i++) {
        group_t *g = &gs.g[i];
        int64_t *s = (int64_t *)states[i].buf;
        int w = write_all((int)s[ST_FD], g->entries, g->n * UNIT, s[ST_WROTE], 0);
        if (w == 1)
            goto killed;
        if (w < 0) {
            err = errno ? errno : EIO;
            break;
        }
        const uint8_t *lastp = g->entries + (g->n - 1) * UNIT;
        int64_t at = (int64_t)be64(lastp);
        s[ST_MAX_PHYSIC] = at + (int32_t)be32(lastp + 8);
        s[ST_WROTE] += g->n * UNIT;
        put += g->n;
        if (at > last_at) {
            last_at = at;
            last_ts = g->ts[g->n - 1];
        }
        if (PySet_Add(changed, keys[i]) < 0 || PySet_Add(built, keys[i]) < 0)
            goto done;
    }
    if (marked && !err) {
        put64(mark, (uint64_t)(int64_t)-1);
        int w = write_all(mark_fd, mark, 8, 0, 1);
        if (w == 1)
            goto killed;
        if (w < 0)
            err = errno ? errno : EIO;
    }
    result = Py_BuildValue("(LnLLii)", put, pos, seen, last_ts, err, marked);
    goto done;
killed:
    PyErr_SetString(Killed, "append_entries: the tests' kill point was reached");
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&states[i]);
    groups_free(&gs);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *set_fault(PyObject *self, PyObject *args)
{
    (void)self;
    long long left;
    int tear;
    if (!PyArg_ParseTuple(args, "Lp:_set_fault", &left, &tear))
        return NULL;
    long long before = fault_left;
    fault_left = left < 0 ? -1 : left;
    fault_tear = tear;
    return PyLong_FromLongLong(before);
}

static PyMethodDef methods[] = {
    {"extract_entries", extract_entries, METH_VARARGS,
     "extract_entries(view, pos, end, base, max_records) -> (stop, pos, seen, groups)\n"
     "The compiled store.consumequeue.consume_queue_build.extract_entries (see that module)."},
    {"append_entries", append_entries, METH_VARARGS,
     "append_entries(view, pos, end, base, queues, changed, built, mark_fd)\n"
     "-> None | False | (put, pos, seen, last_ts, errno, marked): the builder's common case written here."},
    {"_set_fault", set_fault, METH_VARARGS,
     "_set_fault(bytes_left, tear) -> the bytes left before: the tests' full disk (tear False) or\n"
     "kill (tear True) after bytes_left more bytes of append_entries' writes; -1: none."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.consumequeue._consume_queue_build_fast",
    "Compiled twin of store.consumequeue.consume_queue_build: a run's consume queue entries, per queue.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__consume_queue_build_fast(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Killed = PyErr_NewException("store.consumequeue._consume_queue_build_fast.Killed", NULL, NULL);
    if (Killed == NULL || PyModule_AddObjectRef(m, "Killed", Killed) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
