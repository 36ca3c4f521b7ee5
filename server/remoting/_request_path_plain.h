/*
 * Plain SENDs stored by the compiled request path itself (issue 33), included by _request_path_send.h.
 *
 * Every SEND used to cost one call of the sends callback (SendMessageProcessor.store_send): the
 * checks, PutContext, single_record's JavaHashMap, a StoreRecord, the writer's put_batch and its own
 * pwrite, about 56% of the server's time under 256 async SENDs in flight. A "plain" SEND, one whose
 * outcome those rules make plain without asking anything but the tables read here, is now stored
 * here: its stored properties made (put_message.single_record's rule, below), its record encoded
 * (_record_encode.h, the layout every compiled append writes), its queue offset taken from the
 * writer's table, its SUCCESS answer written; the plain SENDs of a call are collected into one
 * buffer and handed to the flush callback once, which writes them with one pwrite
 * (WritableStore.append_encoded) before anything else of the call runs Python. The settle is the
 * call's one settle, as for the callback's SENDs (send_group.py).
 *
 * A batch (the header's batch flag: SEND_BATCH_MESSAGE as a Java producer sends it) used to take the
 * callback too, ~1/3 of its server time spent splitting the body, making 32 StoreRecords and their
 * answer in Python. A plain batch is now stored here the same way (plain_batch): its body split by
 * _batch_body.h (the rule protocol/_batch_decode_fast.c reads it with), each message one record with
 * its own flag, body and BODYCRC and its own properties joined with the batch's (batch_records: the
 * header's properties with CLUSTER put and WAIT kept, in HashMap order), one store timestamp,
 * consecutive queue offsets; answered with the records' offset ids joined by commas and the first
 * queue offset, as SendMessageProcessor._success answers.
 *
 * Plain means, and anything else takes the callback (the Python path, the reference):
 *   - SEND_MESSAGE_V2 or SEND_MESSAGE (or a batch), sysFlag with no transaction type;
 *   - the topic 1..127 of [|a-zA-Z0-9_-] (so never a %RETRY% or %DLQ% topic), not among the topics
 *     the begin callback says are never plain (nobody may send to them, the timer topic), in the
 *     topic table (no creation) and not created by the writer itself (whose growth it saves), the
 *     queue id below max(write, read queues) of its config;
 *   - group, default topic, bname and properties strict UTF-8 (what the reference decodes);
 *   - at most PLAIN_MAX_ITEMS properties, none named DELAY, TRAN_MSG or TIMER_* (a delay, a half
 *     message, a timer), no HashMap bin of PLAIN_BUCKET_LIMIT keys (Java would treeify it);
 *   - the stored properties at most 32767 bytes, the body at most the message size limit;
 *   - the record and an end-of-file blank fit in what is left of the CommitLog file (else the
 *     writer's roll-over, in Python);
 *   - the begin callback said the store takes records now (not cut, no failed dispatch, disk not full);
 *   - a batch: its body parses (_batch_body.h) into at least one message, each message's stored
 *     properties at most 32767 bytes, the body (all of it) at most the message size limit, and all
 *     its records and an end-of-file blank fit the current file (the writer's roll-over moves a
 *     batch whole); the header's own properties as a single SEND's (no DELAY, TRAN_MSG, TIMER_*).
 *
 * The stored properties (single_record): the client's, parsed as string_to_properties (items split at
 * 2, a name and a value at the first 1, both non-empty, a repeated name keeping its first place and
 * its last value), CLUSTER put (a new key appended), WAIT removed, then written in the HashMap's
 * order (_java_hashmap.h: the table sized by the puts, WAIT's removal not shrinking it) as
 * name 1 value joined by 2. tests/server/remoting/test_request_path_plain.py compares the stored
 * bytes and answers with the Python path's over many property shapes.
 */
#ifndef RMQ_REQUEST_PATH_PLAIN_H
#define RMQ_REQUEST_PATH_PLAIN_H

#include "_batch_body.h"
#include "_crc32.h"
#include "_java_hashmap.h"
#include "_py_int_range.h"
#include "_record_encode.h"

#define PLAIN_MAX_ITEMS 64
#define PLAIN_BUCKET_LIMIT 8
#define PLAIN_TRANSACTION_TYPE_MASK 0xC
#define PLAIN_MULTI_TAGS_FLAG 0x2
#define PLAIN_MAX_PROPERTIES 0x7FFF

/* What the begin callback answers (SendGroup.plain_begin), in this order. */
enum {
    PB_QUEUE_OFFSETS, /* dict (topic, queue id) -> next queue offset: the writer's, taken from here */
    PB_WRITER_TOPICS, /* dict topic -> queues the writer knows */
    PB_TOPIC_TABLE,   /* dict topic -> TopicConfig */
    PB_NEVER,         /* a set of topics never plain */
    PB_POSITION,      /* the CommitLog offset the next record goes to */
    PB_FILE_SIZE,
    PB_NOW, /* the store timestamp */
    PB_MAX_MESSAGE_SIZE,
    PB_CLUSTER, /* bytes: CLUSTER's value, UTF-8 */
    PB_STORE_ADDR,
    PB_STORE_PORT,
    PB_BORN_ADDR,
    PB_BORN_PORT,
    PB_CREATED, /* the topics the writer created: a queue past those it knows is left to it */
    N_PB
};

typedef struct {
    const uint8_t *name, *value;
    Py_ssize_t name_n, value_n;
    uint32_t bucket;
} plain_prop_t;

typedef struct {
    PyObject *begin, *flush; /* borrowed from the sends context; NULL: no plain SENDs */
    int off;                 /* begin said no in this call: every SEND takes the callback */
    PyObject *state;         /* begin's answer while a group is open (owned) */
    long long position, file_end, now, max_message_size;
    const uint8_t *cluster;
    Py_ssize_t cluster_n;
    const uint8_t *store_addr, *born_addr;
    int32_t store_port, born_port, host_flags;
    /* the last topic's lookups, valid while the group is open (no Python runs meanwhile) */
    PyObject *topic;
    const uint8_t *topic_s;
    Py_ssize_t topic_n;
    long long queue_limit, writer_queues;
    int32_t topic_flags;
    /* the group: its records encoded straight into the bytes object the flush hands over (owned,
     * only referenced here until then, so it is resized in place), buf its storage */
    PyObject *data;
    uint8_t *buf;
    Py_ssize_t len, cap;
    PyObject *keys, *ats, *opaques, *codes;
    long long count, last_offset, last_size;
    uint8_t *scratch, *ids; /* the properties being made; a batch's message ids */
    Py_ssize_t scratch_cap, ids_cap;
    char id_prefix[40]; /* every offset id's start while the group is open: store address and port in hex */
    int id_prefix_n;
} plain_t;

static void plain_init(plain_t *p, PyObject *begin, PyObject *flush)
{
    memset(p, 0, sizeof *p);
    if (begin != NULL && begin != Py_None && flush != NULL && flush != Py_None) {
        p->begin = begin;
        p->flush = flush;
    }
}

/* The group's lists and state let go (the records already written, or given back). */
static void plain_close(plain_t *p)
{
    Py_CLEAR(p->state);
    Py_CLEAR(p->topic);
    Py_CLEAR(p->keys);
    Py_CLEAR(p->ats);
    Py_CLEAR(p->opaques);
    Py_CLEAR(p->codes);
    p->len = 0;
    p->count = 0;
}

static void plain_clear(plain_t *p)
{
    plain_close(p);
    Py_CLEAR(p->data);
    PyMem_Free(p->scratch);
    PyMem_Free(p->ids);
    p->buf = p->scratch = p->ids = NULL;
    p->cap = p->scratch_cap = p->ids_cap = 0;
}

static void plain_id_prefix(plain_t *p);

/* Open a group: 1 (state read), 0 (the store takes no plain SENDs now: off for this call), -1. */
static int plain_begin(plain_t *p)
{
    PyObject *state = PyObject_CallNoArgs(p->begin);
    if (state == NULL)
        return -1;
    if (state == Py_None) {
        Py_DECREF(state);
        p->off = 1;
        return 0;
    }
    long long file_size, store_port, born_port;
    PyObject **s = PyTuple_Check(state) && PyTuple_GET_SIZE(state) == N_PB ? &PyTuple_GET_ITEM(state, 0) : NULL;
    if (s == NULL || !PyDict_CheckExact(s[PB_QUEUE_OFFSETS]) || !PyDict_CheckExact(s[PB_WRITER_TOPICS]) ||
        !PyDict_CheckExact(s[PB_TOPIC_TABLE]) || !PyAnySet_Check(s[PB_NEVER]) || !PyAnySet_Check(s[PB_CREATED]) ||
        !py_int_in_range(s[PB_POSITION], 0, INT64_MAX / 2, &p->position) || !py_int_in_range(s[PB_FILE_SIZE], 64, INT32_MAX, &file_size) ||
        !py_int_in_range(s[PB_NOW], INT64_MIN, INT64_MAX, &p->now) ||
        !py_int_in_range(s[PB_MAX_MESSAGE_SIZE], 0, INT32_MAX, &p->max_message_size) || !PyBytes_Check(s[PB_CLUSTER]) ||
        !PyBytes_Check(s[PB_STORE_ADDR]) || !PyBytes_Check(s[PB_BORN_ADDR]) ||
        !py_int_in_range(s[PB_STORE_PORT], INT32_MIN, INT32_MAX, &store_port) ||
        !py_int_in_range(s[PB_BORN_PORT], INT32_MIN, INT32_MAX, &born_port)) {
        Py_DECREF(state);
        PyErr_SetString(PyExc_TypeError, "the plain SENDs' begin answers None or its state tuple");
        return -1;
    }
    Py_ssize_t store_n = PyBytes_GET_SIZE(s[PB_STORE_ADDR]), born_n = PyBytes_GET_SIZE(s[PB_BORN_ADDR]);
    if ((store_n != 4 && store_n != 16) || (born_n != 4 && born_n != 16)) {
        Py_DECREF(state);
        PyErr_SetString(PyExc_ValueError, "a host address is 4 or 16 bytes");
        return -1;
    }
    p->state = state;
    p->file_end = p->position - p->position % file_size + file_size;
    p->cluster = (const uint8_t *)PyBytes_AS_STRING(s[PB_CLUSTER]);
    p->cluster_n = PyBytes_GET_SIZE(s[PB_CLUSTER]);
    p->store_addr = (const uint8_t *)PyBytes_AS_STRING(s[PB_STORE_ADDR]);
    p->born_addr = (const uint8_t *)PyBytes_AS_STRING(s[PB_BORN_ADDR]);
    p->store_port = (int32_t)store_port;
    p->born_port = (int32_t)born_port;
    p->host_flags = (store_n == 16 ? RECORD_STOREHOST_V6_FLAG : 0) | (born_n == 16 ? RECORD_BORNHOST_V6_FLAG : 0);
    plain_id_prefix(p);
    if ((p->keys = PyList_New(0)) == NULL || (p->ats = PyList_New(0)) == NULL ||
        (p->opaques = PyList_New(0)) == NULL || (p->codes = PyList_New(0)) == NULL) {
        plain_close(p);
        return -1;
    }
    return 1;
}

/* Hand the group to the flush callback (one write), then close it. 0, or -1 with an error set. */
static int plain_flush(plain_t *p)
{
    if (p->state == NULL)
        return 0;
    int rc = 0;
    if (p->count) {
        /* the records were encoded into the bytes handed over: cut to their length (in place, it is
         * referenced only here) and given away, so the pwrite and the settle read them uncopied */
        PyObject *data = p->data;
        p->data = NULL;
        p->buf = NULL;
        p->cap = 0;
        if (p->len != PyBytes_GET_SIZE(data) && _PyBytes_Resize(&data, p->len) < 0) {
            plain_close(p);
            return -1;
        }
        PyObject *got = PyObject_CallFunction(p->flush, "NLLLLLOOOO", data, p->position, p->now, p->count,
                                              p->last_offset, p->last_size, p->keys, p->ats, p->opaques, p->codes);
        if (got == NULL)
            rc = -1;
        Py_XDECREF(got);
    }
    plain_close(p);
    return rc;
}

/* The C call failed with the group not written: its queue offsets given back, the group dropped (its
 * answers go with the call's output). The error set stays set. */
static void plain_abort(plain_t *p)
{
    if (p->state == NULL)
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *offsets = PyTuple_GET_ITEM(p->state, PB_QUEUE_OFFSETS);
    for (Py_ssize_t i = 0; p->keys != NULL && i < PyList_GET_SIZE(p->keys); i++) {
        PyObject *key = PyList_GET_ITEM(p->keys, i);
        PyObject *next = PyDict_GetItemWithError(offsets, key);
        long long v;
        if (next != NULL && py_int_in_range(next, 1, INT64_MAX, &v)) {
            PyObject *back = PyLong_FromLongLong(v - 1);
            if (back == NULL || PyDict_SetItem(offsets, key, back) < 0)
                PyErr_Clear();
            Py_XDECREF(back);
        }
        PyErr_Clear();
    }
    plain_close(p);
    PyErr_Restore(type, value, tb);
}

static int plain_topic_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '|';
}

static int plain_utf8(const unsigned char *s, Py_ssize_t n)
{
    int32_t h;
    return s == NULL || java_hash_utf8(s, (size_t)n, &h) == 0;
}

/* The topic's lookups (cached for the group): 1, 0 (not plain), -1. */
static int plain_topic(plain_t *p, const send_req_t *r)
{
    if (p->topic != NULL && p->topic_n == r->topic_n && memcmp(p->topic_s, r->topic, (size_t)r->topic_n) == 0)
        return 1;
    Py_CLEAR(p->topic);
    PyObject **s = &PyTuple_GET_ITEM(p->state, 0);
    PyObject *topic = PyUnicode_FromStringAndSize((const char *)r->topic, r->topic_n);
    if (topic == NULL)
        return -1;
    int never = PySet_Contains(s[PB_NEVER], topic);
    int created = never ? 0 : PySet_Contains(s[PB_CREATED], topic);
    PyObject *config = never || created ? NULL : PyDict_GetItemWithError(s[PB_TOPIC_TABLE], topic);
    PyObject *known = config == NULL ? NULL : PyDict_GetItemWithError(s[PB_WRITER_TOPICS], topic);
    if (never < 0 || created < 0 || PyErr_Occurred()) {
        Py_DECREF(topic);
        return -1;
    }
    long long writes = 0, reads = 0, queues = 0;
    int ok = 0;
    if (config != NULL && (known == NULL || py_int_in_range(known, 0, INT32_MAX, &queues))) {
        PyObject *w = PyObject_GetAttrString(config, "write_queue_nums");
        PyObject *rd = w == NULL ? NULL : PyObject_GetAttrString(config, "read_queue_nums");
        PyObject *filter = rd == NULL ? NULL : PyObject_GetAttrString(config, "topic_filter_type");
        ok = filter != NULL && py_int_in_range(w, INT32_MIN, INT32_MAX, &writes) && py_int_in_range(rd, INT32_MIN, INT32_MAX, &reads) &&
             PyUnicode_Check(filter);
        if (ok) {
            int multi = PyUnicode_CompareWithASCIIString(filter, "MULTI_TAG") == 0;
            p->topic_flags = multi ? PLAIN_MULTI_TAGS_FLAG : 0;
        }
        Py_XDECREF(w);
        Py_XDECREF(rd);
        Py_XDECREF(filter);
        PyErr_Clear();
    }
    if (!ok) {
        Py_DECREF(topic);
        return 0;
    }
    p->topic = topic;
    p->topic_s = (const uint8_t *)PyUnicode_AsUTF8AndSize(topic, &p->topic_n);
    if (p->topic_s == NULL) {
        Py_CLEAR(p->topic);
        return -1;
    }
    p->queue_limit = writes > reads ? writes : reads;
    p->writer_queues = queues;
    return 1;
}

/* Room for need bytes of records in the group's bytes object (made, or grown keeping its records). 0, or
 * -1 (the group's records are then lost: the caller fails the call, which gives their offsets back). */
static int plain_room(plain_t *p, Py_ssize_t need)
{
    if (need <= p->cap)
        return 0;
    Py_ssize_t grown = p->cap ? p->cap : 4096;
    while (grown < need)
        grown *= 2;
    if (p->data == NULL) {
        /* the group's first records (a batch asks for its exact size): nothing to cut at the flush */
        p->data = PyBytes_FromStringAndSize(NULL, need > 4096 ? need : 4096);
    } else if (_PyBytes_Resize(&p->data, grown) < 0) {
        p->data = NULL;
    }
    if (p->data == NULL) {
        p->buf = NULL;
        p->cap = p->len = 0;
        return -1;
    }
    p->buf = (uint8_t *)PyBytes_AS_STRING(p->data);
    p->cap = PyBytes_GET_SIZE(p->data);
    return 0;
}

static int plain_need(uint8_t **buf, Py_ssize_t *cap, Py_ssize_t need)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t grown = *cap ? *cap : 4096;
    while (grown < need)
        grown *= 2;
    uint8_t *b = PyMem_Realloc(*buf, (size_t)grown);
    if (b == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = b;
    *cap = grown;
    return 0;
}

static int plain_name_is(const plain_prop_t *e, const char *name)
{
    size_t n = strlen(name);
    return (size_t)e->name_n == n && memcmp(e->name, name, n) == 0;
}

/* The stored properties into out (at most PLAIN_MAX_PROPERTIES bytes): their length, or -1 when the
 * SEND is not plain (see the file comment). text: the client's properties, n bytes (strict UTF-8).
 * For a batch (batch_records: the suffix every message's own properties get) WAIT stays. */
static Py_ssize_t plain_properties(const plain_t *p, const uint8_t *text, Py_ssize_t n, uint8_t *out, int batch)
{
    plain_prop_t e[PLAIN_MAX_ITEMS + 1];
    int count = 0;
    for (Py_ssize_t at = 0; text != NULL && at <= n;) {
        const uint8_t *item = text + at, *stop = memchr(item, 0x02, (size_t)(n - at));
        Py_ssize_t item_n = stop == NULL ? n - at : stop - item;
        at += item_n + 1;
        const uint8_t *cut = memchr(item, 0x01, (size_t)item_n);
        if (cut == NULL || cut == item || cut - item >= item_n - 1)
            continue;
        plain_prop_t one = {item, cut + 1, cut - item, item_n - (cut - item) - 1, 0};
        int i = 0;
        while (i < count && !(e[i].name_n == one.name_n && memcmp(e[i].name, one.name, (size_t)one.name_n) == 0))
            i++;
        if (i == count) {
            if (count == PLAIN_MAX_ITEMS)
                return -1;
            count++;
        } else {
            one.name = e[i].name; /* the first place, the last value */
        }
        e[i] = one;
    }
    int i = 0;
    while (i < count && !plain_name_is(&e[i], "CLUSTER"))
        i++;
    e[i] = (plain_prop_t){(const uint8_t *)"CLUSTER", p->cluster, 7, p->cluster_n, 0};
    if (i == count)
        count++;
    uint32_t capacity = java_hashmap_capacity((size_t)count);
    for (int k = 0; k < count; k++) {
        int32_t h;
        if (plain_name_is(&e[k], "DELAY") || plain_name_is(&e[k], "TRAN_MSG") ||
            (e[k].name_n >= 6 && memcmp(e[k].name, "TIMER_", 6) == 0) ||
            java_hash_utf8(e[k].name, (size_t)e[k].name_n, &h) < 0)
            return -1;
        e[k].bucket = java_hashmap_bucket(h, capacity);
        int same = 0;
        for (int j = 0; j < k; j++)
            same += e[j].bucket == e[k].bucket;
        if (same + 1 >= PLAIN_BUCKET_LIMIT)
            return -1;
    }
    /* Buckets in index order, each in insertion order: a stable insertion sort by bucket. */
    plain_prop_t sorted[PLAIN_MAX_ITEMS + 1];
    for (int k = 0; k < count; k++) {
        int j = k;
        while (j > 0 && sorted[j - 1].bucket > e[k].bucket) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = e[k];
    }
    Py_ssize_t len = 0;
    for (int k = 0; k < count; k++) {
        if (!batch && plain_name_is(&sorted[k], "WAIT"))
            continue;
        Py_ssize_t need = (len ? 1 : 0) + sorted[k].name_n + 1 + sorted[k].value_n;
        if (len + need > PLAIN_MAX_PROPERTIES)
            return -1;
        if (len)
            out[len++] = 0x02;
        memcpy(out + len, sorted[k].name, (size_t)sorted[k].name_n);
        len += sorted[k].name_n;
        out[len++] = 0x01;
        memcpy(out + len, sorted[k].value, (size_t)sorted[k].value_n);
        len += sorted[k].value_n;
    }
    return len;
}

/* json_unescape is _request_path_send.h's (the properties as the client meant them). */
static Py_ssize_t json_unescape(const json_text_t *t, unsigned char *buf);

/* Each byte's two upper-case hex digits (a batch's answer writes 32 offset ids). */
#define PLAIN_HX(n) ((n) < 10 ? '0' + (n) : 'A' + (n)-10)
#define PLAIN_H1(i) PLAIN_HX((i) >> 4), PLAIN_HX((i)&15)
#define PLAIN_H4(i) PLAIN_H1(i), PLAIN_H1((i) + 1), PLAIN_H1((i) + 2), PLAIN_H1((i) + 3)
#define PLAIN_H16(i) PLAIN_H4(i), PLAIN_H4((i) + 4), PLAIN_H4((i) + 8), PLAIN_H4((i) + 12)
#define PLAIN_H64(i) PLAIN_H16(i), PLAIN_H16((i) + 16), PLAIN_H16((i) + 32), PLAIN_H16((i) + 48)
static const char PLAIN_HEX_PAIRS[512] = {PLAIN_H64(0), PLAIN_H64(64), PLAIN_H64(128), PLAIN_H64(192)};

static void plain_hex(const uint8_t *raw, int n, char *out)
{
    for (int i = 0; i < n; i++)
        memcpy(out + 2 * i, PLAIN_HEX_PAIRS + 2 * raw[i], 2);
}

/* The offset ids' common start (store address and port), once per group. */
static void plain_id_prefix(plain_t *p)
{
    uint8_t raw[20];
    int addr_n = (p->host_flags & RECORD_STOREHOST_V6_FLAG) ? 16 : 4;
    memcpy(raw, p->store_addr, (size_t)addr_n);
    record_put_i32(raw + addr_n, p->store_port);
    plain_hex(raw, addr_n + 4, p->id_prefix);
    p->id_prefix_n = 2 * (addr_n + 4);
}

/* The offset message id of the record at offset (store address, port, offset in upper-case hex)
 * into id (56 bytes at most): its length. */
static int plain_offset_id(const plain_t *p, long long offset, char *id)
{
    uint8_t raw[8];
    memcpy(id, p->id_prefix, (size_t)p->id_prefix_n);
    record_put_i64(raw, offset);
    plain_hex(raw, 8, id + p->id_prefix_n);
    return p->id_prefix_n + 16;
}

/* Take n consecutive queue offsets of the SEND's queue from the writer's table (the writer first
 * told of the queue, as StoreWriter._note does for a topic in the table and not its own): the first
 * in *first. Each offset taken is listed in p->keys, which plain_abort gives back. 0, or -1. */
static int plain_take_offsets(plain_t *p, const send_req_t *r, long long n, long long *first)
{
    if (r->queue_id >= p->writer_queues) {
        PyObject *queues = PyLong_FromLongLong(r->queue_id + 1);
        if (queues == NULL || PyDict_SetItem(PyTuple_GET_ITEM(p->state, PB_WRITER_TOPICS), p->topic, queues) < 0) {
            Py_XDECREF(queues);
            return -1;
        }
        Py_DECREF(queues);
        p->writer_queues = r->queue_id + 1;
    }
    PyObject *offsets = PyTuple_GET_ITEM(p->state, PB_QUEUE_OFFSETS);
    PyObject *key = Py_BuildValue("(OL)", p->topic, r->queue_id);
    if (key == NULL)
        return -1;
    PyObject *next = PyDict_GetItemWithError(offsets, key);
    long long queue_offset = 0;
    if ((next == NULL && PyErr_Occurred()) || (next != NULL && !py_int_in_range(next, 0, INT64_MAX - n, &queue_offset))) {
        Py_DECREF(key);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "a queue offset is an int");
        return -1;
    }
    long long listed = 0;
    int rc = 0;
    while (listed < n && rc == 0)
        if ((rc = PyList_Append(p->keys, key)) == 0)
            listed++;
    /* the offsets taken are those listed: plain_abort gives back one per listed key */
    PyObject *taken = PyLong_FromLongLong(queue_offset + listed);
    if (taken == NULL || PyDict_SetItem(offsets, key, taken) < 0) {
        /* nothing taken after all: unlisted, so that nothing is given back either */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        Py_ssize_t end = PyList_GET_SIZE(p->keys);
        if (PyList_SetSlice(p->keys, end - (Py_ssize_t)listed, end, NULL) < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
        rc = -1;
    }
    Py_XDECREF(taken);
    Py_DECREF(key);
    *first = queue_offset;
    return rc;
}

/* The SEND's SUCCESS answer (the queue the client chose, the first queue offset, the offset message
 * id(s)) written to out and listed for the flush. 0, or -1. */
static int plain_answer(plain_t *p, const template_t *success, out_buf *out, long long code, long long opaque,
                        const send_req_t *r, long long queue_offset, const char *id, Py_ssize_t id_n)
{
    if (id_n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "msgId too long");
        return -1;
    }
    PyObject *at = PyLong_FromSsize_t(out->len), *op = PyLong_FromLongLong(opaque), *cd = PyLong_FromLongLong(code);
    int listed = at != NULL && op != NULL && cd != NULL && PyList_Append(p->ats, at) == 0 &&
                 PyList_Append(p->opaques, op) == 0 && PyList_Append(p->codes, cd) == 0;
    Py_XDECREF(at);
    Py_XDECREF(op);
    Py_XDECREF(cd);
    if (!listed)
        return -1;
    hole_values v;
    set_hole(&v, HOLE_OPAQUE, opaque);
    set_hole(&v, HOLE_QUEUE_ID, r->queue_id);
    set_hole(&v, HOLE_OFFSET, queue_offset);
    set_hole_text(&v, HOLE_MSG_ID, id, (int)id_n);
    Py_ssize_t header_n = template_size(success, &v);
    if (ob_need(out, 8 + header_n) < 0)
        return -1;
    put_be32(out, (uint32_t)(4 + header_n));
    put_be32(out, (uint32_t)header_n);
    put_template(out, success, &v);
    return 0;
}

/* The record fields every record of a SEND shares (its header's and the group's). */
static void plain_fields(const plain_t *p, const send_req_t *r, int32_t sys_flag, struct record_fields *f)
{
    memset(f, 0, sizeof *f);
    f->queue_id = (int32_t)r->queue_id;
    f->flag = (int32_t)r->flag;
    f->sys_flag = sys_flag;
    f->born_port = p->born_port;
    f->store_port = p->store_port;
    f->reconsume_times = (r->seen & BIT(S_J)) ? (int32_t)r->reconsume_times : 0;
    f->born_timestamp = r->born_timestamp;
    f->store_timestamp = p->now;
    f->born_addr = p->born_addr;
    f->store_addr = p->store_addr;
    f->topic = r->topic;
    f->topic_len = r->topic_n;
}

/* A plain batch (batch_records' rules, CommitLog.asyncPutMessages): each message of the body one
 * record with its own flag, body and BODYCRC, its own properties joined with the batch's (suffix:
 * the header's properties with CLUSTER, WAIT kept), one store timestamp, consecutive queue offsets,
 * all in the current file; answered with the records' offset ids joined by commas and the first
 * queue offset. O_ANSWERED, O_LEAVE (a body that does not parse, no message, a message's stored
 * properties over the limit, no room left in the file: the callback's), -1. */
static int plain_batch(plain_t *p, const template_t *success, out_buf *out, long long code, long long opaque,
                       const send_req_t *r, const unsigned char *body, Py_ssize_t body_n, const uint8_t *suffix,
                       Py_ssize_t suffix_n, uint8_t *joined, int32_t sys_flag)
{
    Py_ssize_t pos = 0;
    batch_item_t item;
    long long count = 0;
    int64_t total = 0;
    int got;
    while ((got = batch_body_next(body, body_n, &pos, &item)) > 0) {
        Py_ssize_t props_n = item.properties_n + batch_needs_separator(item.properties, item.properties_n, suffix_n) + suffix_n;
        if (props_n > PLAIN_MAX_PROPERTIES)
            return O_LEAVE;
        total += record_v1_size(sys_flag, item.body_n, r->topic_n, props_n);
        count++;
    }
    long long offset = p->position + p->len;
    if (got < 0 || count == 0 || offset + total + RECORD_BLANK_SIZE > p->file_end)
        return O_LEAVE; /* the reference's refusal, or the writer's roll-over */
    Py_ssize_t id_size = (p->host_flags & RECORD_STOREHOST_V6_FLAG) ? 56 : 32;
    if (plain_room(p, p->len + (Py_ssize_t)total) < 0 ||
        plain_need(&p->ids, &p->ids_cap, (Py_ssize_t)count * (id_size + 1)) < 0)
        return -1;
    long long first;
    if (plain_take_offsets(p, r, count, &first) < 0)
        return -1;
    struct record_fields f;
    plain_fields(p, r, sys_flag, &f);
    uint8_t *at = p->buf + p->len;
    char *ids = (char *)p->ids;
    Py_ssize_t ids_n = 0;
    long long record_offset = offset;
    int64_t size = 0;
    pos = 0;
    for (long long i = 0; i < count; i++) {
        batch_body_next(body, body_n, &pos, &item);
        f.properties_len = batch_join_properties(item.properties, item.properties_n, suffix, suffix_n, joined);
        f.properties = joined;
        f.body = item.body;
        f.body_len = item.body_n;
        f.flag = item.flag;
        f.body_crc = (int32_t)(crc32_ieee(item.body, (size_t)item.body_n) & 0x7FFFFFFFu);
        f.queue_offset = first + i;
        f.physical_offset = record_offset;
        size = record_v1_size(sys_flag, item.body_n, r->topic_n, f.properties_len);
        at = record_v1_encode(at, &f);
        if (i)
            ids[ids_n++] = ',';
        ids_n += plain_offset_id(p, record_offset, ids + ids_n);
        record_offset += size;
    }
    if (plain_answer(p, success, out, code, opaque, r, first, ids, ids_n) < 0)
        return -1; /* the records are not counted: plain_abort gives their offsets back with the rest */
    p->len += (Py_ssize_t)total;
    p->count += count;
    p->last_offset = record_offset - size;
    p->last_size = size;
    return O_ANSWERED;
}

/* One SEND stored into the group and answered SUCCESS: O_ANSWERED, O_LEAVE (not plain: the caller
 * flushes the group and takes the callback), -1 with an error set. */
static int plain_send(plain_t *p, const template_t *success, out_buf *out, long long code, long long opaque,
                      const send_req_t *r, const unsigned char *body, Py_ssize_t body_n)
{
    if (p->begin == NULL || p->off || (r->sys_flag & PLAIN_TRANSACTION_TYPE_MASK) != 0 || r->topic_n < 1 ||
        r->topic_n > 127)
        return O_LEAVE;
    for (Py_ssize_t i = 0; i < r->topic_n; i++)
        if (!plain_topic_char(r->topic[i]))
            return O_LEAVE;
    if (!plain_utf8(r->group, r->group_n) || !plain_utf8(r->default_topic, r->default_topic_n) ||
        !plain_utf8(r->bname, r->bname_n))
        return O_LEAVE;
    if (p->state == NULL) {
        int begun = plain_begin(p);
        if (begun <= 0)
            return begun < 0 ? -1 : O_LEAVE;
    }
    if (body_n > p->max_message_size)
        return O_LEAVE;
    int known = plain_topic(p, r);
    if (known <= 0)
        return known < 0 ? -1 : O_LEAVE;
    if (r->queue_id >= p->queue_limit)
        return O_LEAVE;

    /* the scratch: the client's properties, escapes decoded, then the stored ones (a single
     * message's, or the batch's suffix), then a batch message's joined properties */
    Py_ssize_t text_n = r->properties.s == NULL ? 0 : r->properties.n;
    if (plain_need(&p->scratch, &p->scratch_cap, text_n + 2 * (PLAIN_MAX_PROPERTIES + 1)) < 0)
        return -1;
    const uint8_t *text = r->properties.s;
    if (text != NULL && r->properties.escaped) {
        text_n = json_unescape(&r->properties, p->scratch);
        text = p->scratch;
    }
    if (text != NULL && !plain_utf8(text, text_n))
        return O_LEAVE;
    uint8_t *stored = p->scratch + (r->properties.s == NULL ? 0 : r->properties.n);
    Py_ssize_t stored_n = plain_properties(p, text, text_n, stored, r->batch);
    if (stored_n < 0)
        return O_LEAVE;
    int32_t sys_flag = ((int32_t)r->sys_flag | p->topic_flags) & ~(RECORD_BORNHOST_V6_FLAG | RECORD_STOREHOST_V6_FLAG);
    sys_flag |= p->host_flags;
    if (r->batch)
        return plain_batch(p, success, out, code, opaque, r, body, body_n, stored, stored_n,
                           stored + PLAIN_MAX_PROPERTIES + 1, sys_flag);
    int64_t size = record_v1_size(sys_flag, body_n, r->topic_n, stored_n);
    long long offset = p->position + p->len;
    if (offset + size + RECORD_BLANK_SIZE > p->file_end)
        return O_LEAVE; /* the writer's roll-over */
    if (plain_room(p, p->len + (Py_ssize_t)size) < 0)
        return -1;
    long long queue_offset;
    if (plain_take_offsets(p, r, 1, &queue_offset) < 0)
        return -1;
    struct record_fields f;
    plain_fields(p, r, sys_flag, &f);
    f.body_crc = (int32_t)(crc32_ieee(body, (size_t)body_n) & 0x7FFFFFFFu);
    f.queue_offset = queue_offset;
    f.physical_offset = offset;
    f.body = body;
    f.body_len = body_n;
    f.properties = stored;
    f.properties_len = stored_n;
    record_v1_encode(p->buf + p->len, &f);
    char id[56];
    int id_n = plain_offset_id(p, offset, id);
    if (plain_answer(p, success, out, code, opaque, r, queue_offset, id, id_n) < 0)
        return -1; /* the record is not counted: plain_abort gives its offset back with the rest */
    p->len += (Py_ssize_t)size;
    p->count++;
    p->last_offset = offset;
    p->last_size = size;
    return O_ANSWERED;
}

#endif
