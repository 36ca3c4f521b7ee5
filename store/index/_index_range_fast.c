/*
 * store.index._index_range_fast: the compiled twin of store/index/index_range.py's index_range.
 *
 * Walks the whole records of view[pos:end] (one CommitLog file; base = its first offset) and puts
 * their index keys into the IndexFile `target`, exactly as the pure-Python reference does: the
 * same record checks (store/commitlog/record.py's check with BODYCRC and the expected PHYSICALOFFSET, plus
 * what protocol.message.read_index_fields refuses), the same keys (UNIQ_KEY, then the non-empty
 * space-separated KEYS tokens; none for a rollback), Java's String.hashCode of topic#key over
 * UTF-16 code units, and IndexFile.put_hash's slot, entry and header writes (the header after
 * every key, so a kill at any instant leaves a repairable file). It returns the same
 * (stop, pos, skip, seen, records, keys) tuple at the same places: END, ROLL, OTHER or BUDGET.
 *
 * Every read is bounds-checked against [pos, end) and every write against the index map's
 * length: a corrupt size field can only make the walk stop (OTHER), never read or write outside.
 * Text that is not ASCII (topics, non-ASCII keys) is decoded by CPython's own UTF-8 decoder with
 * "replace", as the reference does, so both hash the same code units.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_record_layout.h"

#define TX_MASK 0xC
#define TX_ROLLBACK 0xC

#define HEADER_SIZE 40
#define SLOT_SIZE 4
#define ENTRY_SIZE 20

enum { STOP_END = 0, STOP_ROLL = 1, STOP_OTHER = 2, STOP_BUDGET = 3 };

/* store.commitlog.mapped_files.RECHECK_EVERY: how often a walk asks the file's safe length again. */
#define RECHECK_EVERY (64 << 10)

/* -- bytes ------------------------------------------------------------------------------------ */

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

#include "_crc32.h"

static PyObject *crc32_py(PyObject *self, PyObject *arg)
{
    (void)self;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = crc32_ieee((const uint8_t *)b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(crc);
}

/* -- one record ------------------------------------------------------------------------------- */

typedef struct {
    int64_t size;
    int32_t sys_flag;
    int64_t store_ts;
    const uint8_t *topic;
    Py_ssize_t topic_len;
    const uint8_t *props;
    Py_ssize_t props_len;
} record_t;

/* 1 when a plain whole record starts at buf[pos] within end (the reference's record.check with
 * BODYCRC (unless check_crc is 0: the caller checked it) and expected offset, and read_index_fields
 * accepting it); 0 for anything else. */
static int parse_record(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t end, int64_t expected, record_t *r,
                        int check_crc)
{
    if (end - pos < RECORD_SIZE_MAGIC_WIDTH)
        return 0;
    const uint8_t *p0 = buf + pos;
    int64_t total = (int32_t)be32(p0 + RECORD_TOTAL_SIZE_AT);
    int32_t magic = (int32_t)be32(p0 + RECORD_MAGIC_CODE_AT);
    if (magic != RECORD_MAGIC_CODE_V1 && magic != RECORD_MAGIC_CODE_V2)
        return 0; /* also the blank end-of-file marker */
    if (total < RECORD_MIN_RECORD_SIZE || total > (int64_t)(end - pos))
        return 0;
    if ((int64_t)be64(p0 + RECORD_PHYSICAL_OFFSET_AT) != expected)
        return 0;
    int32_t sys_flag = (int32_t)be32(p0 + RECORD_SYS_FLAG_AT);
    uint32_t stored_crc = be32(p0 + RECORD_BODY_CRC_AT);
    int64_t store_ts_at = record_store_timestamp_at(sys_flag);
    int64_t p = record_body_length_at(sys_flag);
    if (p + RECORD_BODY_LENGTH_WIDTH > total)
        return 0;
    int64_t body_len = (int32_t)be32(p0 + p);
    if (body_len < 0)
        return 0;
    p += RECORD_BODY_LENGTH_WIDTH;
    if (p + body_len > total)
        return 0;
    /* BODYCRC is stored as a non-negative int: a negative one never matches, as in the reference. */
    if (check_crc && (crc32_ieee(p0 + p, (size_t)body_len) & 0x7FFFFFFFu) != stored_crc)
        return 0;
    p += body_len;
    int64_t topic_len;
    if (magic == RECORD_MAGIC_CODE_V2) {
        if (p + RECORD_TOPIC_LENGTH_WIDTH_V2 > total)
            return 0;
        topic_len = (int16_t)be16(p0 + p);
        p += RECORD_TOPIC_LENGTH_WIDTH_V2;
    } else {
        if (p + RECORD_TOPIC_LENGTH_WIDTH_V1 > total)
            return 0;
        topic_len = (int8_t)p0[p]; /* the decoder reads a V1 topic length as a signed byte */
        p += RECORD_TOPIC_LENGTH_WIDTH_V1;
    }
    if (topic_len < 0)
        return 0;
    r->topic = p0 + p;
    r->topic_len = (Py_ssize_t)topic_len;
    p += topic_len;
    if (p + RECORD_PROPERTIES_LENGTH_WIDTH > total)
        return 0;
    int64_t props_len = (int16_t)be16(p0 + p);
    p += RECORD_PROPERTIES_LENGTH_WIDTH;
    if (props_len < 0)
        return 0; /* the walk accepts it, the decoder does not: the caller decides */
    r->props = p0 + p;
    r->props_len = (Py_ssize_t)props_len;
    p += props_len;
    if (p != total)
        return 0;
    r->size = total;
    r->sys_flag = sys_flag;
    r->store_ts = (int64_t)be64(p0 + store_ts_at);
    return 1;
}

/* The last non-empty value of KEYS and of UNIQ_KEY (0x02 separates items, 0x01 name from value;
 * neither occurs inside a multi-byte UTF-8 sequence), like protocol.message_properties. */
static void find_properties(const uint8_t *pr, Py_ssize_t n, const uint8_t **keys, Py_ssize_t *keys_len,
                            const uint8_t **uniq, Py_ssize_t *uniq_len)
{
    *keys = NULL;
    *uniq = NULL;
    Py_ssize_t s = 0;
    for (;;) {
        const uint8_t *sep = s < n ? memchr(pr + s, 0x02, (size_t)(n - s)) : NULL;
        Py_ssize_t stop = sep ? sep - pr : n;
        Py_ssize_t item = stop - s;
        if (item > 5 && memcmp(pr + s, "KEYS\x01", 5) == 0) {
            *keys = pr + s + 5;
            *keys_len = item - 5;
        } else if (item > 9 && memcmp(pr + s, "UNIQ_KEY\x01", 9) == 0) {
            *uniq = pr + s + 9;
            *uniq_len = item - 9;
        }
        if (sep == NULL)
            break;
        s = stop + 1;
    }
}

/* -- hashing ---------------------------------------------------------------------------------- */

static inline int32_t finish_hash(uint32_t h)
{
    int32_t s = (int32_t)h;
    if (s == INT32_MIN)
        return 0;
    return s < 0 ? -s : s;
}

static inline uint32_t hash_unit(uint32_t h, Py_UCS4 c)
{
    if (c >= 0x10000) { /* a surrogate pair in Java's UTF-16 */
        c -= 0x10000;
        h = h * 31u + (0xD800u + (c >> 10));
        return h * 31u + (0xDC00u + (c & 0x3FFu));
    }
    return h * 31u + c;
}

static int is_ascii(const uint8_t *p, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) { /* eight bytes a step: a key is looked at once per record indexed */
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w & 0x8080808080808080ull)
            return 0;
    }
    for (; i < n; i++)
        if (p[i] & 0x80)
            return 0;
    return 1;
}

typedef struct {
    int32_t *h;
    Py_ssize_t n, cap;
} hashes_t;

static int hashes_push(hashes_t *hs, int32_t h)
{
    if (hs->n == hs->cap) {
        Py_ssize_t cap = hs->cap ? hs->cap * 2 : 64;
        int32_t *grown = PyMem_Realloc(hs->h, (size_t)cap * sizeof(int32_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        hs->h = grown;
        hs->cap = cap;
    }
    hs->h[hs->n++] = h;
    return 0;
}

/* Hashes of topic#key for one property value: the whole value (UNIQ_KEY) or its non-empty tokens
 * split on single spaces (KEYS). Non-ASCII values go through CPython's UTF-8 decoder. */
static int hash_value(hashes_t *hs, uint32_t prefix, const uint8_t *v, Py_ssize_t n, int split)
{
    if (is_ascii(v, n)) {
        uint32_t h = prefix;
        if (!split) { /* one key (a unique key): no look for spaces in the loop */
            for (Py_ssize_t i = 0; i < n; i++)
                h = h * 31u + v[i];
            return n ? hashes_push(hs, finish_hash(h)) : 0;
        }
        Py_ssize_t len = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (split && v[i] == ' ') {
                if (len && hashes_push(hs, finish_hash(h)) < 0)
                    return -1;
                h = prefix;
                len = 0;
                continue;
            }
            h = h * 31u + v[i];
            len++;
        }
        if (len && hashes_push(hs, finish_hash(h)) < 0)
            return -1;
        return 0;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)v, n, "replace");
    if (text == NULL)
        return -1;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    uint32_t h = prefix;
    Py_ssize_t len = 0;
    int rc = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (split && c == ' ') {
            if (len && (rc = hashes_push(hs, finish_hash(h))) < 0)
                break;
            h = prefix;
            len = 0;
            continue;
        }
        h = hash_unit(h, c);
        len++;
    }
    if (rc == 0 && len)
        rc = hashes_push(hs, finish_hash(h));
    Py_DECREF(text);
    return rc;
}

/* -- topics: hash of "topic#" per distinct topic bytes, and topics.add(topic) on first sight ---- */

#define TOPIC_SLOTS 128

typedef struct {
    uint8_t *bytes; /* NULL: empty slot */
    Py_ssize_t len;
    uint32_t fnv;
    uint32_t prefix;
} topic_slot_t;

typedef struct {
    topic_slot_t slot[TOPIC_SLOTS];
    int used;
} topic_cache_t;

static void topics_clear(topic_cache_t *tc)
{
    for (int i = 0; i < TOPIC_SLOTS; i++) {
        PyMem_Free(tc->slot[i].bytes);
        tc->slot[i].bytes = NULL;
    }
    tc->used = 0;
}

/* The hash of "topic#" (unsigned, before abs), adding the decoded topic to `topics` when new. */
static int topic_prefix(topic_cache_t *tc, PyObject *topics, const uint8_t *t, Py_ssize_t n, uint32_t *out)
{
    uint32_t fnv = 2166136261u;
    for (Py_ssize_t i = 0; i < n; i++)
        fnv = (fnv ^ t[i]) * 16777619u;
    unsigned idx = fnv & (TOPIC_SLOTS - 1);
    for (int probe = 0; probe < TOPIC_SLOTS; probe++, idx = (idx + 1) & (TOPIC_SLOTS - 1)) {
        topic_slot_t *s = &tc->slot[idx];
        if (s->bytes == NULL)
            break;
        if (s->fnv == fnv && s->len == n && memcmp(s->bytes, t, (size_t)n) == 0) {
            *out = s->prefix;
            return 0;
        }
    }
    if (tc->used >= TOPIC_SLOTS / 2) {
        topics_clear(tc);
        idx = fnv & (TOPIC_SLOTS - 1);
    }
    while (tc->slot[idx].bytes != NULL)
        idx = (idx + 1) & (TOPIC_SLOTS - 1);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)t, n, "replace");
    if (text == NULL)
        return -1;
    if (PySet_Add(topics, text) < 0) {
        Py_DECREF(text);
        return -1;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < length; i++)
        h = hash_unit(h, PyUnicode_READ(kind, data, i));
    Py_DECREF(text);
    h = h * 31u + '#';
    uint8_t *copy = PyMem_Malloc(n ? (size_t)n : 1);
    if (copy == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, t, (size_t)n);
    topic_slot_t *s = &tc->slot[idx];
    s->bytes = copy;
    s->len = n;
    s->fnv = fnv;
    s->prefix = h;
    tc->used++;
    *out = h;
    return 0;
}

/* -- the IndexFile writer --------------------------------------------------------------------- */

typedef struct {
    PyObject *file;   /* borrowed; NULL when there is no current file */
    PyObject *target; /* the file's compiled_writer tuple, held for the call */
    Py_buffer map, state;
    int have_map, have_state;
    int64_t hash_slot_num, index_num, entries_at;
    int64_t begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count;
} writer_t;

/* The positions of IndexFile._state (store/index/index_file.py's _W_*: the header's fields in order). */
enum { W_BEGIN_TS, W_END_TS, W_BEGIN_PHY, W_END_PHY, W_SLOTS, W_COUNT, W_FIELDS };

static PyObject *str_compiled_writer = NULL;

/* Take the writer state and the map from the IndexFile's compiled_writer (state array, map,
 * hash_slot_num, index_num): one attribute read, no Python call. */
static int writer_open(writer_t *w, PyObject *file)
{
    memset(w, 0, sizeof(*w));
    if (file == Py_None)
        return 0;
    w->file = file;
    PyObject *t = PyObject_GetAttr(file, str_compiled_writer);
    if (t == NULL)
        return -1;
    w->target = t;
    if (t == Py_None) {
        PyErr_SetString(PyExc_ValueError, "index_range: the target index file is open read-only or closed");
        return -1;
    }
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 4) {
        PyErr_SetString(PyExc_TypeError, "index_range: compiled_writer must be (state, map, slots, entries)");
        return -1;
    }
    w->hash_slot_num = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 2));
    w->index_num = PyLong_AsLongLong(PyTuple_GET_ITEM(t, 3));
    if (PyErr_Occurred())
        return -1;
    if (w->hash_slot_num <= 0 || w->index_num <= 0 || w->hash_slot_num > (INT64_C(1) << 40) ||
        w->index_num > (INT64_C(1) << 40)) {
        PyErr_SetString(PyExc_ValueError, "index_range: impossible index file geometry");
        return -1;
    }
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(t, 0), &w->state, PyBUF_WRITABLE | PyBUF_FORMAT) < 0)
        return -1;
    w->have_state = 1;
    if (w->state.len != W_FIELDS * (Py_ssize_t)sizeof(int64_t) || w->state.itemsize != sizeof(int64_t) ||
        w->state.format == NULL || strcmp(w->state.format, "q") != 0) {
        PyErr_SetString(PyExc_TypeError, "index_range: the writer state must be an array('q') of 6 ints");
        return -1;
    }
    const int64_t *st = (const int64_t *)w->state.buf;
    w->begin_ts = st[W_BEGIN_TS];
    w->end_ts = st[W_END_TS];
    w->begin_phy = st[W_BEGIN_PHY];
    w->end_phy = st[W_END_PHY];
    w->slot_count = st[W_SLOTS];
    w->index_count = st[W_COUNT];
    w->entries_at = HEADER_SIZE + w->hash_slot_num * SLOT_SIZE;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(t, 1), &w->map, PyBUF_WRITABLE) < 0)
        return -1;
    w->have_map = 1;
    if (w->map.len < w->entries_at + w->index_num * ENTRY_SIZE) {
        PyErr_SetString(PyExc_ValueError, "index_range: the index file map is smaller than its geometry");
        return -1;
    }
    return 0;
}

/* Hand the header state back to the IndexFile (its state array, also after an error: the keys put
 * before it are in the file) and release the buffers. */
static int writer_close(writer_t *w)
{
    if (w->have_state && w->have_map) {
        int64_t *st = (int64_t *)w->state.buf;
        st[W_BEGIN_TS] = w->begin_ts;
        st[W_END_TS] = w->end_ts;
        st[W_BEGIN_PHY] = w->begin_phy;
        st[W_END_PHY] = w->end_phy;
        st[W_SLOTS] = w->slot_count;
        st[W_COUNT] = w->index_count;
    }
    if (w->have_map)
        PyBuffer_Release(&w->map);
    if (w->have_state)
        PyBuffer_Release(&w->state);
    w->have_map = w->have_state = 0;
    Py_CLEAR(w->target);
    return 0;
}

static inline void writer_header(writer_t *w)
{
    uint8_t *m = (uint8_t *)w->map.buf;
    put64(m + 0, (uint64_t)w->begin_ts);
    put64(m + 8, (uint64_t)w->end_ts);
    put64(m + 16, (uint64_t)w->begin_phy);
    put64(m + 24, (uint64_t)w->end_phy);
    put32(m + 32, (uint32_t)w->slot_count);
    put32(m + 36, (uint32_t)w->index_count);
}

/* Tests only (tests/store/write/test_crash_safety.py): called before each of the three writes of a put
 * (entry, slot, header), as the tests count IndexFile.put_hash's pack_into calls; an exception it
 * raises stops the walk there, like a kill between two writes. NULL (the default) costs one test. */
static PyObject *write_hook = NULL;

static inline int before_write(void)
{
    if (write_hook == NULL)
        return 0;
    PyObject *r = PyObject_CallNoArgs(write_hook);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *set_write_hook(PyObject *self, PyObject *hook)
{
    (void)self;
    Py_XDECREF(write_hook);
    write_hook = NULL;
    if (hook != Py_None) {
        Py_INCREF(hook);
        write_hook = hook;
    }
    Py_RETURN_NONE;
}

/* IndexFile.put_hash: 1 put, 0 when the file is full, -1 when the write hook raised. */
static int writer_put(writer_t *w, int32_t key_hash, int64_t phy, int64_t store_ts)
{
    int64_t count = w->index_count;
    if (count >= w->index_num)
        return 0;
    uint8_t *m = (uint8_t *)w->map.buf;
    int64_t slot_pos = HEADER_SIZE + ((int64_t)key_hash % w->hash_slot_num) * SLOT_SIZE;
    int64_t slot_value = (int32_t)be32(m + slot_pos);
    int empty = slot_value <= 0 || slot_value > count;
    if (empty)
        slot_value = 0;
    int64_t diff = 0;
    if (w->begin_ts > 0) {
        int64_t delta;
        if (__builtin_sub_overflow(store_ts, w->begin_ts, &delta))
            diff = 0; /* only a hugely negative store time overflows: negative, so 0 */
        else {
            diff = delta / 1000; /* truncates toward zero, like Java's long division */
            if (diff > INT32_MAX)
                diff = INT32_MAX;
            else if (diff < 0)
                diff = 0;
        }
    }
    /* count < index_num, so the entry lies inside the map (checked in writer_open). */
    uint8_t *e = m + w->entries_at + count * ENTRY_SIZE;
    if (before_write() < 0)
        return -1;
    put32(e, (uint32_t)key_hash);
    put64(e + 4, (uint64_t)phy);
    put32(e + 12, (uint32_t)diff);
    put32(e + 16, (uint32_t)slot_value);
    if (before_write() < 0)
        return -1;
    put32(m + slot_pos, (uint32_t)count);
    if (count <= 1) {
        w->begin_phy = phy;
        w->begin_ts = store_ts;
    }
    if (empty)
        w->slot_count++;
    w->index_count = count + 1;
    w->end_phy = phy;
    w->end_ts = store_ts;
    if (before_write() < 0)
        return -1;
    writer_header(w);
    return 1;
}

/* -- the bytearray sink: packed >iqq entries, appended once per call ---------------------------- */

#define PACKED_SIZE 20

typedef struct {
    uint8_t *b;
    Py_ssize_t n, cap;
} packed_t;

static int packed_put(packed_t *pk, int32_t key_hash, int64_t phy, int64_t store_ts)
{
    if (pk->n + PACKED_SIZE > pk->cap) {
        Py_ssize_t cap = pk->cap ? pk->cap * 2 : 64 * PACKED_SIZE;
        uint8_t *grown = PyMem_Realloc(pk->b, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        pk->b = grown;
        pk->cap = cap;
    }
    uint8_t *e = pk->b + pk->n;
    put32(e, (uint32_t)key_hash);
    put64(e + 4, (uint64_t)phy);
    put64(e + 12, (uint64_t)store_ts);
    pk->n += PACKED_SIZE;
    return 0;
}

/* Append what the walk packed to the caller's bytearray (also after an error: the keys counted
 * as put are in it). */
static int packed_flush(packed_t *pk, PyObject *sink)
{
    int rc = 0;
    if (sink != NULL && pk->n > 0) {
        Py_ssize_t had = PyByteArray_GET_SIZE(sink);
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        if (PyByteArray_Resize(sink, had + pk->n) < 0)
            rc = -1;
        else
            memcpy(PyByteArray_AS_STRING(sink) + had, pk->b, (size_t)pk->n);
        if (exc_type != NULL) {
            if (rc < 0)
                PyErr_Clear();
            PyErr_Restore(exc_type, exc_value, exc_tb);
        }
    }
    PyMem_Free(pk->b);
    pk->b = NULL;
    pk->n = pk->cap = 0;
    return rc;
}

/* -- index_range ------------------------------------------------------------------------------ */

static PyObject *index_range(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t pos, end, skip;
    long long base, budget;
    PyObject *target, *topics, *safe_length = Py_None;
    int checked = 0;
    if (!PyArg_ParseTuple(args, "y*nnLOOnL|Op:index_range", &view, &pos, &end, &base, &target, &topics, &skip,
                          &budget, &safe_length, &checked))
        return NULL;
    if (pos < 0 || end > view.len || pos > end || skip < 0 || !PySet_Check(topics)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "index_range: need 0 <= pos <= end <= len(view), skip >= 0, a set");
        return NULL;
    }
    /* A bytearray target is a sink of packed entries (never full, nothing to de-duplicate against). */
    PyObject *sink = PyByteArray_Check(target) ? target : NULL;
    packed_t pk = {NULL, 0, 0};
    writer_t w;
    if (writer_open(&w, sink != NULL ? Py_None : target) < 0) {
        writer_close(&w);
        PyBuffer_Release(&view);
        return NULL;
    }
    const uint8_t *buf = (const uint8_t *)view.buf;
    topic_cache_t tc;
    memset(&tc, 0, sizeof(tc));
    hashes_t hs = {NULL, 0, 0};
    long long seen = 0, records = 0, keys_put = 0;
    int stop = STOP_END, failed = 0;
    Py_ssize_t recheck_at = pos + RECHECK_EVERY;
    for (;;) {
        if (safe_length != Py_None && pos >= recheck_at) {
            /* the file may have been cut under the map: never read past its current length */
            PyObject *now = PyObject_CallNoArgs(safe_length);
            Py_ssize_t n = now != NULL ? PyLong_AsSsize_t(now) : -1;
            Py_XDECREF(now);
            if (n == -1 && PyErr_Occurred()) {
                failed = 1;
                break;
            }
            if (n < end)
                end = n;
            recheck_at = pos + RECHECK_EVERY;
        }
        if (pos >= end) {
            stop = STOP_END;
            break;
        }
        if (seen >= budget) {
            stop = STOP_BUDGET;
            break;
        }
        int64_t offset = (int64_t)base + pos;
        record_t r;
        if (!parse_record(buf, pos, end, offset, &r, !checked)) {
            stop = STOP_OTHER;
            break;
        }
        uint32_t prefix;
        if (topic_prefix(&tc, topics, r.topic, r.topic_len, &prefix) < 0) {
            failed = 1;
            break;
        }
        hs.n = 0;
        if ((r.sys_flag & TX_MASK) != TX_ROLLBACK && r.props_len > 0) {
            const uint8_t *kv, *uv;
            Py_ssize_t kn = 0, un = 0;
            find_properties(r.props, r.props_len, &kv, &kn, &uv, &un);
            if ((uv != NULL && hash_value(&hs, prefix, uv, un, 0) < 0) ||
                (kv != NULL && hash_value(&hs, prefix, kv, kn, 1) < 0)) {
                failed = 1;
                break;
            }
        }
        if (skip < hs.n) {
            if (sink != NULL) {
                for (; skip < hs.n; skip++) {
                    if (packed_put(&pk, hs.h[skip], offset, r.store_ts) < 0)
                        break;
                    keys_put++;
                }
                if (skip < hs.n) {
                    failed = 1;
                    break;
                }
                records++;
            } else if (w.file == NULL) {
                stop = STOP_ROLL;
                break;
            } else if (offset >= w.end_phy) {
                int put = 1;
                for (; skip < hs.n; skip++) {
                    if ((put = writer_put(&w, hs.h[skip], offset, r.store_ts)) <= 0)
                        break;
                    keys_put++;
                }
                if (put < 0) {
                    failed = 1;
                    break;
                }
                if (put == 0) {
                    stop = STOP_ROLL;
                    break;
                }
                records++;
            }
        }
        skip = 0;
        seen++;
        pos += (Py_ssize_t)r.size;
    }
    topics_clear(&tc);
    PyMem_Free(hs.h);
    int closed = writer_close(&w);
    if (packed_flush(&pk, sink) < 0)
        closed = -1;
    PyBuffer_Release(&view);
    if (failed || closed < 0)
        return NULL;
    return Py_BuildValue("(inLLLL)", stop, pos, (long long)skip, seen, records, keys_put);
}

/* -- put_entries ------------------------------------------------------------------------------ */

static PyObject *put_entries(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *target;
    Py_buffer blob;
    if (!PyArg_ParseTuple(args, "Oy*:put_entries", &target, &blob))
        return NULL;
    if (blob.len % PACKED_SIZE != 0 || target == Py_None) {
        PyBuffer_Release(&blob);
        PyErr_SetString(PyExc_ValueError, "put_entries: need an IndexFile and whole 20-byte entries");
        return NULL;
    }
    writer_t w;
    if (writer_open(&w, target) < 0) {
        writer_close(&w);
        PyBuffer_Release(&blob);
        return NULL;
    }
    const uint8_t *b = (const uint8_t *)blob.buf;
    Py_ssize_t count = blob.len / PACKED_SIZE, put = 0;
    int failed = 0;
    for (; put < count; put++) {
        const uint8_t *e = b + put * PACKED_SIZE;
        int rc = writer_put(&w, (int32_t)be32(e), (int64_t)be64(e + 4), (int64_t)be64(e + 12));
        if (rc < 0)
            failed = 1;
        if (rc <= 0)
            break;
    }
    int closed = writer_close(&w);
    PyBuffer_Release(&blob);
    if (failed || closed < 0)
        return NULL;
    return PyLong_FromSsize_t(put);
}

static PyMethodDef methods[] = {
    {"index_range", index_range, METH_VARARGS,
     "index_range(view, pos, end, base, target, topics, skip, budget, safe_length=None)\n"
     "    -> (stop, pos, skip, seen, records, keys)\n"
     "The compiled store.index.index_range.index_range (see that module)."},
    {"put_entries", put_entries, METH_VARARGS,
     "put_entries(target, blob) -> keys put\n"
     "The compiled store.index.index_range.put_entries (see that module)."},
    {"_crc32", crc32_py, METH_O, "Tests only: zlib.crc32 of a buffer, as the record check computes it."},
    {"_set_write_hook", set_write_hook, METH_O,
     "Tests only: call this before every index write (None: never); an exception stops the walk."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.index._index_range_fast",
    "Compiled twin of store.index.index_range: index a byte range of CommitLog records into one IndexFile.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__index_range_fast(void)
{
    crc_init();
    if (str_compiled_writer == NULL && (str_compiled_writer = PyUnicode_InternFromString("compiled_writer")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
