/*
 * server.remoting._request_path_fast: the compiled request path (issue 22). One call per received
 * read answers the VIEW_MESSAGE_BY_ID and QUERY_MESSAGE frames at its start: it splits the frames,
 * reads their JSON headers and writes every answer (length words, JSON header, body) into one output
 * buffer. A VIEW's record is read here from the CommitLog's maps; a QUERY is run here too, the
 * store's query loop over the IndexFiles' and CommitLog's maps (server/remoting/_query_loop.h), with
 * a Python call only for what it leaves to the Python path (QueryMessageProcessor.query_parts) and
 * for a query handed to the pool. The Python path (FrameDecoder, Dispatcher, the
 * processors, encode_frame_parts) is the reference: this path only takes a frame it is sure of and
 * stops at the first one it is not, which the caller then hands, with everything after it, to the
 * Python path. Its answers are the reference's bytes (tests/server/remoting/test_request_path.py
 * feeds the same reads to a connection with and without it and compares the bytes written).
 *
 *   bind(view_found, view_missing, query_found, query_not_found) -> None
 *       the answer headers as templates, made once by server/remoting/request_path.py with the
 *       Python encoder (so the answer format stays stated in one place): each (pieces, holes), the
 *       header being pieces[0] + number(holes[0]) + pieces[1] + ..., the numbers being the opaque,
 *       the VIEW's offset, a QUERY's index timestamp and phyoffset.
 *   answer_batch(data, pos, maps, starts, lengths, max_offset, max_size, shrunk,
 *                max_frame_length, max_header_length, flush_bytes, query)
 *       -> (answers: bytes | None, pos: int, views: int, found: int, found_bytes: int, queries: int,
 *           query_bytes: int, query_records: int, queries_found: int, queries_not_found: int,
 *           sends: int, again: int)
 *       answers the frames of data[pos:] it is sure of, in order, stopping at the first other one,
 *       at an incomplete frame, or once the answers reach flush_bytes; pos is where it stopped.
 *       views is how many VIEWs were answered, found how many of them with their record (the
 *       others SYSTEM_ERROR, no message), found_bytes the records' total size (the store's
 *       served-bytes accounting); queries how many QUERYs.
 *       query is None (QUERYs are left to the Python path), a callback, or (callback, handoff,
 *       snapshot). The callback is called as callback(opaque, topic, key, max_num, begin, end,
 *       unique) and answers (timestamp, phyoffset, records) for this code to answer with the
 *       records that fit max_size (query_message.cap_records: whole records, in order, up to the
 *       first that would pass it; QUERY_NOT_FOUND when none is left), bytes (a whole answer frame,
 *       written as is) or None (nothing now: the answer comes later, from the pool). A Python error
 *       from it is raised. With the tuple, QUERYs are run here (server/remoting/_query_loop.h, which
 *       says when it still calls the callback and when handoff); snapshot() is called once, at the
 *       batch's first QUERY. query_bytes and query_records are what those compiled queries served
 *       (MessageStore._served's arguments), queries_found and queries_not_found how they were
 *       answered (SUCCESS, QUERY_NOT_FOUND) for the /metrics counts.
 *   answer_batch(..., query, family)
 *       the same, and also the offset family (SEARCH_OFFSET_BY_TIMESTAMP, GET_MAX_OFFSET,
 *       GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME: _request_path_offsets.h says how and when) and,
 *       given a pulls context, PULL_MESSAGE (_request_path_pull.h), with family = (opened queues
 *       dict, commitlog, commitlog file size, counts list, pulls: None or (plan, commit, limits)):
 *       what they answered is written into counts (N_COUNTS gives the layout; left as it was when
 *       nothing was). Without it (or None) those frames are left to the Python path.
 *   answer_batch(..., query, family, sends)
 *       the same, and also the SENDs given a sends context
 *       (_request_path_send.h says what and how; None: left to the Python path). sends is how many
 *       were answered (or handed to a task); again is 1 when the batch stopped after SENDs at a
 *       frame that must read what they stored: the caller calls again from pos with a fresh
 *       snapshot.
 *
 * A frame is taken only when all of this holds, anything else is left to the Python path:
 *   - its length words are within the limits and the frame is whole in data; JSON serialization;
 *     no body (but a SEND's);
 *   - its header is one flat JSON object without whitespace or escapes whose keys are among code,
 *     extFields, flag, language, opaque, remark, serializeTypeCurrentRPC, version, each at most once;
 *     code, flag, opaque and version are int32 JSON numbers (missing ones are 0, as in the
 *     reference decoder); language is a plain string; remark a plain string or null;
 *     serializeTypeCurrentRPC "JSON"; the flag has neither the response nor the oneway bit; every
 *     string value valid UTF-8, even one ignored here (the reference decodes the whole header);
 *   - VIEW_MESSAGE_BY_ID (33): extFields exactly {"offset":"<1-18 digits>"};
 *   - QUERY_MESSAGE (12): extFields of strings without escapes or control characters (topic and
 *     key valid UTF-8, decoded strictly as the reference decoder does), exactly topic, key, maxNum
 *     (plain digits, at most 9, no leading zero), beginTimestamp and endTimestamp (at most 19, no
 *     leading zero, at most Long.MAX_VALUE) and
 *     optionally _UNIQUE_KEY_QUERY, in any order.
 *   - SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31),
 *     GET_EARLIEST_MSG_STORETIME (32): extFields exactly topic and queueId, and timestamp for 29
 *     only (offsets_fields), of a consume queue the store has opened.
 *   - PULL_MESSAGE (11), given the pulls' context (serve --writable): the plain fields
 *     (pull_fields) of a pull that finds messages (_request_path_pull.h says when).
 *   - SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and SEND_MESSAGE (10), given the sends
 *     context (serve --writable): the plain fields (send_fields, send_fields_v1; only the
 *     properties may hold JSON escapes) of a SEND the processor takes (_request_path_send.h).
 * A VIEW's record is read by view_locate() (store/commitlog/_view_read_core.h, the same code as
 * CommitLog.read_record_copy's compiled twin), so the safe-length rules are the same. A Python error
 * while reading it (only MemoryError or a failing shrink reporter can raise) is cleared and the frame
 * left to the Python path, which meets it again and answers it the reference's way.
 *
 * The GIL is held throughout except inside mmap.size(), the compiled query's chain walks and the
 * query callback. No file is written here: a SEND's records are written by the sends callback.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_record_layout.h"
#include "_view_read_core.h"

#define VIEW_MESSAGE_BY_ID 33
#define QUERY_MESSAGE 12
#define RPC_TYPE_RESPONSE 1
#define RPC_ONEWAY 2
#define HEADER_LENGTH_MASK 0xFFFFFF

static PyObject *size_name; /* "size", interned */

/* -- answer templates ------------------------------------------------------------------------------
 * An answer's JSON header is fixed text around a few numbers (holes): bind() hands over, per kind of
 * answer, the text pieces and which number goes between them, made by the Python encoder. */
enum { HOLE_OPAQUE, HOLE_OFFSET, HOLE_TIMESTAMP, HOLE_PHYOFFSET, HOLE_QUEUE_ID, HOLE_MSG_ID, N_HOLES };
enum { T_VIEW_FOUND, T_VIEW_MISSING, T_QUERY_FOUND, T_QUERY_NOT_FOUND, N_TEMPLATES };
#define MAX_PIECES 8

typedef struct {
    PyObject *pieces[MAX_PIECES]; /* bytes, strong references */
    int holes[MAX_PIECES - 1];
    int n_pieces;
} template_t;

static template_t templates[N_TEMPLATES];
static int bound = 0;

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

typedef struct {
    char tmp[N_HOLES][24];
    const char *digits[N_HOLES];
    int n[N_HOLES];
} hole_values;

static void set_hole(hole_values *v, int hole, long long x)
{
    v->digits[hole] = decimal(x, v->tmp[hole], (int)sizeof v->tmp[hole], &v->n[hole]);
}

/* A hole that takes text as it is (the caller checked it needs no JSON escape); s must outlive v. */
static void set_hole_text(hole_values *v, int hole, const char *s, int n)
{
    v->digits[hole] = s;
    v->n[hole] = n;
}

static Py_ssize_t template_size(const template_t *t, const hole_values *v)
{
    Py_ssize_t n = 0;
    for (int i = 0; i < t->n_pieces; i++) {
        n += PyBytes_GET_SIZE(t->pieces[i]);
        if (i + 1 < t->n_pieces)
            n += v->n[t->holes[i]];
    }
    return n;
}

static void put_template(out_buf *b, const template_t *t, const hole_values *v)
{
    for (int i = 0; i < t->n_pieces; i++) {
        put(b, PyBytes_AS_STRING(t->pieces[i]), PyBytes_GET_SIZE(t->pieces[i]));
        if (i + 1 < t->n_pieces)
            put(b, v->digits[t->holes[i]], v->n[t->holes[i]]);
    }
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

/* The length of the UTF-8 sequence at p (lead byte >= 0x80) as the strict decoder takes it: 2..4,
 * or 0 when it is not one (cut, a stray continuation byte, overlong, a surrogate, past U+10FFFF). */
static inline int utf8_sequence(const unsigned char *p, const unsigned char *end)
{
    unsigned char b = p[0];
    int n;
    unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (b >= 0xC2 && b <= 0xDF)
        n = 2;
    else if (b >= 0xE0 && b <= 0xEF) {
        n = 3;
        if (b == 0xE0)
            lo = 0xA0;
        else if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        n = 4;
        if (b == 0xF0)
            lo = 0x90;
        else if (b == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (end - p < n || p[1] < lo || p[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

/* The four hex digits of a JSON \uXXXX escape at p: 1 with *v their value, 0 when one is not hex. */
static inline int hex4(const unsigned char *p, unsigned *v)
{
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char h = p[i];
        unsigned d = h >= '0' && h <= '9'   ? (unsigned)(h - '0')
                     : h >= 'a' && h <= 'f' ? (unsigned)(h - 'a' + 10)
                     : h >= 'A' && h <= 'F' ? (unsigned)(h - 'A' + 10)
                                            : 16u;
        if (d == 16u)
            return 0;
        x = x * 16 + d;
    }
    *v = x;
    return 1;
}

/* 1 for the bytes a JSON string's scan passes over without a second look: printable ASCII but '"'
 * and '\\'. Everything else (the closing quote, an escape, a control character or DEL, a byte of a
 * UTF-8 sequence) stops the run and is looked at by scan_string. Filled once at import. */
static unsigned char plain_byte[256];

static void plain_byte_init(void)
{
    for (int b = 0x20; b < 0x7f; b++)
        plain_byte[b] = b != '"' && b != '\\';
}

/* A JSON string without control characters; [*s, *s + *n) is its text as written. With ascii_only
 * its bytes must be printable ASCII; otherwise the others must be UTF-8 (the reference decodes the
 * whole header strictly: one bad byte in any value, even one ignored here, makes it malformed).
 * escaped == NULL: no escape may occur. Otherwise the JSON escapes \" \\ \/ \b \f \n \r \t and
 * \uXXXX (but a surrogate, which is left to the reference) are taken, and *escaped says whether
 * any did (json_text decodes them). */
static int scan_string(cursor *c, const unsigned char **s, Py_ssize_t *n, int ascii_only, int *escaped)
{
    const unsigned char *p = c->p, *end = c->end;
    if (p >= end || *p != '"')
        return UNSURE;
    const unsigned char *start = ++p;
    for (;;) {
        /* The run of plain bytes first, one table load each: every header string is mostly that. */
        while (p < end && plain_byte[*p])
            p++;
        if (p >= end)
            return UNSURE;
        unsigned char b = *p;
        if (b == '"')
            break;
        if (b == '\\') {
            if (escaped == NULL || end - p < 2)
                return UNSURE;
            unsigned char e = p[1];
            if (e == 'u') {
                unsigned v;
                if (end - p < 6 || !hex4(p + 2, &v) || (v >= 0xD800 && v <= 0xDFFF))
                    return UNSURE;
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                       e == 't') {
                p += 2;
            } else {
                return UNSURE;
            }
            *escaped = 1;
            continue;
        }
        if (b < 0x80 || ascii_only)
            return UNSURE; /* a control character or DEL; or any byte past ASCII where only ASCII goes */
        int len = utf8_sequence(p, end);
        if (len == 0)
            return UNSURE;
        p += len;
    }
    *s = start;
    *n = p - start;
    c->p = p + 1;
    return SURE;
}

static inline int plain_string(cursor *c, const unsigned char **s, Py_ssize_t *n)
{
    return scan_string(c, s, n, 1, NULL);
}

/* A value of extFields: UTF-8, escapes taken (*escaped says whether any occurred). */
static inline int value_string(cursor *c, const unsigned char **s, Py_ssize_t *n, int *escaped)
{
    *escaped = 0;
    return scan_string(c, s, n, 0, escaped);
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

/* -- extFields: read once, then matched against each request kind's table -----------------------
 * Every request taken here has extFields of the same shape: {"key":"value",...}, keys printable
 * ASCII and values UTF-8, neither with an escape or control character. They are read once
 * (read_ext_fields) and then matched against the tables of the kinds (match_fields): which keys a
 * kind takes, how each value is read and where it goes. A kind's table and its rules sit beside the
 * code that answers it (_request_path_offsets.h, _request_path_pull.h, below for VIEW and QUERY). */

/* Plain digits without a sign or a leading zero (but "0"), at most max_digits (<= 19) of them and
 * at most Long.MAX_VALUE. */
static int plain_number(const unsigned char *s, Py_ssize_t n, int max_digits, long long *out)
{
    if (n <= 0 || n > max_digits || (s[0] == '0' && n > 1))
        return UNSURE;
    unsigned long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return UNSURE;
        v = v * 10 + (unsigned long long)(s[i] - '0'); /* 19 digits fit an unsigned long long */
    }
    if (v > (unsigned long long)LLONG_MAX)
        return UNSURE;
    *out = (long long)v;
    return SURE;
}

/* 1 to max_digits (<= 18) ASCII digits, leading zeros allowed (read as Java's Long.parseLong and the
 * reference read them). */
static int any_digits(const unsigned char *s, Py_ssize_t n, int max_digits, long long *out)
{
    if (n <= 0 || n > max_digits)
        return UNSURE;
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return UNSURE;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return SURE;
}

/* No request of ours has more fields than this; a header with more is left to the Python path. */
#define MAX_EXT_FIELDS 16

typedef struct {
    const unsigned char *key, *value;
    Py_ssize_t key_n, value_n;
    int escaped; /* the value holds a JSON escape: only a FIELD_JSON_TEXT takes it */
} ext_field;

typedef struct {
    ext_field f[MAX_EXT_FIELDS];
    int n;
} ext_fields;

/* {"key":"value",...} with at least one field and at most MAX_EXT_FIELDS, in e (pointers into the
 * header). */
static int read_ext_fields(cursor *c, ext_fields *e)
{
    e->n = 0;
    if (!expect(c, '{'))
        return UNSURE;
    for (;;) {
        if (e->n == MAX_EXT_FIELDS)
            return UNSURE;
        ext_field *f = &e->f[e->n++];
        if (!plain_string(c, &f->key, &f->key_n) || !expect(c, ':') ||
            !value_string(c, &f->value, &f->value_n, &f->escaped))
            return UNSURE;
        if (expect(c, ','))
            continue;
        if (expect(c, '}'))
            return SURE;
        return UNSURE;
    }
}

typedef enum {
    FIELD_TEXT,    /* the value as it is: a pointer (at) and a length (at_n) */
    FIELD_NUMBER,  /* plain_number of at most `digits` digits, a long long */
    FIELD_DIGITS,  /* any_digits of at most `digits` digits, a long long */
    FIELD_TRUE,    /* an int: whether the value is exactly "true" */
    FIELD_BOOLEAN, /* an int: Java's Boolean.parseBoolean (equalsIgnoreCase "true") */
    FIELD_JSON_TEXT, /* a json_text_t: the value as written, escapes allowed (_request_path_send.h's
                        json_text decodes it) */
    FIELD_IGNORED, /* taken, not read */
} field_kind;

/* A FIELD_JSON_TEXT's value (s == NULL: absent). */
typedef struct {
    const unsigned char *s;
    Py_ssize_t n;
    int escaped;
} json_text_t;

typedef struct {
    const char *name;
    Py_ssize_t name_n;
    field_kind kind;
    int digits;
    size_t at, at_n; /* offsetof the value (and of a TEXT's length) in the caller's struct */
} field_spec;

#define FIELD(name, kind, digits, at, at_n) {name, (Py_ssize_t)(sizeof(name) - 1), kind, digits, at, at_n}
#define BIT(i) (1u << (i))

/* Whether e is exactly a request of the kind specs describe (at most 32 specs): every field one of
 * them, none twice, every spec of `required` there, every value readable as its spec says. The values
 * go into out; absent fields are left as they were (the caller sets their defaults). *seen, when
 * given, says which specs were there (BIT(i) for specs[i]). */
static int match_fields(const ext_fields *e, const field_spec *specs, int n_specs, unsigned required, void *out,
                        unsigned *seen_out)
{
    char *base = out;
    unsigned seen = 0;
    for (int i = 0; i < e->n; i++) {
        const ext_field *f = &e->f[i];
        int s = 0;
        while (s < n_specs && !(specs[s].name_n == f->key_n && memcmp(specs[s].name, f->key, (size_t)f->key_n) == 0))
            s++;
        if (s == n_specs || (seen & BIT(s)))
            return UNSURE;
        seen |= BIT(s);
        const field_spec *sp = &specs[s];
        if (f->escaped && sp->kind != FIELD_JSON_TEXT)
            return UNSURE;
        switch (sp->kind) {
        case FIELD_TEXT:
            *(const unsigned char **)(base + sp->at) = f->value;
            *(Py_ssize_t *)(base + sp->at_n) = f->value_n;
            break;
        case FIELD_NUMBER:
            if (!plain_number(f->value, f->value_n, sp->digits, (long long *)(base + sp->at)))
                return UNSURE;
            break;
        case FIELD_DIGITS:
            if (!any_digits(f->value, f->value_n, sp->digits, (long long *)(base + sp->at)))
                return UNSURE;
            break;
        case FIELD_TRUE:
            *(int *)(base + sp->at) = f->value_n == 4 && memcmp(f->value, "true", 4) == 0;
            break;
        case FIELD_BOOLEAN:
            *(int *)(base + sp->at) = f->value_n == 4 && (f->value[0] | 0x20) == 't' && (f->value[1] | 0x20) == 'r' &&
                                      (f->value[2] | 0x20) == 'u' && (f->value[3] | 0x20) == 'e';
            break;
        case FIELD_JSON_TEXT: {
            json_text_t *t = (json_text_t *)(base + sp->at);
            t->s = f->value;
            t->n = f->value_n;
            t->escaped = f->escaped;
            break;
        }
        case FIELD_IGNORED:
            break;
        }
    }
    if ((seen & required) != required)
        return UNSURE;
    if (seen_out != NULL)
        *seen_out = seen;
    return SURE;
}

#include "_request_path_offsets.h" /* SEARCH_OFFSET_BY_TIMESTAMP, GET_MAX/MIN_OFFSET, GET_EARLIEST_MSG_STORETIME */
#include "_request_path_pull.h"    /* PULL_MESSAGE */
#include "_request_path_send.h"    /* SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, SEND_MESSAGE */

enum { F_CODE = 1, F_EXT = 2, F_FLAG = 4, F_LANGUAGE = 8, F_OPAQUE = 16, F_REMARK = 32, F_SER = 64, F_VERSION = 128 };

typedef struct {
    long long code, flag, opaque;
    /* extFields, as far as they were read (ext_kind says which shape) */
    int ext_kind; /* 0 = none of ours, 1 = VIEW's {"offset"}, 2 = QUERY's fields, 3 = the offset family's,
                     4 = a PULL's, 5 = a SEND_MESSAGE_V2's, 6 = a SEND_MESSAGE's */
    long long offset;
    const unsigned char *topic, *key;
    Py_ssize_t topic_n, key_n;
    long long max_num, begin, end;
    int unique;
    offsets_req_t q; /* ext_kind 3: the offset family's fields */
    pull_req_t p;    /* ext_kind 4: a PULL's */
    send_req_t s;    /* ext_kind 5 and 6: a SEND's */
} request_t;

/* VIEW_MESSAGE_BY_ID's extFields: exactly offset, 1-18 digits (an 18-digit number fits a long long;
 * leading zeros are read as Java and the reference read them), without an escape. Read by
 * view_fields_of, not through a field_spec table: the commonest request, for which match_fields'
 * table walk was about a tenth of the header's reading. */
static inline int view_fields_of(const ext_fields *e, request_t *r)
{
    const ext_field *f = &e->f[0];
    return e->n == 1 && f->key_n == 6 && memcmp(f->key, "offset", 6) == 0 && !f->escaped &&
           any_digits(f->value, f->value_n, 18, &r->offset);
}

/* QUERY_MESSAGE's extFields: topic, key, maxNum, beginTimestamp, endTimestamp (all required; the
 * numbers plain digits: maxNum up to 9, the timestamps up to 19) and optionally _UNIQUE_KEY_QUERY,
 * in any order, nothing else. */
enum { Q_TOPIC, Q_KEY, Q_MAX_NUM, Q_BEGIN, Q_END, Q_UNIQUE, N_QUERY_FIELDS };
static const field_spec query_fields[N_QUERY_FIELDS] = {
    [Q_TOPIC] = FIELD("topic", FIELD_TEXT, 0, offsetof(request_t, topic), offsetof(request_t, topic_n)),
    [Q_KEY] = FIELD("key", FIELD_TEXT, 0, offsetof(request_t, key), offsetof(request_t, key_n)),
    [Q_MAX_NUM] = FIELD("maxNum", FIELD_NUMBER, 9, offsetof(request_t, max_num), 0),
    [Q_BEGIN] = FIELD("beginTimestamp", FIELD_NUMBER, 19, offsetof(request_t, begin), 0),
    [Q_END] = FIELD("endTimestamp", FIELD_NUMBER, 19, offsetof(request_t, end), 0),
    [Q_UNIQUE] = FIELD("_UNIQUE_KEY_QUERY", FIELD_TRUE, 0, offsetof(request_t, unique), 0),
};
#define Q_REQUIRED (BIT(Q_TOPIC) | BIT(Q_KEY) | BIT(Q_MAX_NUM) | BIT(Q_BEGIN) | BIT(Q_END))

/* Which of our kinds e is (request_t.ext_kind), its values read into r; 0 when none. */
static int ext_kind_of(const ext_fields *e, request_t *r)
{
    if (view_fields_of(e, r))
        return 1;
    r->unique = 0;
    if (match_fields(e, query_fields, N_QUERY_FIELDS, Q_REQUIRED, r, NULL))
        return 2;
    if (offsets_fields_of(e, &r->q))
        return 3;
    if (pull_fields_of(e, &r->p))
        return 4;
    int form = send_fields_of(e, &r->s);
    if (form)
        return form == 1 ? 5 : 6;
    return 0;
}

static int parse_header(const unsigned char *data, Py_ssize_t size, request_t *r)
{
    cursor c = {data, data + size};
    unsigned seen = 0;
    r->code = r->flag = r->opaque = 0;
    r->ext_kind = 0;
    if (!expect(&c, '{'))
        return UNSURE;
    if (expect(&c, '}'))
        return UNSURE; /* no fields: nothing of ours */
    for (;;) {
        /* The key and its colon read as one literal, chosen by the key's first letter (each of ours
         * has its own): only these keys are taken, so any other key, whatever its bytes, is left
         * to the reference as when the key was scanned first and then compared. */
        if (c.end - c.p < 2 || c.p[0] != '"')
            return UNSURE;
        unsigned field;
        long long ignored;
        int ok;
        switch (c.p[1]) {
        case 'c':
            if (!LITERAL(&c, "\"code\":"))
                return UNSURE;
            field = F_CODE;
            ok = parse_int32(&c, &r->code);
            break;
        case 'e': {
            if (!LITERAL(&c, "\"extFields\":"))
                return UNSURE;
            field = F_EXT;
            /* Read whole, whatever the code (it may come after extFields), then matched. */
            ext_fields e;
            ok = read_ext_fields(&c, &e) && (r->ext_kind = ext_kind_of(&e, r)) != 0;
            break;
        }
        case 'f':
            if (!LITERAL(&c, "\"flag\":"))
                return UNSURE;
            field = F_FLAG;
            ok = parse_int32(&c, &r->flag);
            break;
        case 'l': {
            if (!LITERAL(&c, "\"language\":"))
                return UNSURE;
            const unsigned char *s;
            Py_ssize_t sn;
            field = F_LANGUAGE;
            ok = plain_string(&c, &s, &sn);
            break;
        }
        case 'o':
            if (!LITERAL(&c, "\"opaque\":"))
                return UNSURE;
            field = F_OPAQUE;
            ok = parse_int32(&c, &r->opaque);
            break;
        case 'r': {
            if (!LITERAL(&c, "\"remark\":"))
                return UNSURE;
            const unsigned char *s;
            Py_ssize_t sn;
            field = F_REMARK;
            ok = LITERAL(&c, "null") || plain_string(&c, &s, &sn);
            break;
        }
        case 's':
            if (!LITERAL(&c, "\"serializeTypeCurrentRPC\":"))
                return UNSURE;
            field = F_SER;
            ok = LITERAL(&c, "\"JSON\"");
            break;
        case 'v':
            if (!LITERAL(&c, "\"version\":"))
                return UNSURE;
            field = F_VERSION;
            ok = parse_int32(&c, &ignored);
            break;
        default:
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

/* A found record, or a missing one, answered into out. 0, or -1 with an error set. */
static int answer_view(out_buf *out, const request_t *req, PyObject *const *args, long long max_offset,
                       long long max_size, long long *found_count, long long *found_bytes, int *leave)
{
    view_record rec;
    int found = view_locate(args[2], args[3], args[4], max_offset, req->offset, max_size, args[7], size_name, &rec);
    if (found < 0) {
        view_release(&rec);
        PyErr_Clear(); /* the Python path meets it again and answers as the reference does */
        *leave = 1;
        return 0;
    }
    hole_values v;
    set_hole(&v, HOLE_OPAQUE, req->opaque);
    const template_t *t = &templates[found == VIEW_FOUND ? T_VIEW_FOUND : T_VIEW_MISSING];
    Py_ssize_t body_n = 0;
    if (found == VIEW_FOUND)
        body_n = rec.size;
    else
        set_hole(&v, HOLE_OFFSET, req->offset);
    Py_ssize_t header_n = template_size(t, &v);
    if (ob_need(out, 8 + header_n + body_n) < 0) {
        view_release(&rec);
        return -1;
    }
    put_be32(out, (uint32_t)(4 + header_n + body_n));
    put_be32(out, (uint32_t)header_n); /* JSON: serialize type 0 in the top byte */
    put_template(out, t, &v);
    if (found == VIEW_FOUND) {
        put(out, (const char *)rec.buf.buf + rec.pos, body_n);
        *found_bytes += body_n;
        ++*found_count;
    }
    view_release(&rec);
    return 0;
}

/* A QUERY_MESSAGE: query(opaque, topic, key, max_num, begin, end, unique) answers
 * (timestamp, phyoffset, records) to be answered here, bytes (a whole answer frame, written as is),
 * or None (nothing to write now: the answer comes later). 0, or -1 with an error set. */
static int answer_query(out_buf *out, const request_t *req, PyObject *query, long long max_body, int *leave)
{
    PyObject *topic = PyUnicode_DecodeUTF8((const char *)req->topic, req->topic_n, "strict");
    PyObject *key = topic ? PyUnicode_DecodeUTF8((const char *)req->key, req->key_n, "strict") : NULL;
    if (key == NULL) {
        Py_XDECREF(topic);
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return -1;
        PyErr_Clear(); /* not UTF-8: the reference decides (nothing has run yet) */
        *leave = 1;
        return 0;
    }
    PyObject *r = PyObject_CallFunction(query, "LNNLLLO", req->opaque, topic, key, req->max_num, req->begin,
                                        req->end, req->unique ? Py_True : Py_False);
    if (r == NULL)
        return -1;
    int rc = -1;
    if (r == Py_None) {
        rc = 0;
    } else if (PyBytes_Check(r)) {
        if (ob_need(out, PyBytes_GET_SIZE(r)) == 0) {
            put(out, PyBytes_AS_STRING(r), PyBytes_GET_SIZE(r));
            rc = 0;
        }
    } else if (PyTuple_Check(r) && PyTuple_GET_SIZE(r) == 3 && PyList_Check(PyTuple_GET_ITEM(r, 2))) {
        long long ts, phy;
        PyObject *records = PyTuple_GET_ITEM(r, 2);
        if (view_as_int64(PyTuple_GET_ITEM(r, 0), &ts) < 0 || view_as_int64(PyTuple_GET_ITEM(r, 1), &phy) < 0)
            goto done;
        Py_ssize_t n = PyList_GET_SIZE(records), body_n = 0;
        Py_buffer *views = n ? PyMem_Calloc((size_t)n, sizeof(Py_buffer)) : NULL;
        if (n && views == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t got = 0, take = n;
        for (; got < n; got++) {
            if (PyObject_GetBuffer(PyList_GET_ITEM(records, got), &views[got], PyBUF_SIMPLE) < 0)
                break;
            if (body_n + views[got].len > max_body) {
                /* query_message.cap_records: whole records within the frame's room, no more */
                take = got;
                got++;
                break;
            }
            body_n += views[got].len;
        }
        if (take < n || got == n) {
            n = take;
            hole_values v;
            set_hole(&v, HOLE_OPAQUE, req->opaque);
            set_hole(&v, HOLE_TIMESTAMP, ts);
            set_hole(&v, HOLE_PHYOFFSET, phy);
            const template_t *t = &templates[n ? T_QUERY_FOUND : T_QUERY_NOT_FOUND];
            Py_ssize_t header_n = template_size(t, &v);
            if (ob_need(out, 8 + header_n + body_n) == 0) {
                put_be32(out, (uint32_t)(4 + header_n + body_n));
                put_be32(out, (uint32_t)header_n);
                put_template(out, t, &v);
                for (Py_ssize_t i = 0; i < n; i++)
                    put(out, views[i].buf, views[i].len);
                rc = 0;
            }
        }
        for (Py_ssize_t i = 0; i < got; i++)
            PyBuffer_Release(&views[i]);
        PyMem_Free(views);
    } else {
        PyErr_SetString(PyExc_TypeError, "the query callback answers a (timestamp, phyoffset, list), bytes or None");
    }
done:
    Py_DECREF(r);
    return rc;
}

#include "_query_loop.h"

/* answer_batch's result: (answers, pos, views, found, found_bytes, queries, query_bytes,
 * query_records, queries_found, queries_not_found, sends, again), made item by item (Py_BuildValue
 * parses its format string on every call). answers is stolen, also on failure. */
#define N_RESULT 12

static PyObject *result_tuple(PyObject *answers, const long long *numbers)
{
    PyObject *t = PyTuple_New(N_RESULT);
    if (t == NULL) {
        Py_DECREF(answers);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, answers);
    for (int i = 1; i < N_RESULT; i++) {
        PyObject *n = PyLong_FromLongLong(numbers[i - 1]);
        if (n == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, n);
    }
    return t;
}

static PyObject *answer_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs < 12 || nargs > 14) {
        PyErr_Format(PyExc_TypeError, "answer_batch() takes 12 to 14 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!bound) {
        PyErr_SetString(PyExc_RuntimeError, "answer_batch() before bind()");
        return NULL;
    }
    PyObject *query = args[11], *handoff = NULL, *snapshot = NULL;
    if (PyTuple_Check(query)) {
        /* (callback, handoff, snapshot): QUERYs compiled (server/remoting/_query_loop.h) */
        if (PyTuple_GET_SIZE(query) != 3) {
            PyErr_SetString(PyExc_TypeError, "answer_batch() takes query as (callback, handoff, snapshot)");
            return NULL;
        }
        handoff = PyTuple_GET_ITEM(query, 1);
        snapshot = PyTuple_GET_ITEM(query, 2);
        query = PyTuple_GET_ITEM(query, 0);
    }
    if (!PyList_Check(args[2]) || !PyList_Check(args[3]) || !PyList_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "answer_batch() takes maps, starts and lengths as lists");
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

    offsets_ctx_t offsets;
    int have_offsets = offsets_ctx_init(&offsets, nargs >= 13 ? args[12] : NULL, args, max_offset);
    pull_ctx_t pulls;
    int have_pulls = have_offsets > 0 ? pull_ctx_init(&pulls, offsets.pulls) : pull_ctx_init(&pulls, NULL);
    send_ctx_t sends;
    int have_sends = send_ctx_init(&sends, nargs == 14 ? args[13] : NULL);
    if (have_offsets < 0 || have_pulls < 0 || have_sends < 0) {
        send_ctx_clear(&sends);
        PyBuffer_Release(&in);
        return NULL;
    }
    int again = 0; /* stopped after SENDs at another frame: call again with a fresh snapshot */
    out_buf out = {NULL, 0, 0};
    long long views = 0, found_count = 0, found_bytes = 0, queries = 0;
    PyObject *result = NULL;
    query_ctx qc;
    memset(&qc, 0, sizeof qc);

    while (out.len < flush_bytes && size - pos >= 8) {
        const unsigned char *f = data + pos;
        int32_t length = view_be32(f);
        if (length < 4 || (long long)length > max_frame - 4)
            break; /* the reference says what is wrong */
        uint32_t word = (uint32_t)view_be32(f + 4);
        long long header_len = word & HEADER_LENGTH_MASK;
        if ((word >> 24) != 0 || header_len > (long long)length - 4 || header_len > max_header)
            break; /* not JSON, a header longer than the frame or over the limit */
        if (size - pos - 4 < length)
            break; /* incomplete: the decoder keeps it */
        long long body_n = (long long)length - 4 - header_len;
        request_t req;
        if (!parse_header(f + 8, (Py_ssize_t)header_len, &req) || (req.flag & (RPC_TYPE_RESPONSE | RPC_ONEWAY)))
            break;
        int is_send = have_sends &&
                      (((req.code == SEND_MESSAGE_V2 || req.code == SEND_BATCH_MESSAGE) && req.ext_kind == 5) ||
                       (req.code == SEND_MESSAGE && req.ext_kind == 6));
        if (body_n != 0 && !is_send)
            break; /* only a SEND has a body here */
        if (sends.answered && !is_send) {
            again = 1; /* what the SENDs changed is not in this batch's snapshot */
            break;
        }
        if (is_send) {
            int done_here =
                answer_send(&out, &sends, req.code, req.opaque, &req.s, f + 8 + header_len, (Py_ssize_t)body_n);
            if (done_here < 0)
                goto done;
            if (done_here == O_LEAVE)
                break;
        } else if (req.code == VIEW_MESSAGE_BY_ID && req.ext_kind == 1) {
            int leave = 0;
            if (answer_view(&out, &req, args, max_offset, max_size, &found_count, &found_bytes, &leave) < 0)
                goto done;
            if (leave)
                break;
            views++;
        } else if (req.code == QUERY_MESSAGE && req.ext_kind == 2 && query != Py_None) {
            /* The query has run once the callback is called: from here on the frame is answered here,
             * and a Python error is a real one (the callback turns the processor's into answers). */
            int leave = 0;
            if (snapshot != NULL && qc.state == 0 &&
                query_ctx_ready(&qc, snapshot, args[2], args[3], args[4], max_offset) < 0)
                goto done;
            if (qc.state == 1 ? answer_query_compiled(&out, &req, &qc, query, handoff, max_size, &leave) < 0
                              : answer_query(&out, &req, query, max_size, &leave) < 0)
                goto done;
            if (leave)
                break;
            queries++;
        } else if (req.ext_kind == 3 && have_offsets && is_offsets_code(req.code)) {
            int done_here = answer_offsets(&out, &offsets, req.code, req.opaque, &req.q);
            if (done_here < 0)
                goto done;
            if (done_here == O_LEAVE)
                break;
        } else if (req.ext_kind == 4 && have_pulls && req.code == PULL_MESSAGE) {
            if (pull_ctx_ready(&pulls) < 0)
                goto done;
            int done_here = answer_pull(&out, &offsets, &pulls, req.opaque, &req.p);
            if (done_here < 0)
                goto done;
            if (done_here == O_LEAVE)
                break;
        } else {
            break;
        }
        pos += 4 + (long long)length;
    }
    if (send_ctx_finish(&sends, 0) < 0 || (have_offsets && family_finish(&offsets, &pulls) < 0))
        goto done;
    PyObject *answers = out.len ? PyBytes_FromStringAndSize(out.p, out.len) : Py_NewRef(Py_None);
    if (answers != NULL) {
        long long numbers[N_RESULT - 1] = {pos, views, found_count, found_bytes, queries, qc.served_bytes,
                                           qc.served_records, qc.found, qc.not_found, sends.answered, again};
        result = result_tuple(answers, numbers);
    }
done:
    if (result == NULL)
        send_ctx_finish(&sends, 1);
    query_ctx_clear(&qc);
    send_ctx_clear(&sends);
    PyMem_Free(out.p);
    PyBuffer_Release(&in);
    return result;
}

/* bind(view_found, view_missing, query_found, query_not_found): each (pieces, holes). */
static PyObject *bind(PyObject *self, PyObject *args)
{
    (void)self;
    if (PyTuple_GET_SIZE(args) != N_TEMPLATES) {
        PyErr_Format(PyExc_TypeError, "bind() takes %d templates", N_TEMPLATES);
        return NULL;
    }
    template_t fresh[N_TEMPLATES];
    memset(fresh, 0, sizeof fresh);
    for (int k = 0; k < N_TEMPLATES; k++)
        if (template_from(PyTuple_GET_ITEM(args, k), &fresh[k]) < 0)
            goto fail;
    for (int k = 0; k < N_TEMPLATES; k++) {
        for (int i = 0; i < templates[k].n_pieces; i++)
            Py_CLEAR(templates[k].pieces[i]);
        templates[k] = fresh[k];
    }
    bound = 1;
    Py_RETURN_NONE;
fail:
    for (int k = 0; k < N_TEMPLATES; k++)
        for (int i = 0; i < fresh[k].n_pieces; i++)
            Py_CLEAR(fresh[k].pieces[i]);
    return NULL;
}

static PyMethodDef methods[] = {
    {"answer_batch", (PyCFunction)(void (*)(void))answer_batch, METH_FASTCALL,
     "Answer the VIEW, QUERY, offset and PULL frames at the start of a read (see the module comment)."},
    {"bind", bind, METH_VARARGS, "Hand over the answer templates made by server.remoting.request_path."},
    {"bind_offsets", bind_offsets, METH_VARARGS, "The offset family's answer templates (_request_path_offsets.h)."},
    QW_SEGMENT_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "server.remoting._request_path_fast",
    "The compiled request path (see server/remoting/request_path.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__request_path_fast(void)
{
    crc_init(); /* the plain SENDs' BODYCRC (_request_path_plain.h) */
    plain_byte_init();
    size_name = PyUnicode_InternFromString("size");
    if (size_name == NULL)
        return NULL;
    return PyModule_Create(&module);
}
