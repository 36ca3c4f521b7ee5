/*
 * store.index._query_walk_fast: the compiled twin of store/index/query_walk.py (same function names, same
 * arguments, same results; the Python module is the readable reference and the tests check that
 * both agree, on the golden store and on hostile bytes).
 *
 *   walk_chain(buf, length, entries_at, start, key_hash, index_count, limit, begin_timestamp,
 *              begin_phy_offset, begin, end, room, budget[, chain_start, chain_visited, deadline])
 *       -> (offsets, visited, stop, stop_entry, forward_entry)
 *   read_records(views, starts, lengths, max_offset, offsets) -> [memoryview | None, ...]
 *   read_checked(maps, views, starts, lengths, max_offset, offsets) -> (records, shrunk)
 *   query_files(maps, fds, headers, size, hash_slot_num, index_num, key_hash, max_num, begin, end, budget
 *               [, resume, deadline])
 *       -> (offsets, visited, budget_exhausted, last_timestamp, last_phy_offset, events, resume)
 *
 * Safety contract (files can shrink under a live reader: a truncated CommitLog, an index file
 * replaced by `cp`; touching a mapped page past the new end of file raises SIGBUS):
 *   - Only bytes inside `length` (the size the Python layer checked when it mapped the file, also
 *     capped by the buffer's own length) are ever read. Sizing the map, and re-checking the file
 *     before handing out that length, is the Python layer's job.
 *   - Every pointer read from a file is bounds-checked before it is followed: a chain's prevIndex
 *     (and the starting slot value) must name an entry lying wholly inside `length`; a record's
 *     TOTALSIZE and its variable-length fields must lie inside the file and the written end.
 *   - The buffer export (PyObject_GetBuffer) is held for the whole walk, including while the GIL is
 *     released in walk_chain: an exported mmap refuses close() (BufferError), so a concurrent
 *     refresh on the event loop cannot unmap memory this code is reading.
 *   - walk_chain visits at most `budget` entries and never revisits one, so hostile chains end.
 * No Python object is touched while the GIL is released: offsets are gathered in a C array.
 */
#define PY_SSIZE_T_CLEAN
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

static PyObject *walk_chain(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t length, entries_at, room, budget;
    long long start, index_count, limit, begin_ts, begin_phy, begin, end, chain_start = -1, deadline = 0;
    Py_ssize_t chain_visited = 0;
    int key_hash;
    if (!PyArg_ParseTuple(args, "OnnLiLLLLLLnn|LnL:walk_chain", &obj, &length, &entries_at, &start, &key_hash,
                          &index_count, &limit, &begin_ts, &begin_phy, &begin, &end, &room, &budget,
                          &chain_start, &chain_visited, &deadline))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (length > view.len) length = view.len;
    if (length < 0) length = 0;
    if (entries_at < 0) entries_at = length; /* nothing can be read */
    walk_result r;
    memset(&r, 0, sizeof r);
    Py_BEGIN_ALLOW_THREADS
    walk((const unsigned char *)view.buf, length, entries_at, start, (int32_t)key_hash, index_count, limit,
         begin_ts, begin_phy, begin, end, room, budget, chain_start, chain_visited, deadline, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (r.nomem) {
        free(r.offsets);
        return PyErr_NoMemory();
    }
    PyObject *offsets = PyList_New(r.count);
    if (offsets == NULL) {
        free(r.offsets);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < r.count; i++) {
        PyObject *v = PyLong_FromLongLong(r.offsets[i]);
        if (v == NULL) {
            free(r.offsets);
            Py_DECREF(offsets);
            return NULL;
        }
        PyList_SET_ITEM(offsets, i, v);
    }
    free(r.offsets);
    return Py_BuildValue("(NniLL)", offsets, r.visited, r.stop, r.stop_entry, r.forward);
}

/* ---------------------------------------------------------------------------------- read_records */

/* store/commitlog/record.py's check() without BODYCRC: the record's size when whole, else <= 0. */
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

static Py_ssize_t current_size(PyObject *mm, Py_ssize_t mapped);

/* read_records, and with `maps_in` (read_checked) each file's current size checked at its first read,
 * the files found short appended to `shrunk` as (file, readable length). */
static PyObject *read_impl(PyObject *views_in, PyObject *starts_in, PyObject *lengths_in, long long max_offset,
                           PyObject *offsets_in, PyObject *maps_in, PyObject *shrunk) {
    PyObject *maps = NULL;
    if (maps_in != NULL && (maps = PySequence_Fast(maps_in, "maps must be a sequence")) == NULL) return NULL;
    PyObject *views = PySequence_Fast(views_in, "views must be a sequence");
    PyObject *starts = views ? PySequence_Fast(starts_in, "starts must be a sequence") : NULL;
    PyObject *lengths = starts ? PySequence_Fast(lengths_in, "lengths must be a sequence") : NULL;
    PyObject *offsets = lengths ? PySequence_Fast(offsets_in, "offsets must be a sequence") : NULL;
    PyObject *out = NULL;
    long long *start_v = NULL, *length_v = NULL;
    Py_buffer *bufs = NULL;
    char *got = NULL;
    Py_ssize_t n = 0;
    if (offsets == NULL) goto done;
    n = PySequence_Fast_GET_SIZE(starts);
    if (PySequence_Fast_GET_SIZE(views) < n || PySequence_Fast_GET_SIZE(lengths) < n ||
        (maps != NULL && PySequence_Fast_GET_SIZE(maps) < n)) {
        PyErr_SetString(PyExc_ValueError, "views, starts and lengths must have the same length");
        goto done;
    }
    start_v = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    length_v = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    bufs = PyMem_Calloc((size_t)n + 1, sizeof(Py_buffer));
    got = PyMem_Calloc((size_t)n + 1, 1);
    if (!start_v || !length_v || !bufs || !got) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        start_v[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(starts, i));
        length_v[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(lengths, i));
        if (PyErr_Occurred()) goto done;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(offsets);
    out = PyList_New(count);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < count; k++) {
        long long offset = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(offsets, k));
        if (offset == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto fail;
            PyErr_Clear(); /* beyond a Java long: no record there */
        }
        PyObject *item = Py_None;
        if (offset >= 0 && offset < max_offset && n > 0) {
            Py_ssize_t lo = 0, hi = n;
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (offset < start_v[mid]) hi = mid;
                else lo = mid + 1;
            }
            Py_ssize_t i = lo - 1;
            if (i >= 0) {
                if (!got[i]) {
                    if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(views, i), &bufs[i], PyBUF_SIMPLE) < 0)
                        goto fail;
                    got[i] = 1;
                    if (maps != NULL) {
                        /* The one size check of this file for this call, before anything of it is read. */
                        PyObject *mm = PySequence_Fast_GET_ITEM(maps, i);
                        long long mapped = length_v[i] > 0 ? length_v[i] : 0;
                        long long now = mm == Py_None ? 0 : current_size(mm, (Py_ssize_t)mapped);
                        if (now < 0) goto fail;
                        if (now < length_v[i]) {
                            PyObject *t = Py_BuildValue("(nL)", i, now);
                            if (t == NULL || PyList_Append(shrunk, t) < 0) {
                                Py_XDECREF(t);
                                goto fail;
                            }
                            Py_DECREF(t);
                            length_v[i] = now;
                        }
                    }
                }
                long long pos = offset - start_v[i];
                long long limit = length_v[i];
                if (bufs[i].len < limit) limit = bufs[i].len;
                if (max_offset - start_v[i] < limit) limit = max_offset - start_v[i];
                const unsigned char *b = bufs[i].buf;
                if (pos + RECORD_TOTAL_SIZE_WIDTH <= limit) {
                    int32_t size = be32(b + pos + RECORD_TOTAL_SIZE_AT);
                    if (size > 0 && pos + size <= limit && record_size(b, pos, pos + size) > 0) {
                        item = PySequence_GetSlice(PySequence_Fast_GET_ITEM(views, i), pos, pos + size);
                        if (item == NULL) goto fail;
                        PyList_SET_ITEM(out, k, item);
                        continue;
                    }
                }
            }
        }
        Py_INCREF(Py_None);
        PyList_SET_ITEM(out, k, Py_None);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    if (bufs != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            if (got[i]) PyBuffer_Release(&bufs[i]);
    PyMem_Free(bufs);
    PyMem_Free(got);
    PyMem_Free(start_v);
    PyMem_Free(length_v);
    Py_XDECREF(views);
    Py_XDECREF(starts);
    Py_XDECREF(lengths);
    Py_XDECREF(offsets);
    Py_XDECREF(maps);
    return out;
}

static PyObject *read_records(PyObject *self, PyObject *args) {
    PyObject *views_in, *starts_in, *lengths_in, *offsets_in;
    long long max_offset;
    if (!PyArg_ParseTuple(args, "OOOLO:read_records", &views_in, &starts_in, &lengths_in, &max_offset,
                          &offsets_in))
        return NULL;
    return read_impl(views_in, starts_in, lengths_in, max_offset, offsets_in, NULL, NULL);
}

static PyObject *read_checked(PyObject *self, PyObject *args) {
    PyObject *maps_in, *views_in, *starts_in, *lengths_in, *offsets_in;
    long long max_offset;
    if (!PyArg_ParseTuple(args, "OOOOLO:read_checked", &maps_in, &views_in, &starts_in, &lengths_in, &max_offset,
                          &offsets_in))
        return NULL;
    PyObject *shrunk = PyList_New(0);
    if (shrunk == NULL) return NULL;
    PyObject *records = read_impl(views_in, starts_in, lengths_in, max_offset, offsets_in, maps_in, shrunk);
    if (records == NULL) {
        Py_DECREF(shrunk);
        return NULL;
    }
    return Py_BuildValue("(NN)", records, shrunk);
}


/* ----------------------------------------------------------------------------------- query_files */

/* Append (file, kind, detail) to events; detail is a new reference (stolen). */
static int add_event(PyObject *events, Py_ssize_t file, int kind, PyObject *detail) {
    if (detail == NULL) return -1;
    PyObject *t = Py_BuildValue("(niN)", file, kind, detail);
    if (t == NULL) return -1;
    int rc = PyList_Append(events, t);
    Py_DECREF(t);
    return rc;
}

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

/* The file's readable length now: min(mm.size(), len(mm)), 0 when size() fails (closed, EIO). */
static Py_ssize_t current_size(PyObject *mm, Py_ssize_t mapped) {
    static PyObject *size_name = NULL;
    if (size_name == NULL && (size_name = PyUnicode_InternFromString("size")) == NULL) return -1;
    PyObject *v = PyObject_CallMethodNoArgs(mm, size_name);
    if (v == NULL) {
        if (PyErr_ExceptionMatches(PyExc_OSError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    Py_ssize_t now = PyLong_AsSsize_t(v);
    Py_DECREF(v);
    if (now == -1 && PyErr_Occurred()) return -1;
    return now < mapped ? now : mapped;
}

/* The file's size now by its descriptor (lseek to the end: no stat copy), cut to the map's length;
 * 0 when the descriptor is bad. */
static Py_ssize_t fd_size(int fd, Py_ssize_t mapped) {
    off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0) return 0;
    return end < (off_t)mapped ? (Py_ssize_t)end : mapped;
}

static PyObject *query_files(PyObject *self, PyObject *args) {
    PyObject *maps_in, *fds_in, *headers_in, *resume_in = Py_None;
    Py_ssize_t size, max_num, budget;
    long long hash_slot_num, index_num, begin, end, deadline = 0;
    int key_hash;
    if (!PyArg_ParseTuple(args, "OOOnLLinLLn|OL:query_files", &maps_in, &fds_in, &headers_in, &size, &hash_slot_num,
                          &index_num, &key_hash, &max_num, &begin, &end, &budget, &resume_in, &deadline))
        return NULL;
    /* A resume point (query_walk.Resume): where a budget stopped an earlier call. */
    Py_ssize_t r_file = -1, r_chain_visited = 0, r_visited = 0;
    long long r_entry = 0, r_count = 0, r_limit = 0, r_begin_ts = 0, r_begin_phy = 0, r_chain_start = 0;
    long long r_last_ts = 0, r_last_phy = 0;
    PyObject *r_offsets = NULL;
    if (resume_in != Py_None) {
        if (!PyArg_ParseTuple(resume_in, "nLLLLLLnOnLL:resume", &r_file, &r_entry, &r_count, &r_limit, &r_begin_ts,
                              &r_begin_phy, &r_chain_start, &r_chain_visited, &r_offsets, &r_visited, &r_last_ts,
                              &r_last_phy))
            return NULL;
    }
    if (hash_slot_num <= 0 || index_num <= 0 || hash_slot_num > (1LL << 40) ||
        size < INDEX_HEADER_SIZE + hash_slot_num * 4) {
        PyErr_SetString(PyExc_ValueError, "query_files: impossible geometry");
        return NULL;
    }
    PyObject *maps = PySequence_Fast(maps_in, "maps must be a sequence");
    if (maps == NULL) return NULL;
    PyObject *fds = PySequence_Fast(fds_in, "fds must be a sequence");
    if (fds == NULL) {
        Py_DECREF(maps);
        return NULL;
    }
    if (PySequence_Fast_GET_SIZE(fds) < PySequence_Fast_GET_SIZE(maps)) {
        PyErr_SetString(PyExc_ValueError, "query_files: a descriptor per map");
        Py_DECREF(maps);
        Py_DECREF(fds);
        return NULL;
    }
    PyObject *headers = NULL;
    if (headers_in != Py_None) {
        headers = PySequence_Fast(headers_in, "headers must be a sequence or None");
        if (headers == NULL) {
            Py_DECREF(maps);
            Py_DECREF(fds);
            return NULL;
        }
        if (PySequence_Fast_GET_SIZE(headers) < PySequence_Fast_GET_SIZE(maps)) {
            PyErr_SetString(PyExc_ValueError, "query_files: a header (or None) per map");
            Py_DECREF(maps);
            Py_DECREF(fds);
            Py_DECREF(headers);
            return NULL;
        }
    }
    PyObject *events = PyList_New(0);
    PyObject *point = NULL; /* the resume point returned when the budget stops the walk */
    walk_result all;
    memset(&all, 0, sizeof all);
    int exhausted = 0;
    long long last_ts = 0, last_phy = 0;
    Py_ssize_t entries_at = (Py_ssize_t)(INDEX_HEADER_SIZE + hash_slot_num * 4);
    Py_ssize_t slot_pos = (Py_ssize_t)(INDEX_HEADER_SIZE + ((uint32_t)key_hash % (uint64_t)hash_slot_num) * 4);
    if (key_hash < 0) /* Python's % is never negative; a key hash is, but keep the two alike anyway */
        slot_pos = (Py_ssize_t)(INDEX_HEADER_SIZE +
                                (((long long)key_hash % hash_slot_num + hash_slot_num) % hash_slot_num) * 4);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(maps);
    Py_ssize_t last = n - 1;
    Py_ssize_t first = last;
    if (events == NULL) goto fail;
    if (r_offsets != NULL) {
        if (r_file < 0 || r_file > last) {
            PyErr_SetString(PyExc_ValueError, "query_files: a resume point for other maps");
            goto fail;
        }
        PyObject *found = PySequence_Fast(r_offsets, "resume offsets must be a sequence");
        if (found == NULL) goto fail;
        for (Py_ssize_t k = 0; k < PySequence_Fast_GET_SIZE(found); k++) {
            long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(found, k));
            if ((v == -1 && PyErr_Occurred()) || push_offset(&all, v) < 0) {
                if (!PyErr_Occurred()) PyErr_NoMemory();
                Py_DECREF(found);
                goto fail;
            }
        }
        Py_DECREF(found);
        first = r_file;
        all.visited = r_visited;
        last_ts = r_last_ts;
        last_phy = r_last_phy;
    }
    for (Py_ssize_t i = first; i >= 0; i--) {
        PyObject *mm = PySequence_Fast_GET_ITEM(maps, i);
        Py_buffer view;
        /* The export is taken first and held for the whole file: an exported mmap refuses close(). */
        if (PyObject_GetBuffer(mm, &view, PyBUF_SIMPLE) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_ValueError)) goto fail;
            PyErr_Clear(); /* a closed map: nothing can be read */
            if (add_event(events, i, EVENT_SHORT, PyLong_FromLong(0)) < 0) goto fail;
            continue;
        }
        long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(fds, i));
        if (fd == -1 && PyErr_Occurred()) {
            PyBuffer_Release(&view);
            goto fail;
        }
        /* The map's export is held (taken above): its file cannot be closed, nor its fd reused. */
        Py_ssize_t now = fd < 0 || fd > INT32_MAX ? 0 : fd_size((int)fd, view.len);
        if (now < size) {
            PyBuffer_Release(&view);
            if (add_event(events, i, EVENT_SHORT, PyLong_FromSsize_t(now)) < 0) goto fail;
            continue;
        }
        const unsigned char *base = view.buf;
        long long h[6];
        /* The walk to run in this file: from entry `start`, with these header values. */
        long long start = -1, index_count = 0, limit = 0, chain_start = -1;
        Py_ssize_t chain_visited = 0;
        PyObject *given = headers != NULL ? PySequence_Fast_GET_ITEM(headers, i) : Py_None;
        if (r_offsets != NULL && i == first) {
            /* Continue the walk the budget stopped, with the header values it began with. */
            h[0] = r_begin_ts;
            h[2] = r_begin_phy;
            start = r_entry;
            index_count = r_count;
            limit = r_limit;
            chain_start = r_chain_start;
            chain_visited = r_chain_visited;
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
            last_ts = h[1];
            last_phy = h[3];
        }
        if (header_bad(h, hash_slot_num, index_num, i == last)) {
            PyBuffer_Release(&view);
            if (add_event(events, i, EVENT_HEADER, Py_BuildValue("(LLLLLL)", h[0], h[1], h[2], h[3], h[4], h[5])) < 0)
                goto fail;
            continue;
        }
        /* begin > end: no entry's time can match, so no chain is walked (the broker walks and finds none). */
        if (begin <= end && time_matched(h[0], h[1], begin, end)) {
            index_count = h[5];
            long long slot_value = be32(base + slot_pos);
            if (slot_value <= 0 || slot_value > index_count || index_count <= 1) {
                if (slot_value > index_count && index_count > 1) {
                    if (add_event(events, i, EVENT_SLOT, Py_BuildValue("(LL)", slot_value, index_count)) < 0) {
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
            walk(base, length, entries_at, start, (int32_t)key_hash, index_count, limit, h[0], h[2], begin, end,
                 max_num - all.count, budget - all.visited, chain_start, chain_visited, deadline, &r);
            Py_END_ALLOW_THREADS
            PyBuffer_Release(&view);
            all.visited += r.visited;
            int failed = r.nomem;
            for (Py_ssize_t k = 0; k < r.count && !failed; k++)
                if (push_offset(&all, r.offsets[k]) < 0) failed = 1;
            free(r.offsets);
            if (failed) {
                PyErr_NoMemory();
                goto fail;
            }
            if (r.forward && add_event(events, i, EVENT_CHAIN, PyLong_FromLongLong(r.forward)) < 0) goto fail;
            if (r.stop == STOP_ZEROED || r.stop == STOP_OUTSIDE) {
                if (add_event(events, i, r.stop, PyLong_FromLongLong(r.stop_entry)) < 0) goto fail;
            } else if (r.stop == STOP_BUDGET) {
                exhausted = 1;
                if (!r.forward) {
                    PyObject *found = PyTuple_New(all.count);
                    if (found == NULL) goto fail;
                    for (Py_ssize_t k = 0; k < all.count; k++) {
                        PyObject *v = PyLong_FromLongLong(all.offsets[k]);
                        if (v == NULL) {
                            Py_DECREF(found);
                            goto fail;
                        }
                        PyTuple_SET_ITEM(found, k, v);
                    }
                    point = Py_BuildValue("(nLLLLLLnNnLL)", i, r.stop_entry, index_count, limit, h[0], h[2],
                                          chain_start, chain_visited + r.visited, found, all.visited, last_ts,
                                          last_phy);
                    if (point == NULL) goto fail;
                }
                break;
            }
        }
        if (h[0] < begin || all.count >= max_num) break;
    }
    Py_DECREF(maps);
    Py_DECREF(fds);
    Py_XDECREF(headers);
    PyObject *offsets = PyList_New(all.count);
    if (offsets == NULL) {
        free(all.offsets);
        Py_DECREF(events);
        Py_XDECREF(point);
        return NULL;
    }
    for (Py_ssize_t k = 0; k < all.count; k++) {
        PyObject *v = PyLong_FromLongLong(all.offsets[k]);
        if (v == NULL) {
            free(all.offsets);
            Py_DECREF(offsets);
            Py_DECREF(events);
            Py_XDECREF(point);
            return NULL;
        }
        PyList_SET_ITEM(offsets, k, v);
    }
    free(all.offsets);
    if (point == NULL) point = Py_NewRef(Py_None);
    return Py_BuildValue("(NnOLLNN)", offsets, all.visited, exhausted ? Py_True : Py_False, last_ts, last_phy,
                         events, point);
fail:
    free(all.offsets);
    Py_XDECREF(point);
    Py_XDECREF(events);
    Py_DECREF(maps);
    Py_DECREF(fds);
    Py_XDECREF(headers);
    return NULL;
}

static PyMethodDef methods[] = {
    {"walk_chain", walk_chain, METH_VARARGS, "Compiled store.index.query_walk.walk_chain (GIL released)."},
    {"read_records", read_records, METH_VARARGS, "Compiled store.index.query_walk.read_records."},
    {"read_checked", read_checked, METH_VARARGS, "Compiled store.index.query_walk.read_checked."},
    {"query_files", query_files, METH_VARARGS, "Compiled store.index.query_walk.query_files."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.index._query_walk_fast",
    "Compiled twins of store.index.query_walk (see that module for the reference).", -1, methods,
};

PyMODINIT_FUNC PyInit__query_walk_fast(void) { return PyModule_Create(&module); }
