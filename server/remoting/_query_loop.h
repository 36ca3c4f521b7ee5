/*
 * The compiled QUERY_MESSAGE of the request path (issue 22): MessageStore.query_message (the
 * broker's three rounds of queryOffset, the sort, the records read and checked, the new end of the
 * range from the first record's store time), IndexService.query_offsets and query_walk.query_files
 * (one C loop shared with store/index/_query_walk_fast.c: store/index/_query_walk_core.h), and the
 * processor's answer (records capped to the frame's room, QUERY_NOT_FOUND when none is left),
 * written straight into the batch's output buffer. Included by server/remoting/_request_path_fast.c
 * after its answer templates, output buffer and answer_query (the Python callback, the reference).
 *
 * The Python path stays the reference and answers every query this loop is not sure of: before
 * anything is written the loop gives the query to the callback (which runs it again from the start,
 * with its logging) when the walk met anything the store would report (a file cut short, a garbage
 * header, a slot past indexCount, a forward link, a zeroed entry, an entry outside the file), when a
 * CommitLog file shrank under its map, when an index hit inside the CommitLog's range holds no whole
 * record (damage the store warns about), when the budget ran out and the pool cannot take over, or
 * on a Python error while reading a map (it is cleared: the reference meets it again).
 *
 * When the inline budget or deadline stops the walk, the query is handed to the pool by
 * `handoff`, with what MessageStore.query_message's resume point (QueryResume) holds: the pool
 * continues the walk where this one stopped, as it continues the Python path's inline walk.
 *
 * The batch's snapshot of the index (its maps, descriptors, a writer's headers, the geometry) and
 * the processor's parameters are asked of Python once per batch, at its first QUERY
 * (server/remoting/request_path.py, RequestPath._query_snapshot); the CommitLog's maps are the
 * batch's VIEW snapshot. Both are taken on the event loop, where refreshes run, so they hold for
 * the whole batch.
 */
#ifndef RMQ_QUERY_LOOP_H
#define RMQ_QUERY_LOOP_H

#include "_index_key_hash.h"
#include "_query_walk_core.h"

/* The snapshot tuple's fields (RequestPath._query_snapshot). */
enum {
    QS_MAPS, QS_FDS, QS_HEADERS, QS_SIZE, QS_SLOTS, QS_INDEX_NUM, QS_BATCH_MAX, QS_DEFAULT_MAX_NUM,
    QS_INLINE_BUDGET, QS_INLINE_NS, QS_HANDOFF, QS_CACHES, QS_FIELDS
};

/* A record found: where it is (file number, position in that file's buffer) and its size. */
typedef struct {
    Py_ssize_t file;
    long long pos;
    int32_t size;
} found_record;

enum { CL_UNTOUCHED, CL_HELD, CL_EMPTY };

/* The CommitLog files the batch's queries read, each size-checked once, at its first read
 * (query_walk.read_checked's rule, once per batch instead of once per query). */
typedef struct {
    Py_buffer *bufs;
    char *state; /* CL_UNTOUCHED, CL_HELD (its buffer held), CL_EMPTY (a closed map: nothing readable) */
    char *shrunk; /* found shorter than its map: every read of it is the Python path's */
    long long *readable;
    Py_ssize_t n;
} cl_reads;

static void cl_release(cl_reads *c)
{
    if (c->state != NULL)
        for (Py_ssize_t i = 0; i < c->n; i++)
            if (c->state[i] == CL_HELD)
                PyBuffer_Release(&c->bufs[i]);
    PyMem_Free(c->bufs);
    PyMem_Free(c->state);
    PyMem_Free(c->shrunk);
    PyMem_Free(c->readable);
    c->bufs = NULL;
    c->state = c->shrunk = NULL;
    c->readable = NULL;
}

static int cl_init(cl_reads *c, Py_ssize_t n)
{
    c->n = n;
    c->bufs = PyMem_Calloc((size_t)n + 1, sizeof(Py_buffer));
    c->state = PyMem_Calloc((size_t)n + 1, 1);
    c->shrunk = PyMem_Calloc((size_t)n + 1, 1);
    c->readable = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    if (c->bufs == NULL || c->state == NULL || c->shrunk == NULL || c->readable == NULL) {
        cl_release(c);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

typedef struct {
    int state; /* 0: not asked yet; 1: compiled; -1: every query to the Python callback */
    PyObject *snap;
    PyObject *maps, *fds, *headers; /* borrowed from snap; headers NULL when the files' own are read */
    PyObject *caches; /* borrowed from snap: each file's walked segments (IndexFile.segments), or NULL */
    Py_ssize_t size;
    long long slots, index_num, batch_max, default_max_num, inline_budget, inline_ns;
    int handoff; /* the pool can take a query the inline budget stopped */
    /* the CommitLog (answer_batch's VIEW snapshot), its starts and lengths as C arrays */
    PyObject *cmaps;
    long long *starts, *lengths;
    Py_ssize_t n_files;
    long long max_offset, min_offset;
    /* each file's size, checked once per batch (see answer_query_compiled) */
    cl_reads reads;
    Py_ssize_t *index_sizes;
    /* each file's given header, parsed once per batch (see qw_headers) */
    qw_headers index_headers;
    /* what the batch's compiled queries served (MessageStore._served) and answered */
    long long served_bytes, served_records, found, not_found;
} query_ctx;

static void query_ctx_clear(query_ctx *q)
{
    cl_release(&q->reads);
    PyMem_Free(q->index_sizes);
    q->index_sizes = NULL;
    PyMem_Free(q->index_headers.values);
    PyMem_Free(q->index_headers.known);
    q->index_headers.values = NULL;
    q->index_headers.known = NULL;
    Py_CLEAR(q->snap);
    PyMem_Free(q->starts);
    PyMem_Free(q->lengths);
    q->starts = q->lengths = NULL;
}

/* Ask Python for the batch's snapshot (once): 0, or -1 with an error set. */
static int query_ctx_ready(query_ctx *q, PyObject *snapshot_fn, PyObject *cmaps, PyObject *cstarts,
                           PyObject *clengths, long long max_offset)
{
    q->state = -1;
    PyObject *snap = PyObject_CallNoArgs(snapshot_fn);
    if (snap == NULL)
        return -1;
    if (snap == Py_None) {
        Py_DECREF(snap);
        return 0;
    }
    q->snap = snap;
    if (!PyTuple_Check(snap) || PyTuple_GET_SIZE(snap) != QS_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "the query snapshot is a tuple of its fields");
        return -1;
    }
    q->maps = PyTuple_GET_ITEM(snap, QS_MAPS);
    q->fds = PyTuple_GET_ITEM(snap, QS_FDS);
    q->headers = PyTuple_GET_ITEM(snap, QS_HEADERS);
    if (q->headers == Py_None)
        q->headers = NULL;
    q->caches = PyTuple_GET_ITEM(snap, QS_CACHES);
    if (!PyList_Check(q->caches))
        q->caches = NULL;
    if (!PyList_Check(q->maps) || !PyList_Check(q->fds) || (q->headers != NULL && !PyList_Check(q->headers))) {
        PyErr_SetString(PyExc_TypeError, "the query snapshot's maps, descriptors and headers are lists");
        return -1;
    }
    long long size, handoff;
    if (view_as_int64(PyTuple_GET_ITEM(snap, QS_SIZE), &size) < 0 ||
        view_as_int64(PyTuple_GET_ITEM(snap, QS_SLOTS), &q->slots) < 0 ||
        view_as_int64(PyTuple_GET_ITEM(snap, QS_INDEX_NUM), &q->index_num) < 0 ||
        view_as_int64(PyTuple_GET_ITEM(snap, QS_BATCH_MAX), &q->batch_max) < 0 ||
        view_as_int64(PyTuple_GET_ITEM(snap, QS_DEFAULT_MAX_NUM), &q->default_max_num) < 0 ||
        view_as_int64(PyTuple_GET_ITEM(snap, QS_INLINE_BUDGET), &q->inline_budget) < 0 ||
        view_as_int64(PyTuple_GET_ITEM(snap, QS_INLINE_NS), &q->inline_ns) < 0 ||
        view_as_int64(PyTuple_GET_ITEM(snap, QS_HANDOFF), &handoff) < 0)
        return -1;
    q->size = (Py_ssize_t)size;
    q->handoff = handoff != 0;
    Py_ssize_t n = PyList_GET_SIZE(cstarts);
    if (PyList_GET_SIZE(clengths) < n || PyList_GET_SIZE(cmaps) < n) {
        PyErr_SetString(PyExc_ValueError, "the CommitLog snapshot's lists differ in length");
        return -1;
    }
    q->starts = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    q->lengths = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    if (q->starts == NULL || q->lengths == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (view_as_int64(PyList_GET_ITEM(cstarts, i), &q->starts[i]) < 0 ||
            view_as_int64(PyList_GET_ITEM(clengths, i), &q->lengths[i]) < 0)
            return -1;
    Py_ssize_t n_index = PyList_GET_SIZE(q->maps);
    q->index_sizes = PyMem_Malloc(((size_t)n_index + 1) * sizeof(Py_ssize_t));
    if (q->index_sizes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n_index; i++)
        q->index_sizes[i] = -1;
    if (q->headers != NULL) {
        q->index_headers.values = PyMem_Malloc(((size_t)n_index + 1) * sizeof *q->index_headers.values);
        q->index_headers.known = PyMem_Calloc((size_t)n_index + 1, 1);
        if (q->index_headers.values == NULL || q->index_headers.known == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    if (cl_init(&q->reads, n) < 0)
        return -1;
    q->cmaps = cmaps;
    q->n_files = n;
    q->max_offset = max_offset;
    q->min_offset = n ? q->starts[0] : 0; /* CommitLog.min_offset */
    q->state = 1;
    return 0;
}

#define Q_FOUND 1
#define Q_NONE 0
#define Q_UNSURE 2 /* for the Python path (nothing to report here: it reports) */

/* The whole record at `offset` (query_walk._read_one over read_checked's lengths): Q_FOUND with *rec,
 * Q_NONE, Q_UNSURE (the file shrank: the store reports it), or -1 with an error set. */
static int cl_read(const query_ctx *q, cl_reads *c, long long offset, found_record *rec)
{
    if (offset < 0 || offset >= q->max_offset || q->n_files == 0)
        return Q_NONE;
    Py_ssize_t lo = 0, hi = q->n_files;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (offset < q->starts[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    Py_ssize_t i = lo - 1;
    if (i < 0)
        return Q_NONE;
    if (c->state[i] == 0) {
        PyObject *mm = PyList_GET_ITEM(q->cmaps, i);
        long long mapped = q->lengths[i] > 0 ? q->lengths[i] : 0, now = 0;
        c->state[i] = CL_EMPTY;
        if (mm != Py_None) {
            if (PyObject_GetBuffer(mm, &c->bufs[i], PyBUF_SIMPLE) == 0)
                c->state[i] = CL_HELD;
            else if (PyErr_ExceptionMatches(PyExc_ValueError))
                PyErr_Clear(); /* closed: its size reads as 0 below */
            else
                return -1;
        }
        /* The one size check of this file for this batch, before anything of it is read. */
        if (view_current_size(mm, size_name, &now) < 0)
            return -1;
        if (now > mapped)
            now = mapped;
        long long limit = now;
        if (c->state[i] == CL_HELD && (long long)c->bufs[i].len < limit)
            limit = (long long)c->bufs[i].len;
        if (c->state[i] != CL_HELD)
            limit = 0;
        c->readable[i] = limit;
        c->shrunk[i] = now < q->lengths[i];
    }
    if (c->shrunk[i])
        return Q_UNSURE; /* shrunk under the map: CommitLog.read_records reports it */
    long long pos = offset - q->starts[i];
    long long limit = c->readable[i];
    if (q->max_offset - q->starts[i] < limit)
        limit = q->max_offset - q->starts[i];
    if (pos + RECORD_TOTAL_SIZE_WIDTH > limit)
        return Q_NONE;
    const unsigned char *b = c->bufs[i].buf;
    int32_t size = be32(b + pos + RECORD_TOTAL_SIZE_AT);
    if (size <= 0 || pos + size > limit || record_size(b, (Py_ssize_t)pos, (Py_ssize_t)(pos + size)) <= 0)
        return Q_NONE;
    rec->file = i;
    rec->pos = pos;
    rec->size = size;
    return Q_FOUND;
}

static int cmp_offsets(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The answer to a query: the records (capped to max_body), or QUERY_NOT_FOUND. 0 or -1 (error set). */
static int put_query_answer(out_buf *out, long long opaque, long long ts, long long phy, const cl_reads *c,
                            const found_record *recs, Py_ssize_t n, long long max_body, int *success)
{
    Py_ssize_t take = 0;
    long long body_n = 0;
    for (; take < n; take++) { /* query_message.cap_records */
        if (body_n + recs[take].size > max_body)
            break;
        body_n += recs[take].size;
    }
    hole_values v;
    set_hole(&v, HOLE_OPAQUE, opaque);
    set_hole(&v, HOLE_TIMESTAMP, ts);
    set_hole(&v, HOLE_PHYOFFSET, phy);
    const template_t *t = &templates[take ? T_QUERY_FOUND : T_QUERY_NOT_FOUND];
    Py_ssize_t header_n = template_size(t, &v);
    if (ob_need(out, 8 + header_n + (Py_ssize_t)body_n) < 0)
        return -1;
    put_be32(out, (uint32_t)(4 + header_n + body_n));
    put_be32(out, (uint32_t)header_n);
    put_template(out, t, &v);
    for (Py_ssize_t k = 0; k < take; k++)
        put(out, (const char *)c->bufs[recs[k].file].buf + recs[k].pos, recs[k].size);
    *success = take > 0;
    return 0;
}

/* The key's index hash from the header's UTF-8 text; *topic and *key are set (new references) when
 * the text had to be decoded (not ASCII). 0, 1 when it is not valid UTF-8 (the reference decides),
 * or -1 with an error set. */
static int query_key_hash(const request_t *req, int32_t *hash, PyObject **topic, PyObject **key)
{
    int ascii = 1;
    for (Py_ssize_t i = 0; i < req->topic_n && ascii; i++)
        ascii = req->topic[i] < 0x80;
    for (Py_ssize_t i = 0; i < req->key_n && ascii; i++)
        ascii = req->key[i] < 0x80;
    if (ascii) {
        int32_t h = java_hash_ascii(0, req->topic, req->topic_n);
        h = java_hash_ascii(h, (const unsigned char *)"#", 1);
        *hash = java_index_hash(java_hash_ascii(h, req->key, req->key_n));
        return 0;
    }
    *topic = PyUnicode_DecodeUTF8((const char *)req->topic, req->topic_n, "strict");
    *key = *topic ? PyUnicode_DecodeUTF8((const char *)req->key, req->key_n, "strict") : NULL;
    if (*key == NULL) {
        Py_CLEAR(*topic);
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return -1;
        PyErr_Clear();
        return 1;
    }
    int32_t h = java_hash_str(0, *topic);
    h = java_hash_ascii(h, (const unsigned char *)"#", 1);
    *hash = java_index_hash(java_hash_str(h, *key));
    return 0;
}

/* Hand a query the inline budget stopped to the pool: handoff(opaque, topic, key, max_num, begin, end,
 * state) answers bytes (a whole answer frame: refused, SYSTEM_BUSY) or None (answered later, from a
 * task); state is QueryResume's values and the resume point. 0 or -1 (error set). */
static int query_handoff(out_buf *out, const request_t *req, PyObject *handoff, PyObject *topic, PyObject *key,
                         long long max_num, PyObject *state)
{
    PyObject *r = PyObject_CallFunction(handoff, "LOOLLLO", req->opaque, topic, key, max_num, req->begin, req->end,
                                        state);
    if (r == NULL)
        return -1;
    int rc = -1;
    if (r == Py_None)
        rc = 0;
    else if (PyBytes_Check(r)) {
        if (ob_need(out, PyBytes_GET_SIZE(r)) == 0) {
            put(out, PyBytes_AS_STRING(r), PyBytes_GET_SIZE(r));
            rc = 0;
        }
    } else
        PyErr_SetString(PyExc_TypeError, "the query hand-off answers bytes or None");
    Py_DECREF(r);
    return rc;
}

/* One QUERY_MESSAGE, compiled: 0 (answered, handed off, or given to the Python callback `fallback`
 * as answer_query does), or -1 with an error set; *leave as answer_query sets it. */
static int answer_query_compiled(out_buf *out, const request_t *req, query_ctx *q, PyObject *fallback,
                                 PyObject *handoff, long long max_body, int *leave)
{
    PyObject *topic = NULL, *key = NULL;
    int32_t key_hash;
    int k = query_key_hash(req, &key_hash, &topic, &key);
    if (k != 0) {
        if (k < 0)
            return -1;
        *leave = 1; /* not UTF-8: the reference decides (nothing has run yet) */
        return 0;
    }
    long long max_num = req->unique ? q->default_max_num : req->max_num;
    long long capped = max_num < q->batch_max ? max_num : q->batch_max;
    int rc = -1, unsure = 0, exhausted = 0;
    PyObject *state = NULL;
    long long visited = 0, ts = 0, phy = 0, last_query_time = req->end;
    int64_t *sorted = NULL;
    found_record *recs = NULL;
    Py_ssize_t n_found = 0;
    cl_reads *c = &q->reads;
    if (capped < 0) {
        unsure = 1; /* QueryArgumentError: the processor answers it */
        goto answered;
    }
    long long deadline = q->inline_ns > 0 ? monotonic_ns() + q->inline_ns : 0;
    for (int round = 0; round < 3; round++) {
        long long visited_before = visited;
        qw_outcome o;
        if (qw_query_files(q->maps, q->fds, q->headers, q->size, q->slots, q->index_num, key_hash, (Py_ssize_t)capped,
                           req->begin, last_query_time, (Py_ssize_t)(q->inline_budget - visited_before), NULL, NULL,
                           0, deadline, q->index_sizes, q->caches,
                           q->index_headers.known != NULL ? &q->index_headers : NULL, &o) < 0) {
            PyErr_Clear(); /* the reference meets it again */
            unsure = 1;
            break;
        }
        if (o.n_events) {
            qw_outcome_free(&o);
            unsure = 1; /* the store reports what the walk met */
            break;
        }
        visited += o.all.visited;
        exhausted = o.exhausted;
        if (exhausted) {
            if (!q->handoff) {
                qw_outcome_free(&o);
                unsure = 1; /* the partial answer is the reference's to give */
                break;
            }
            PyObject *point = Py_NewRef(Py_None);
            if (o.have_point) {
                const qw_point *p = &o.point;
                PyObject *so_far = PyTuple_New(o.all.count);
                for (Py_ssize_t j = 0; so_far != NULL && j < o.all.count; j++) {
                    PyObject *v = PyLong_FromLongLong(o.all.offsets[j]);
                    if (v == NULL)
                        Py_CLEAR(so_far);
                    else
                        PyTuple_SET_ITEM(so_far, j, v);
                }
                Py_DECREF(point);
                point = so_far == NULL ? NULL
                                       : Py_BuildValue("(nLLLLLLnNnLL)", p->file, p->entry, p->index_count, p->limit,
                                                       p->begin_ts, p->begin_phy, p->chain_start, p->chain_visited,
                                                       so_far, p->visited, p->last_ts, p->last_phy);
            }
            /* QueryResume's values (the answer's last-update values as the earlier rounds left them)
             * and the key hash and capped maxNum of its ResumePoint's query. */
            state = point == NULL ? NULL
                                  : Py_BuildValue("(iLLLLiLN)", round, last_query_time, visited_before, ts, phy,
                                                  (int)key_hash, capped, point);
            if (state == NULL) {
                qw_outcome_free(&o);
                goto done;
            }
        }
        if (o.all.count == 0) {
            qw_outcome_free(&o);
            break;
        }
        Py_ssize_t n = o.all.count;
        sorted = o.all.offsets;
        o.all.offsets = NULL;
        qw_outcome_free(&o);
        qsort(sorted, (size_t)n, sizeof(int64_t), cmp_offsets);
        ts = o.last_ts;
        phy = o.last_phy;
        recs = PyMem_Calloc((size_t)n, sizeof(found_record));
        if (recs == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        n_found = 0;
        for (Py_ssize_t j = 0; j < n && !unsure; j++) {
            int got = cl_read(q, c, sorted[j], &recs[n_found]);
            if (got < 0) {
                PyErr_Clear();
                unsure = 1;
            } else if (got == Q_UNSURE) {
                unsure = 1;
            } else if (got == Q_FOUND) {
                if (j == 0) {
                    const unsigned char *b = (const unsigned char *)c->bufs[recs[0].file].buf + recs[0].pos;
                    last_query_time = be64(b + record_store_timestamp_at(be32(b + RECORD_SYS_FLAG_AT)));
                }
                n_found++;
            } else if (q->min_offset <= sorted[j] && sorted[j] < q->max_offset) {
                unsure = 1; /* damage inside the CommitLog: MessageStore warns */
            }
        }
        free(sorted);
        sorted = NULL;
        if (unsure || n_found || exhausted)
            break;
        PyMem_Free(recs);
        recs = NULL;
        if (last_query_time < req->begin)
            break;
    }
answered:
    if (unsure) {
        Py_CLEAR(state);
        PyMem_Free(recs);
        Py_XDECREF(topic);
        Py_XDECREF(key);
        return answer_query(out, req, fallback, max_body, leave);
    }
    long long body = 0;
    for (Py_ssize_t j = 0; j < n_found; j++)
        body += recs[j].size;
    q->served_bytes += body + 4096 * (long long)n_found;
    q->served_records += n_found + visited;
    if (exhausted) {
        if (topic == NULL) {
            topic = PyUnicode_DecodeUTF8((const char *)req->topic, req->topic_n, "strict");
            key = topic ? PyUnicode_DecodeUTF8((const char *)req->key, req->key_n, "strict") : NULL;
            if (key == NULL)
                goto done;
        }
        rc = query_handoff(out, req, handoff, topic, key, max_num, state);
        goto done;
    }
    int success = 0;
    rc = put_query_answer(out, req->opaque, ts, phy, c, recs, n_found, max_body, &success);
    if (rc == 0) {
        if (success)
            q->found++;
        else
            q->not_found++;
    }
done:
    free(sorted);
    Py_XDECREF(state);
    PyMem_Free(recs);
    Py_XDECREF(topic);
    Py_XDECREF(key);
    return rc;
}

#endif
