/*
 * The key query's walks over the IndexFiles, stated once for the compiled code that needs them:
 * store/index/_query_walk_fast.c (the twins of store/index/query_walk.py: walk_chain, read_records,
 * query_files) and the compiled QUERY_MESSAGE of server/remoting/_request_path_fast.c
 * (server/remoting/_query_loop.h), which runs the whole store query in C. The rules and the safety
 * contract are query_walk.py's and _query_walk_fast.c's header comment's; this file holds the code:
 *   walk()            one chain walk (IndexFile.selectPhyOffset's loop, budget, deadline, loop guard)
 *   record_size()     record.check without BODYCRC (read_records' test of a whole record)
 *   qw_query_files()  query_files' loop over the files (size check, header rules, pruning, resume),
 *                     with what it met as C events for the caller to turn into Python values or not.
 */
#ifndef RMQ_QUERY_WALK_CORE_H
#define RMQ_QUERY_WALK_CORE_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "_record_layout.h"

#define ENTRY_SIZE 20
#define STOP_END 0
#define STOP_ZEROED 1
#define STOP_BUDGET 2
#define STOP_OUTSIDE 3
#define STOP_LOOP 4
#define EVENT_SHORT 10
#define EVENT_HEADER 11
#define EVENT_SLOT 12
#define EVENT_CHAIN 13
#define INDEX_HEADER_SIZE 40


static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static inline int16_t be16(const unsigned char *p) {
    return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]);
}

static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint64_t)(uint32_t)be32(p + 4));
}

/* ------------------------------------------------------------------------------------ walk_chain */

typedef struct {
    int64_t *offsets;
    Py_ssize_t count, cap;
    Py_ssize_t visited;
    int stop;
    long long stop_entry, forward;
    int nomem;
} walk_result;

static int push_offset(walk_result *r, int64_t value) {
    if (r->count == r->cap) {
        Py_ssize_t cap = r->cap ? r->cap * 2 : 64;
        int64_t *grown = realloc(r->offsets, (size_t)cap * sizeof(int64_t));
        if (grown == NULL) return -1;
        r->offsets = grown;
        r->cap = cap;
    }
    r->offsets[r->count++] = value;
    return 0;
}

/* A set of entry numbers 0..bits-1 (entries that can lie inside the buffer); others are never seen. */
typedef struct {
    unsigned char *bits;
    long long size;
} seen_set;

static inline int seen_has(const seen_set *s, long long n) {
    return n >= 0 && n < s->size && (s->bits[n >> 3] >> (n & 7)) & 1;
}

static inline void seen_add(seen_set *s, long long n) {
    if (n >= 0 && n < s->size) s->bits[n >> 3] |= (unsigned char)(1u << (n & 7));
}

/* floor(a / b) for b > 0, whatever the sign of a. */
static inline __int128 floor_div(__int128 a, __int128 b) {
    __int128 q = a / b;
    if (a % b != 0 && a < 0) q -= 1;
    return q;
}

/* The range [begin, end] in an entry's own unit: an entry's time is begin_ts + diff * 1000 with a
 * diff of 0 .. 2^31-1 (a negative one ends the walk before it is compared), so
 *   begin <= time  <=>  diff >= ceil((begin - begin_ts) / 1000) = lo
 *   time <= end    <=>  diff <= floor((end - begin_ts) / 1000) = hi
 * exactly, in integers. Clamped to [0, 2^32] and [-1, 2^32] (beyond them every diff compares alike),
 * the per-entry test is two 64-bit compares instead of a 128-bit multiply and two compares. */
static void diff_bounds(long long begin_ts, long long begin, long long end, long long *lo, long long *hi) {
    const __int128 cap = (__int128)1 << 32;
    __int128 l = -floor_div(-((__int128)begin - (__int128)begin_ts), 1000);
    __int128 h = floor_div((__int128)end - (__int128)begin_ts, 1000);
    *lo = (long long)(l < 0 ? 0 : (l > cap ? cap : l));
    *hi = (long long)(h < -1 ? -1 : (h > cap ? cap : h));
}

/* CLOCK_MONOTONIC in nanoseconds: Python's time.monotonic_ns() on Linux. */
static inline long long monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* How often (entries) a walk with a deadline looks at the clock: after every 256 entries it read (~3 us
 * of walking between looks; never before its first, so every walk makes some progress). */
#define DEADLINE_EVERY 256

static void walk(const unsigned char *base, Py_ssize_t length, Py_ssize_t entries_at, long long start,
                 int32_t key_hash, long long index_count, long long limit, long long begin_ts,
                 long long begin_phy, long long begin, long long end, Py_ssize_t room, Py_ssize_t budget,
                 long long chain_start, Py_ssize_t chain_visited, long long deadline, walk_result *r) {
    long long current = start;
    seen_set seen = {NULL, 0};
    long long lo, hi;
    diff_bounds(begin_ts, begin, end, &lo, &hi);
    if (chain_start < 0) {
        chain_start = start;
        chain_visited = 0;
    }
    r->stop = STOP_END;
    r->stop_entry = 0;
    r->forward = 0;
    /* Entries wholly inside the buffer: numbers 0 .. fit-1. */
    long long fit = length > entries_at ? (long long)((length - entries_at) / ENTRY_SIZE) : 0;
    if (room <= 0) return;
    for (;;) {
        if (current > limit) break;
        if (r->visited >= budget ||
            (deadline > 0 && r->visited > 0 && r->visited % DEADLINE_EVERY == 0 && monotonic_ns() >= deadline)) {
            r->stop = STOP_BUDGET;
            r->stop_entry = current;
            break;
        }
        if (current < 0 || current >= fit) {
            r->stop = STOP_OUTSIDE;
            r->stop_entry = current;
            break;
        }
        const unsigned char *e = base + entries_at + (Py_ssize_t)current * ENTRY_SIZE;
        int32_t hash_read = be32(e);
        int64_t phy_read = be64(e + 4);
        int32_t time_diff = be32(e + 12);
        int32_t prev = be32(e + 16);
        r->visited++;
        if (phy_read == 0 && prev == 0 && begin_phy > 0 && hash_read == 0) {
            r->stop = STOP_ZEROED;
            r->stop_entry = current;
            break;
        }
        if (time_diff < 0) break;
        if (hash_read == key_hash && time_diff >= lo && time_diff <= hi) {
            if (push_offset(r, phy_read) < 0) {
                r->nomem = 1;
                break;
            }
            if (r->count >= room) break;
        }
        if (prev <= 0 || prev > index_count || prev == current || time_diff < lo) break;
        if (prev > current || seen.bits != NULL) {
            if (seen.bits == NULL) {
                /* First forward link: remember the chain so far, then refuse to revisit. */
                r->forward = current;
                seen.size = fit;
                seen.bits = calloc((size_t)(fit / 8 + 1), 1);
                if (seen.bits == NULL) {
                    r->nomem = 1;
                    break;
                }
                /* The chain from its first entry: a resumed walk read part of it in an earlier call,
                 * and a file overwritten in place since could link elsewhere: each link is checked. */
                long long c = chain_start;
                for (Py_ssize_t i = 0; i < chain_visited + r->visited; i++) {
                    if (c < 0 || c >= fit) break;
                    seen_add(&seen, c);
                    c = be32(base + entries_at + (Py_ssize_t)c * ENTRY_SIZE + 16);
                }
            }
            if (seen_has(&seen, prev)) {
                r->stop = STOP_LOOP;
                r->stop_entry = prev;
                break;
            }
            seen_add(&seen, prev);
        }
        current = prev;
    }
    free(seen.bits);
}

/* -- a whole record -- */

static Py_ssize_t record_size(const unsigned char *b, Py_ssize_t pos, Py_ssize_t end) {
    if (pos + RECORD_SIZE_MAGIC_WIDTH > end) return -1;
    int32_t total = be32(b + pos + RECORD_TOTAL_SIZE_AT);
    int32_t magic = be32(b + pos + RECORD_MAGIC_CODE_AT);
    if (magic == RECORD_BLANK_MAGIC_CODE) return 0;
    if (magic != RECORD_MAGIC_CODE_V1 && magic != RECORD_MAGIC_CODE_V2) return -1;
    if (total < RECORD_MIN_RECORD_SIZE || pos + total > end) return -1;
    int32_t sys_flag = be32(b + pos + RECORD_SYS_FLAG_AT);
    Py_ssize_t p = pos + (Py_ssize_t)record_body_length_at(sys_flag);
    Py_ssize_t rend = pos + total;
    if (p + RECORD_BODY_LENGTH_WIDTH > rend) return -1;
    int32_t body_len = be32(b + p);
    if (body_len < 0) return -1;
    p += RECORD_BODY_LENGTH_WIDTH;
    if (p + body_len > rend) return -1;
    p += body_len;
    Py_ssize_t topic_len;
    if (magic == RECORD_MAGIC_CODE_V2) {
        if (p + RECORD_TOPIC_LENGTH_WIDTH_V2 > rend) return -1;
        topic_len = be16(b + p);
        p += RECORD_TOPIC_LENGTH_WIDTH_V2;
    } else {
        if (p + RECORD_TOPIC_LENGTH_WIDTH_V1 > rend) return -1;
        topic_len = b[p];
        p += RECORD_TOPIC_LENGTH_WIDTH_V1;
    }
    if (topic_len < 0) return -1;
    p += topic_len;
    if (p + RECORD_PROPERTIES_LENGTH_WIDTH > rend) return -1;
    int16_t props_len = be16(b + p);
    p += RECORD_PROPERTIES_LENGTH_WIDTH;
    if (props_len > 0) p += props_len;
    if (p != rend) return -1;
    return total;
}

/* -- the header rules (store/index/header.py) and the size check -- */

/* store/index/header.py's header_problem(...) is not None. */
static int header_bad(const long long h[6], long long hash_slot_num, long long index_num, int last) {
    if (h[0] < 0 || h[1] < 0 || h[2] < 0 || h[3] < 0) return 1;
    if (h[5] < 0 || h[5] > index_num) return 1;
    if (h[4] < 0 || h[4] > hash_slot_num) return 1;
    if (!last && h[5] != index_num) return 1;
    if (!last && h[0] > h[1]) return 1;
    return 0;
}

/* store/index/header.py's is_time_matched. */
static int time_matched(long long b, long long e, long long begin, long long end) {
    return (begin < b && end > e) || (b <= begin && begin <= e) || (b <= end && end <= e);
}

/* The file's size now by its descriptor (lseek to the end: no stat copy), cut to the map's length;
 * 0 when the descriptor is bad. */
static Py_ssize_t fd_size(int fd, Py_ssize_t mapped) {
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0) return 0;
    return end < (off_t)mapped ? (Py_ssize_t)end : mapped;
}

/* ----------------------------------------------------------------------------- qw_query_files */

/* What the file loop met in one file (query_walk's events): detail values v[0..5] (SHORT: the readable
 * length; HEADER: the six header values; SLOT: slot value, indexCount; CHAIN, ZEROED, OUTSIDE: the entry). */
typedef struct {
    Py_ssize_t file;
    int kind;
    long long v[6];
} qw_event;

/* Where a budget stopped the loop (query_walk.Resume without its offsets, which are the outcome's). */
typedef struct {
    Py_ssize_t file;
    long long entry, index_count, limit, begin_ts, begin_phy, chain_start;
    Py_ssize_t chain_visited, visited;
    long long last_ts, last_phy;
} qw_point;

typedef struct {
    walk_result all; /* offsets found (newest first) and entries visited */
    int exhausted;
    long long last_ts, last_phy;
    qw_event *events;
    Py_ssize_t n_events, cap_events;
    int have_point;
    qw_point point;
} qw_outcome;

static void qw_outcome_free(qw_outcome *o) {
    free(o->all.offsets);
    free(o->events);
    o->all.offsets = NULL;
    o->events = NULL;
}

static int qw_event_add(qw_outcome *o, Py_ssize_t file, int kind, long long a, long long b) {
    if (o->n_events == o->cap_events) {
        Py_ssize_t cap = o->cap_events ? o->cap_events * 2 : 8;
        qw_event *grown = realloc(o->events, (size_t)cap * sizeof(qw_event));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->events = grown;
        o->cap_events = cap;
    }
    qw_event *e = &o->events[o->n_events++];
    memset(e, 0, sizeof *e);
    e->file = file;
    e->kind = kind;
    e->v[0] = a;
    e->v[1] = b;
    return 0;
}

/* The slot of key_hash in a file's slot table (Python's % is never negative; keep the two alike). */
static inline Py_ssize_t qw_slot_pos(int32_t key_hash, long long hash_slot_num) {
    return (Py_ssize_t)(INDEX_HEADER_SIZE + ((((long long)key_hash % hash_slot_num) + hash_slot_num) % hash_slot_num) * 4);
}

/* query_walk.query_files over maps, fds and headers (sequences from PySequence_Fast; headers NULL
 * when the files' own are read), continuing from `resume` (with `resume_offsets`, the offsets it had
 * found) when not NULL. 0 with *o filled (free it with qw_outcome_free), or -1 with an error set.
 * The GIL is held, and released around each chain walk.
 * `sizes` (NULL, or one per map, -1 for not yet known) keeps each file's checked size for a caller
 * that runs many queries over one snapshot (the request path, per batch): a file's size is then
 * asked once per batch instead of once per query. */
static int qw_query_files(PyObject *maps, PyObject *fds, PyObject *headers, Py_ssize_t size, long long hash_slot_num,
                          long long index_num, int32_t key_hash, Py_ssize_t max_num, long long begin, long long end,
                          Py_ssize_t budget, const qw_point *resume, const int64_t *resume_offsets,
                          Py_ssize_t n_resume_offsets, long long deadline, Py_ssize_t *sizes, qw_outcome *o) {
    memset(o, 0, sizeof *o);
    if (hash_slot_num <= 0 || index_num <= 0 || hash_slot_num > (1LL << 40) ||
        size < INDEX_HEADER_SIZE + hash_slot_num * 4) {
        PyErr_SetString(PyExc_ValueError, "query_files: impossible geometry");
        return -1;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(maps);
    if (PySequence_Fast_GET_SIZE(fds) < n) {
        PyErr_SetString(PyExc_ValueError, "query_files: a descriptor per map");
        return -1;
    }
    if (headers != NULL && PySequence_Fast_GET_SIZE(headers) < n) {
        PyErr_SetString(PyExc_ValueError, "query_files: a header (or None) per map");
        return -1;
    }
    Py_ssize_t entries_at = (Py_ssize_t)(INDEX_HEADER_SIZE + hash_slot_num * 4);
    Py_ssize_t slot_pos = qw_slot_pos(key_hash, hash_slot_num);
    Py_ssize_t last = n - 1;
    Py_ssize_t first = last;
    if (resume != NULL) {
        if (resume->file < 0 || resume->file > last) {
            PyErr_SetString(PyExc_ValueError, "query_files: a resume point for other maps");
            return -1;
        }
        for (Py_ssize_t k = 0; k < n_resume_offsets; k++)
            if (push_offset(&o->all, resume_offsets[k]) < 0) goto nomem;
        first = resume->file;
        o->all.visited = resume->visited;
        o->last_ts = resume->last_ts;
        o->last_phy = resume->last_phy;
    }
    for (Py_ssize_t i = first; i >= 0; i--) {
        PyObject *mm = PySequence_Fast_GET_ITEM(maps, i);
        Py_buffer view;
        /* The export is taken first and held for the whole file: an exported mmap refuses close(). */
        if (PyObject_GetBuffer(mm, &view, PyBUF_SIMPLE) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError)) goto fail;
            PyErr_Clear(); /* a closed map: nothing can be read */
            if (qw_event_add(o, i, EVENT_SHORT, 0, 0) < 0) goto fail;
            continue;
        }
        long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(fds, i));
        if (fd == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            goto fail;
        }
        /* The map's export is held (taken above): its file cannot be closed, nor its fd reused. */
        Py_ssize_t now;
        if (sizes != NULL && sizes[i] >= 0) {
            now = sizes[i] < view.len ? sizes[i] : view.len;
        } else {
            now = fd < 0 || fd > INT32_MAX ? 0 : fd_size((int)fd, view.len);
            if (sizes != NULL)
                sizes[i] = now;
        }
        if (now < size) {
            PyBuffer_Release(&view);
            if (qw_event_add(o, i, EVENT_SHORT, now, 0) < 0) goto fail;
            continue;
        }
        const unsigned char *base = view.buf;
        long long h[6];
        /* The walk to run in this file: from entry `start`, with these header values. */
        long long start = -1, index_count = 0, limit = 0, chain_start = -1;
        Py_ssize_t chain_visited = 0;
        PyObject *given = headers != NULL ? PySequence_Fast_GET_ITEM(headers, i) : Py_None;
        if (resume != NULL && i == first) {
            /* Continue the walk the budget stopped, with the header values it began with. */
            h[0] = resume->begin_ts;
            h[2] = resume->begin_phy;
            start = resume->entry;
            index_count = resume->index_count;
            limit = resume->limit;
            chain_start = resume->chain_start;
            chain_visited = resume->chain_visited;
            goto walk_it;
        }
        if (given != Py_None) {
            if (!PyArg_ParseTuple(given, "LLLLLL:header", &h[0], &h[1], &h[2], &h[3], &h[4], &h[5])) {
                PyBuffer_Release(&view);
                goto fail;
            }
        } else {
            for (int k = 0; k < 4; k++) h[k] = be64(base + 8 * k);
            h[4] = be32(base + 32);
            h[5] = be32(base + 36);
        }
        if (i == last) {
            o->last_ts = h[1];
            o->last_phy = h[3];
        }
        if (header_bad(h, hash_slot_num, index_num, i == last)) {
            PyBuffer_Release(&view);
            if (qw_event_add(o, i, EVENT_HEADER, 0, 0) < 0) goto fail;
            memcpy(o->events[o->n_events - 1].v, h, sizeof h);
            continue;
        }
        /* begin > end: no entry's time can match, so no chain is walked (the broker walks and finds none). */
        if (begin <= end && time_matched(h[0], h[1], begin, end)) {
            index_count = h[5];
            long long slot_value = be32(base + slot_pos);
            if (slot_value <= 0 || slot_value > index_count || index_count <= 1) {
                if (slot_value > index_count && index_count > 1) {
                    if (qw_event_add(o, i, EVENT_SLOT, slot_value, index_count) < 0) {
                        PyBuffer_Release(&view);
                        goto fail;
                    }
                }
            } else {
                start = chain_start = slot_value;
                limit = index_count < index_num - 1 ? index_count : index_num - 1;
            }
        }
    walk_it:
        if (start < 0) {
            PyBuffer_Release(&view);
        } else {
            walk_result r;
            memset(&r, 0, sizeof r);
            Py_ssize_t length = size < view.len ? size : view.len;
            Py_BEGIN_ALLOW_THREADS
            walk(base, length, entries_at, start, key_hash, index_count, limit, h[0], h[2], begin, end,
                 max_num - o->all.count, budget - o->all.visited, chain_start, chain_visited, deadline, &r);
            Py_END_ALLOW_THREADS
            PyBuffer_Release(&view);
            o->all.visited += r.visited;
            int failed = r.nomem;
            for (Py_ssize_t k = 0; k < r.count && !failed; k++)
                if (push_offset(&o->all, r.offsets[k]) < 0) failed = 1;
            free(r.offsets);
            if (failed) goto nomem;
            if (r.forward && qw_event_add(o, i, EVENT_CHAIN, r.forward, 0) < 0) goto fail;
            if (r.stop == STOP_ZEROED || r.stop == STOP_OUTSIDE) {
                if (qw_event_add(o, i, r.stop, r.stop_entry, 0) < 0) goto fail;
            } else if (r.stop == STOP_BUDGET) {
                o->exhausted = 1;
                if (!r.forward) {
                    o->have_point = 1;
                    o->point = (qw_point){i, r.stop_entry, index_count, limit, h[0], h[2], chain_start,
                                          chain_visited + r.visited, o->all.visited, o->last_ts, o->last_phy};
                }
                break;
            }
        }
        if (h[0] < begin || o->all.count >= max_num) break;
    }
    return 0;
nomem:
    PyErr_NoMemory();
fail:
    qw_outcome_free(o);
    return -1;
}

#endif
