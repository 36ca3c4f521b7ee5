/*
 * The key query's walks over the IndexFiles, stated once for the compiled code that needs them:
 * store/index/_query_walk_fast.c (the twins of store/index/query_walk.py: walk_chain, read_records,
 * query_files) and the compiled QUERY_MESSAGE of server/remoting/_request_path_fast.c
 * (server/remoting/_query_loop.h), which runs the whole store query in C. The rules and the safety
 * contract are query_walk.py's and _query_walk_fast.c's header comment's; this file holds the code:
 *   walk()            one chain walk (IndexFile.selectPhyOffset's loop, budget, deadline, loop guard),
 *                     passing over cached walked segments that hold no answer and no stop ("Walked
 *                     segments" below: the rule, and why the answer is the plain walk's)
 *   seg_cache_open/add  a file's segment cache (IndexFile.segments), with the GIL held
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

/* A walked chain segment (see "Walked segments" below): SEG_LEN entries from `start` along the chain,
 * `next` the entry after them, `min_diff` their smallest time diff, and the start entry's own hash,
 * time diff and prevIndex (checked again before the segment is skipped). */
typedef struct {
    int32_t start, next, count, min_diff, start_hash, start_diff, start_prev, pad;
} qw_seg;

/* The segments cached for the walk's chain (sorted by start, newest first), read-only during the walk. */
typedef struct {
    const qw_seg *segs;
    Py_ssize_t n;
    int record; /* record new segments (the file's cache is not full) */
} seg_cache_in;

typedef struct {
    int64_t *offsets;
    Py_ssize_t count, cap;
    Py_ssize_t visited;
    int stop;
    long long stop_entry, forward;
    int nomem;
    /* segments this walk went through cleanly (newest first), for the caller to cache */
    qw_seg *new_segs;
    Py_ssize_t n_new, cap_new;
    int cache_bad; /* a cached segment's start entry no longer holds what was recorded */
    Py_ssize_t skipped; /* entries passed over by cached segments (counted in visited too) */
} walk_result;

static int push_seg(walk_result *r, const qw_seg *s) {
    if (r->n_new == r->cap_new) {
        Py_ssize_t cap = r->cap_new ? r->cap_new * 2 : 16;
        qw_seg *grown = realloc(r->new_segs, (size_t)cap * sizeof(qw_seg));
        if (grown == NULL) return -1;
        r->new_segs = grown;
        r->cap_new = cap;
    }
    r->new_segs[r->n_new++] = *s;
    return 0;
}

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

/* Walked segments (issue 22, hotkey22). A query over a narrow time range on a hot key walks every
 * entry of the chain newer than `end` (the chain is linked from its newest entry), and asks the same
 * of the same chain every time. Index entries are immutable once written (a writer appends entries
 * and moves the slot's head; new entries only go in front of a chain, whose old entries stay its
 * tail), so what a stretch of a chain holds is known for good once a walk went through it:
 *   a segment = SEG_LEN entries from entry `start` along the chain, each read by the walk with a
 *   time diff >= 0 and a prevIndex followed strictly backwards (> 0, < the entry itself: no bad,
 *   self or forward link, not zeroed, not in the loop guard's mode), `next` the entry after them,
 *   `min_diff` the smallest of their time diffs.
 * A later walk standing at a segment's start goes straight to `next`, counting SEG_LEN entries as
 * visited, exactly when the plain walk could not have taken or stopped at any of them:
 *   - min_diff > hi: no entry's time is <= end, so none is taken (whatever its hash), and
 *     min_diff >= lo (and >= 0): none is older than begin, so none ends the walk;
 *   - every link is backwards and > 0, so no prevIndex ends it (its entries are below `start`, which
 *     the walk reached within indexCount and limit; indexCount never shrinks for a file that grows),
 *     none is zeroed (a zeroed entry links to 0) and none lies outside the file (below `start`);
 *   - visited + SEG_LEN <= budget: the plain walk would not have stopped for the budget inside it,
 *     so a budget stop, its entry and its resume point are the plain walk's; the deadline is looked
 *     at when visited passes a multiple of DEADLINE_EVERY;
 *   - the walk is not in the loop guard's mode (no forward link met yet): the guard's replay from
 *     chain_start follows the file's real links for chain_visited + visited entries, which the skip
 *     keeps equal to the plain walk's count;
 *   - the start entry, read again, still holds the hash, time diff and prevIndex recorded (one read
 *     per SEG_LEN entries): a file rewritten in place shows here and the cache is dropped.
 * The answer (offsets, order, visited, stop, resume point) is therefore the plain walk's. Segments
 * are recorded only past the first SEG_AFTER entries of a chain, so ordinary walks record nothing.
 * The caller (qw_query_files) keeps them per file and chain with the GIL held, in a dict the
 * IndexFile owns (IndexFile.segments), checks the file's header against the one they were recorded
 * under, and stops recording at SEG_CAP segments per file. */
#define SEG_LEN 64
#define SEG_AFTER 256
#define SEG_CAP 4096

/* SEG_LEN and SEG_AFTER as the walks use them: tests set smaller ones (_set_segment_rules) so that
 * short chains record segments too; a recorded segment keeps its own length. */
static int qw_seg_len = SEG_LEN;
static long long qw_seg_after = SEG_AFTER;

/* Entries passed over by cached segments in this process (updated with the GIL held): for tests and
 * benchmarks to see the cache used (store.index._query_walk_fast.segments_skipped()). */
static long long qw_segments_skipped = 0;

static void walk(const unsigned char *base, Py_ssize_t length, Py_ssize_t entries_at, long long start,
                 int32_t key_hash, long long index_count, long long limit, long long begin_ts,
                 long long begin_phy, long long begin, long long end, Py_ssize_t room, Py_ssize_t budget,
                 long long chain_start, Py_ssize_t chain_visited, long long deadline, const seg_cache_in *cache,
                 walk_result *r) {
    long long current = start;
    seen_set seen = {NULL, 0};
    Py_ssize_t next_look = DEADLINE_EVERY;
    /* the cached segments: segs[k] is the first whose start is not above `current` */
    const qw_seg *segs = cache != NULL ? cache->segs : NULL;
    Py_ssize_t n_segs = cache != NULL ? cache->n : 0, k = 0;
    int record = cache != NULL && cache->record;
    int seg_len = qw_seg_len;
    qw_seg seg; /* the segment being recorded: seg_n entries so far */
    int seg_n = 0;
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
        int late = 0;
        if (deadline > 0 && r->visited >= next_look) {
            /* every DEADLINE_EVERY entries (a skipped segment may pass one: looked at right after) */
            next_look = r->visited - r->visited % DEADLINE_EVERY + DEADLINE_EVERY;
            late = monotonic_ns() >= deadline;
        }
        if (r->visited >= budget || late) {
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
        if (n_segs > 0 && seen.bits == NULL) {
            while (k < n_segs && segs[k].start > current) k++;
            if (k < n_segs && segs[k].start == current) {
                const qw_seg *s = &segs[k];
                if (be32(e) != s->start_hash || be32(e + 12) != s->start_diff || be32(e + 16) != s->start_prev ||
                    s->next <= 0 || s->next >= current || s->count <= 0) {
                    r->cache_bad = 1; /* not what was recorded: walk on plainly, the caller drops the cache */
                    n_segs = 0;
                    record = 0;
                } else if (s->min_diff > hi && s->min_diff >= lo && s->min_diff >= 0 &&
                           r->visited + s->count <= budget) {
                    r->visited += s->count;
                    r->skipped += s->count;
                    seg_n = 0; /* cached already: nothing to record here */
                    current = s->next;
                    continue;
                } else {
                    seg_n = 0; /* walked plainly: recorded again from here (the caller keeps one per start) */
                }
            }
        }
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
        if (record && prev < current && seen.bits == NULL && chain_visited + r->visited > qw_seg_after) {
            /* a clean step (time diff >= 0, link > 0 and backwards): part of the segment being recorded */
            if (seg_n == 0) {
                seg = (qw_seg){(int32_t)current, 0, 0, time_diff, hash_read, time_diff, prev, 0};
            } else if (time_diff < seg.min_diff) {
                seg.min_diff = time_diff;
            }
            if (++seg_n == seg_len) {
                seg.next = prev;
                seg.count = seg_len;
                if (push_seg(r, &seg) < 0) record = 0; /* out of memory: record no more; the walk goes on */
                seg_n = 0;
            }
        }
        if (prev > current || seen.bits != NULL) {
            seg_n = 0;
            record = 0;
            n_segs = 0; /* the loop guard's mode: plain walking from here on */
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

static PyObject *qw_py_segments_skipped(PyObject *self, PyObject *unused) {
    return PyLong_FromLongLong(qw_segments_skipped);
}

/* For tests: the segment length and the chain position after which segments are recorded; returns
 * the previous pair. */
static PyObject *qw_py_set_segment_rules(PyObject *self, PyObject *args) {
    int length;
    long long after;
    if (!PyArg_ParseTuple(args, "Li:_set_segment_rules", &after, &length)) return NULL;
    if (length < 1 || after < 0) {
        PyErr_SetString(PyExc_ValueError, "_set_segment_rules: length >= 1, after >= 0");
        return NULL;
    }
    PyObject *old = Py_BuildValue("(Li)", qw_seg_after, qw_seg_len);
    qw_seg_after = after;
    qw_seg_len = length;
    return old;
}

/* The two above in a module's method table (each module including this file has its own walks). */
#define QW_SEGMENT_METHODS                                                                                    \
    {"segments_skipped", qw_py_segments_skipped, METH_NOARGS,                                                 \
     "Index entries passed over by cached walked segments in this module's walks (this process)."},          \
    {"_set_segment_rules", qw_py_set_segment_rules, METH_VARARGS,                                             \
     "For tests: (after, length) of the walked segments recorded; returns the previous pair."},

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

/* -- the walked segments' cache of one file (a dict the IndexFile owns; every access holds the GIL) --
 * key -1: bytes of four int64 (the header's beginTimestamp and beginPhyOffset the segments were
 * recorded under, the largest indexCount seen, the number of segments held); key slot: bytes of that
 * slot's chain's qw_seg array, sorted by start, newest first, one segment per start. A cache error is
 * cleared and the walk runs without it (the cache never changes an answer, so it can always be left
 * out). */

/* The slot's segments to walk with (*held: a new reference to their bytes, or NULL), after checking
 * the file's header against the cache's: other begin values, or an indexCount gone down (a file
 * zeroed or rewritten in place: RELIABILITY.md), drop the cache; a resumed walk (which keeps the
 * header values it began with) just walks without it. 1 to use the cache, 0 not to. */
static int seg_cache_open(PyObject *cache, long long begin_ts, long long begin_phy, long long index_count,
                          int resumed, long long slot, PyObject **held, long long *meta_out) {
    *held = NULL;
    if (PyDict_GET_SIZE(cache) == 0) {
        /* nothing cached yet (most files, most of the time): no lookup; the header values are
         * written with the first segments (seg_cache_add) */
        long long m[4] = {begin_ts, begin_phy, index_count, 0};
        memcpy(meta_out, m, sizeof m);
        return 1;
    }
    PyObject *mkey = PyLong_FromLong(-1);
    if (mkey == NULL) goto error;
    PyObject *meta = PyDict_GetItemWithError(cache, mkey); /* borrowed */
    if (meta == NULL && PyErr_Occurred()) {
        Py_DECREF(mkey);
        goto error;
    }
    long long m[4] = {begin_ts, begin_phy, index_count, 0};
    if (meta != NULL && PyBytes_CheckExact(meta) && PyBytes_GET_SIZE(meta) == (Py_ssize_t)sizeof m) {
        long long old[4];
        memcpy(old, PyBytes_AS_STRING(meta), sizeof old);
        if (old[0] != begin_ts || old[1] != begin_phy || old[2] > index_count) {
            if (resumed && old[0] == begin_ts && old[1] == begin_phy) {
                Py_DECREF(mkey);
                return 0;
            }
            PyDict_Clear(cache);
            meta = NULL;
        } else {
            m[3] = old[3];
            if (old[2] == index_count) {
                memcpy(meta_out, m, sizeof m);
                meta = Py_None; /* unchanged: not written again */
            }
        }
    } else if (meta != NULL) {
        PyDict_Clear(cache);
        meta = NULL;
    }
    if (meta != Py_None) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)m, sizeof m);
        if (b == NULL || PyDict_SetItem(cache, mkey, b) < 0) {
            Py_XDECREF(b);
            Py_DECREF(mkey);
            goto error;
        }
        Py_DECREF(b);
    }
    Py_DECREF(mkey);
    memcpy(meta_out, m, sizeof m);
    PyObject *skey = PyLong_FromLongLong(slot);
    if (skey == NULL) goto error;
    PyObject *segs = PyDict_GetItemWithError(cache, skey);
    Py_DECREF(skey);
    if (segs == NULL && PyErr_Occurred()) goto error;
    if (segs != NULL && PyBytes_CheckExact(segs) && PyBytes_GET_SIZE(segs) % (Py_ssize_t)sizeof(qw_seg) == 0)
        *held = Py_NewRef(segs);
    return 1;
error:
    PyErr_Clear();
    return 0;
}

/* Add a walk's new segments (newest first) to the slot's, one per start, up to SEG_CAP per file. The
 * dict is read again here (other threads may have added or dropped segments while this walk ran
 * without the GIL): nothing is added when it is another header's since; an empty one takes this
 * walk's header values. */
static void seg_cache_add(PyObject *cache, long long slot, const qw_seg *add, Py_ssize_t n_add, long long begin_ts,
                          long long begin_phy, long long index_count) {
    PyObject *mkey = NULL, *skey = NULL, *out = NULL, *b = NULL;
    long long meta[4];
    if (n_add <= 0) return;
    if ((mkey = PyLong_FromLong(-1)) == NULL || (skey = PyLong_FromLongLong(slot)) == NULL) goto done;
    PyObject *m = PyDict_GetItemWithError(cache, mkey); /* borrowed */
    if (m == NULL && !PyErr_Occurred() && PyDict_GET_SIZE(cache) == 0) {
        /* the file's first segments: the header they hold for */
        meta[0] = begin_ts, meta[1] = begin_phy, meta[2] = index_count, meta[3] = 0;
    } else if (m == NULL || !PyBytes_CheckExact(m) || PyBytes_GET_SIZE(m) != (Py_ssize_t)sizeof meta) {
        goto done;
    } else {
        memcpy(meta, PyBytes_AS_STRING(m), sizeof meta);
    }
    Py_ssize_t room = SEG_CAP - (Py_ssize_t)meta[3];
    if (meta[0] != begin_ts || meta[1] != begin_phy || room <= 0) goto done;
    PyObject *held = PyDict_GetItemWithError(cache, skey); /* borrowed; not used across a call into Python */
    if (held == NULL && PyErr_Occurred()) goto done;
    if (held != NULL && (!PyBytes_CheckExact(held) || PyBytes_GET_SIZE(held) % (Py_ssize_t)sizeof(qw_seg) != 0))
        held = NULL;
    const qw_seg *old = held != NULL ? (const qw_seg *)PyBytes_AS_STRING(held) : NULL;
    Py_ssize_t n_old = held != NULL ? PyBytes_GET_SIZE(held) / (Py_ssize_t)sizeof(qw_seg) : 0;
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(qw_seg) * (n_old + n_add));
    if (out == NULL) goto done;
    qw_seg *o = (qw_seg *)PyBytes_AS_STRING(out);
    Py_ssize_t i = 0, j = 0, n = 0, added = 0;
    int32_t last = INT32_MAX;
    while (i < n_old || j < n_add) {
        const qw_seg *s;
        int fresh = 0;
        if (j >= n_add || (i < n_old && old[i].start >= add[j].start)) {
            s = &old[i++];
        } else {
            s = &add[j++];
            fresh = 1;
        }
        if (n > 0 && s->start >= last) continue; /* one per start (and kept sorted) */
        if (fresh) {
            if (added >= room) continue;
            added++;
        }
        o[n++] = *s;
        last = s->start;
    }
    if (added == 0) goto done; /* nothing new: nothing to write */
    if (_PyBytes_Resize(&out, (Py_ssize_t)sizeof(qw_seg) * n) < 0) goto done;
    meta[3] += added;
    if ((b = PyBytes_FromStringAndSize((const char *)meta, sizeof meta)) == NULL) goto done;
    if (PyDict_SetItem(cache, skey, out) < 0 || PyDict_SetItem(cache, mkey, b) < 0) {
        PyDict_Clear(cache); /* the count could be wrong: start over */
        goto done;
    }
done: /* and every way out: a cache error is cleared */
    Py_XDECREF(mkey);
    Py_XDECREF(skey);
    Py_XDECREF(out);
    Py_XDECREF(b);
    PyErr_Clear();
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
    Py_ssize_t skipped; /* of those, entries passed over by cached segments */
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

/* A writer's headers (the snapshot's tuples) as one batch of queries has read them: values[i] holds
 * file i's six header values once known[i] is set. The tuples are the batch's snapshot and cannot
 * change, so each is parsed once per batch instead of once per query and file (under serve
 * --writable the parse was ~6.7k instructions of a ~56k QUERY, every file's header being given). */
typedef struct {
    long long (*values)[6];
    unsigned char *known;
} qw_headers;

/* query_walk.query_files over maps, fds and headers (sequences from PySequence_Fast; headers NULL
 * when the files' own are read), continuing from `resume` (with `resume_offsets`, the offsets it had
 * found) when not NULL. 0 with *o filled (free it with qw_outcome_free), or -1 with an error set.
 * The GIL is held, and released around each chain walk.
 * `sizes` (NULL, or one per map, -1 for not yet known) keeps each file's checked size for a caller
 * that runs many queries over one snapshot (the request path, per batch): a file's size is then
 * asked once per batch instead of once per query; `parsed` (NULL, or one per map) keeps the given
 * headers' values the same way. */
static int qw_query_files(PyObject *maps, PyObject *fds, PyObject *headers, Py_ssize_t size, long long hash_slot_num,
                          long long index_num, int32_t key_hash, Py_ssize_t max_num, long long begin, long long end,
                          Py_ssize_t budget, const qw_point *resume, const int64_t *resume_offsets,
                          Py_ssize_t n_resume_offsets, long long deadline, Py_ssize_t *sizes, PyObject *caches,
                          qw_headers *parsed, qw_outcome *o) {
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
    if (caches != NULL && PySequence_Fast_GET_SIZE(caches) < n) caches = NULL;
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
        if (given != Py_None && parsed != NULL && parsed->known[i]) {
            memcpy(h, parsed->values[i], sizeof h);
        } else if (given != Py_None) {
            if (!PyArg_ParseTuple(given, "LLLLLL:header", &h[0], &h[1], &h[2], &h[3], &h[4], &h[5])) {
                PyBuffer_Release(&view);
                goto fail;
            }
            if (parsed != NULL) {
                memcpy(parsed->values[i], h, sizeof h);
                parsed->known[i] = 1;
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
            /* The file's walked segments (see "Walked segments"): looked up and added with the GIL
             * held; the walk reads its slot's immutable bytes, held by a reference, without it. */
            PyObject *cache = caches != NULL ? Py_NewRef(PySequence_Fast_GET_ITEM(caches, i)) : NULL;
            PyObject *held = NULL;
            long long meta[4] = {0, 0, 0, 0};
            long long slot = (long long)((slot_pos - INDEX_HEADER_SIZE) / 4);
            seg_cache_in cin = {NULL, 0, 0};
            int cached = cache != NULL && PyDict_CheckExact(cache) &&
                         seg_cache_open(cache, h[0], h[2], index_count, resume != NULL && i == first, slot, &held, meta);
            if (cached) {
                cin.segs = held != NULL ? (const qw_seg *)PyBytes_AS_STRING(held) : NULL;
                cin.n = held != NULL ? PyBytes_GET_SIZE(held) / (Py_ssize_t)sizeof(qw_seg) : 0;
                cin.record = meta[3] < SEG_CAP;
            }
            Py_BEGIN_ALLOW_THREADS
            walk(base, length, entries_at, start, key_hash, index_count, limit, h[0], h[2], begin, end,
                 max_num - o->all.count, budget - o->all.visited, chain_start, chain_visited, deadline,
                 cached ? &cin : NULL, &r);
            Py_END_ALLOW_THREADS
            PyBuffer_Release(&view);
            if (cached) {
                if (r.cache_bad)
                    PyDict_Clear(cache);
                else if (r.n_new > 0)
                    seg_cache_add(cache, slot, r.new_segs, r.n_new, h[0], h[2], index_count);
            }
            Py_XDECREF(held);
            Py_XDECREF(cache);
            free(r.new_segs);
            o->skipped += r.skipped;
            qw_segments_skipped += r.skipped;
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
