/*
 * The compiled request path's offset family (issue 22), included by _request_path_fast.c:
 * SEARCH_OFFSET_BY_TIMESTAMP (29), GET_MAX_OFFSET (30), GET_MIN_OFFSET (31) and
 * GET_EARLIEST_MSG_STORETIME (32), answered from a consume queue's maps as
 * server/remoting/processors/queue_offsets.py answers them through store.MessageStore (the reference:
 * max_offset, min_offset, earliest_message_time, offset_by_time of store/consumequeue/consume_queue.py,
 * the store time read as store_time_picker and CommitLog.select read it).
 *
 * What is read, and why it is the Python path's snapshot: the queue is the store's opened
 * ConsumeQueue (QueueTable's dict of opened queues, looked up by (topic, queueId) as QueueTable.get
 * looks it up first; a queue not opened yet is left to the Python path, which opens it or makes up
 * the empty one), and of it the attributes the Python reads use (_files, _starts, _min_logic_offset,
 * mapped_file_size; of each file start, written, view, mtime_ms). They are replaced only by
 * ConsumeQueue.refresh(), on the event loop, and this code holds the GIL and calls no Python code
 * that could refresh between its reads, so a writer appending to the files (this process's write
 * path, or a live broker) shows only up to each file's `written` of the last refresh, exactly as on
 * the Python path. The CommitLog bytes a store time is read from come from the same view_snapshot()
 * the VIEWs of the batch use (maps, starts, mapped lengths, written end), with CommitLog.select's
 * rules: the file by offset (offset 0 falls back to the first file), its current size asked of the
 * map, nothing past min(current size, written end) read.
 *
 * Taken only when every field is plain (see offsets_fields) and the queue is opened; a file
 * that shrank (the reference reports it), a released view, a partial entry or any Python error is
 * left to the Python path before anything of the frame is written (nothing here has side effects).
 */
#ifndef RMQ_REQUEST_PATH_OFFSETS_H
#define RMQ_REQUEST_PATH_OFFSETS_H

#include "_record_layout.h"

#define SEARCH_OFFSET_BY_TIMESTAMP 29
#define GET_MAX_OFFSET 30
#define GET_MIN_OFFSET 31
#define GET_EARLIEST_MSG_STORETIME 32
#define N_OFFSET_CODES 4
/* The counts list: per code 29..32, the total answered (pulls included), then the pulls' found,
 * records, bytes, slowest scan in ms, and SUCCESS answers (_request_path_pull.h). */
#define N_COUNTS (N_OFFSET_CODES + 6)
#define CQ_UNIT 20

/* The request's extFields, as far as they were read. */
typedef struct {
    const unsigned char *topic;
    Py_ssize_t topic_n;
    long long queue_id, timestamp;
    int has_timestamp;
} offsets_req_t;

/* extFields of the family: exactly topic (a string without escapes or control characters), queueId
 * (plain digits, at most 9, no leading zero) and optionally timestamp (plain digits, at most 19, no
 * leading zero, at most Long.MAX_VALUE), bname (a string: RpcRequestHeader's broker name, which a
 * 4.9.7 client sends and the reference ignores) and ReqT (a string: the request type a lite pull
 * consumer adds to every request, ignored as by the broker; _request_path_pull.h), in any order,
 * nothing else. */
enum { O_TOPIC, O_QUEUE_ID, O_TIMESTAMP, O_BNAME, O_REQ_TYPE, N_OFFSETS_FIELDS };
static const field_spec offsets_fields[N_OFFSETS_FIELDS] = {
    [O_TOPIC] = FIELD("topic", FIELD_TEXT, 0, offsetof(offsets_req_t, topic), offsetof(offsets_req_t, topic_n)),
    [O_QUEUE_ID] = FIELD("queueId", FIELD_NUMBER, 9, offsetof(offsets_req_t, queue_id), 0),
    [O_TIMESTAMP] = FIELD("timestamp", FIELD_NUMBER, 19, offsetof(offsets_req_t, timestamp), 0),
    [O_BNAME] = FIELD("bname", FIELD_IGNORED, 0, 0, 0),
    [O_REQ_TYPE] = FIELD("ReqT", FIELD_IGNORED, 0, 0, 0),
};

static int offsets_fields_of(const ext_fields *e, offsets_req_t *q)
{
    unsigned seen;
    if (!match_fields(e, offsets_fields, N_OFFSETS_FIELDS, BIT(O_TOPIC) | BIT(O_QUEUE_ID), q, &seen))
        return UNSURE;
    q->has_timestamp = (seen & BIT(O_TIMESTAMP)) != 0;
    return SURE;
}

/* The answer templates (bind_offsets): SUCCESS with {"offset"}, SUCCESS with {"timestamp"}, and a
 * pull's FOUND (_request_path_pull.h: its holes nextBeginOffset, minOffset, maxOffset are numbered
 * HOLE_OFFSET, HOLE_TIMESTAMP, HOLE_PHYOFFSET). */
enum { T_OFFSET, T_TIMESTAMP, T_PULL, N_OFFSET_TEMPLATES };
static template_t offset_templates[N_OFFSET_TEMPLATES];
static int offsets_bound = 0;

static PyObject *n_files, *n_starts, *n_min_logic, *n_file_size, *n_start, *n_written, *n_view, *n_mtime,
    *n_commitlog;

/* What one batch reads, taken from answer_batch's arguments and its offsets context
 * (queues, commitlog, commitlog file size, counts) made by request_path.py. */
typedef struct {
    PyObject *queues;      /* dict (topic, queue id) -> ConsumeQueue */
    PyObject *commitlog;   /* the queues' CommitLog (each queue's must be this one) */
    long long cl_file_size;
    PyObject *counts;      /* list of N_COUNTS ints, written back at the end */
    PyObject *pulls;       /* the pulls' context (_request_path_pull.h), or None */
    PyObject *maps, *starts, *lengths; /* the CommitLog snapshot of the batch */
    long long max_offset;
    long long answered[N_OFFSET_CODES];
} offsets_ctx_t;

/* 1 with ctx filled, 0 when there is no context (the family is left to the Python path), -1 on error. */
static int offsets_ctx_init(offsets_ctx_t *ctx, PyObject *arg, PyObject *const *args, long long max_offset)
{
    memset(ctx, 0, sizeof *ctx);
    if (arg == NULL || arg == Py_None || !offsets_bound)
        return 0;
    if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != 5 || !PyDict_Check(PyTuple_GET_ITEM(arg, 0)) ||
        !PyList_Check(PyTuple_GET_ITEM(arg, 3)) || PyList_GET_SIZE(PyTuple_GET_ITEM(arg, 3)) != N_COUNTS) {
        PyErr_SetString(PyExc_TypeError,
                        "the offsets context is (queues dict, commitlog, file size, counts list, pulls)");
        return -1;
    }
    ctx->queues = PyTuple_GET_ITEM(arg, 0);
    ctx->commitlog = PyTuple_GET_ITEM(arg, 1);
    if (view_as_int64(PyTuple_GET_ITEM(arg, 2), &ctx->cl_file_size) < 0)
        return -1;
    if (ctx->cl_file_size <= 0) {
        PyErr_SetString(PyExc_ValueError, "the CommitLog file size must be positive");
        return -1;
    }
    ctx->counts = PyTuple_GET_ITEM(arg, 3);
    ctx->pulls = PyTuple_GET_ITEM(arg, 4);
    ctx->maps = args[2];
    ctx->starts = args[3];
    ctx->lengths = args[4];
    ctx->max_offset = max_offset;
    return 1;
}

static inline int is_offsets_code(long long code)
{
    return code >= SEARCH_OFFSET_BY_TIMESTAMP && code <= GET_EARLIEST_MSG_STORETIME;
}


/* An int attribute as a long long: 0, or -1 with an error set. */
static int attr_int64(PyObject *obj, PyObject *name, long long *out)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int rc = PyLong_Check(v) ? view_as_int64(v, out) : -1;
    if (rc < 0 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "an int attribute expected");
    Py_DECREF(v);
    return rc;
}

/* One consume queue as its Python reads see it. files and starts are strong references. */
typedef struct {
    PyObject *files, *starts;
    long long min_logic, file_size;
} cq_t;

static void cq_release(cq_t *q)
{
    Py_CLEAR(q->files);
    Py_CLEAR(q->starts);
}

#define O_ANSWERED 1
#define O_LEAVE 0

/* The opened queue for the request: O_ANSWERED (q filled), O_LEAVE (not opened, not ours, or a topic
 * that is not UTF-8), -1 with an error set. */
static int cq_find_topic(const offsets_ctx_t *ctx, PyObject *topic, long long queue_id, cq_t *q);

/* A request's text as a str, decoded strictly as the reference decoder does: NULL with *leave set
 * when it is not UTF-8 (the reference decides), NULL with an error set otherwise. */
static PyObject *decode_text(const unsigned char *s, Py_ssize_t n, int *leave)
{
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (text == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *leave = 1;
    }
    return text;
}

static int cq_find(const offsets_ctx_t *ctx, const offsets_req_t *r, cq_t *q)
{
    memset(q, 0, sizeof *q);
    int leave = 0;
    PyObject *topic = decode_text(r->topic, r->topic_n, &leave);
    if (topic == NULL)
        return leave ? O_LEAVE : -1;
    int rc = cq_find_topic(ctx, topic, r->queue_id, q);
    Py_DECREF(topic);
    return rc;
}

/* The opened queue (topic, queue_id), as cq_find. */
static int cq_find_topic(const offsets_ctx_t *ctx, PyObject *topic, long long queue_id, cq_t *q)
{
    memset(q, 0, sizeof *q);
    PyObject *key = Py_BuildValue("(OL)", topic, queue_id);
    if (key == NULL)
        return -1;
    PyObject *queue = PyDict_GetItemWithError(ctx->queues, key); /* borrowed */
    Py_DECREF(key);
    if (queue == NULL)
        return PyErr_Occurred() ? -1 : O_LEAVE;
    Py_INCREF(queue);
    int rc = -1;
    PyObject *cl = PyObject_GetAttr(queue, n_commitlog);
    if (cl == NULL)
        goto done;
    int same = cl == ctx->commitlog;
    Py_DECREF(cl);
    if (!same) {
        rc = O_LEAVE;
        goto done;
    }
    q->files = PyObject_GetAttr(queue, n_files);
    q->starts = q->files ? PyObject_GetAttr(queue, n_starts) : NULL;
    if (q->starts == NULL || attr_int64(queue, n_min_logic, &q->min_logic) < 0 ||
        attr_int64(queue, n_file_size, &q->file_size) < 0)
        goto done;
    if (!PyList_Check(q->files) || !PyList_Check(q->starts) || PyList_GET_SIZE(q->files) != PyList_GET_SIZE(q->starts) ||
        q->file_size <= 0 || q->min_logic < 0) {
        rc = O_LEAVE;
        goto done;
    }
    rc = O_ANSWERED;
done:
    Py_DECREF(queue);
    if (rc != O_ANSWERED)
        cq_release(q);
    return rc;
}

/* ConsumeQueue.max_offset. */
static int cq_max_offset(const cq_t *q, long long *out)
{
    Py_ssize_t n = PyList_GET_SIZE(q->files);
    *out = 0;
    if (n == 0)
        return 0;
    PyObject *f = PyList_GET_ITEM(q->files, n - 1);
    long long start, written;
    if (attr_int64(f, n_start, &start) < 0 || attr_int64(f, n_written, &written) < 0)
        return -1;
    if (start < 0 || written < 0)
        return 1; /* not a queue the Python reads could state: leave it */
    *out = (start + written) / CQ_UNIT;
    return 0;
}

/* A file's entries: its view's buffer (released by the caller) and `written`. 0, 1 (leave) or -1. */
static int cq_file_view(PyObject *f, Py_buffer *buf, long long *written)
{
    if (attr_int64(f, n_written, written) < 0)
        return -1;
    PyObject *view = PyObject_GetAttr(f, n_view);
    if (view == NULL)
        return -1;
    int rc = PyObject_GetBuffer(view, buf, PyBUF_SIMPLE);
    Py_DECREF(view);
    if (rc < 0) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear(); /* a released view: the reference raises, answered its way */
        return 1;
    }
    if (*written < 0 || *written > (long long)buf->len) {
        PyBuffer_Release(buf);
        return 1;
    }
    return 0;
}

/* CommitLog.select(offset, size) over the batch's snapshot: 1 found (sel->buf holds the map's buffer,
 * the bytes at sel->pos; cl_sel_release it), 0 none, 2 leave (a shrunk file: the reference reports it),
 * -1 error. `checked` (or NULL): the index of a file whose size was already asked in this request,
 * -1 for none; set to the file asked now (read_records' rule: each file once per request). */
typedef struct {
    PyObject *mm;
    Py_buffer buf;
    int have_buf;
    long long pos;
} cl_sel_t;

static void cl_sel_release(cl_sel_t *sel)
{
    if (sel->have_buf)
        PyBuffer_Release(&sel->buf);
    sel->have_buf = 0;
    Py_CLEAR(sel->mm);
}

static int cl_select(const offsets_ctx_t *ctx, long long offset, long long size, cl_sel_t *sel, Py_ssize_t *checked)
{
    sel->mm = NULL;
    sel->have_buf = 0;
    Py_ssize_t n = PyList_GET_SIZE(ctx->starts);
    if (n == 0 || size < 0)
        return 0;
    if (PyList_GET_SIZE(ctx->maps) != n || PyList_GET_SIZE(ctx->lengths) != n)
        return 2;
    Py_ssize_t i;
    if (view_bisect(ctx->starts, offset, &i) < 0)
        return -1;
    long long start = 0;
    if (i >= 0 && view_as_int64(PyList_GET_ITEM(ctx->starts, i), &start) < 0)
        return -1;
    if (i < 0 || offset - start >= ctx->cl_file_size) {
        if (offset != 0)
            return 0;
        i = 0; /* offset 0 falls back to the first file */
        if (view_as_int64(PyList_GET_ITEM(ctx->starts, 0), &start) < 0)
            return -1;
    }
    long long length;
    if (view_as_int64(PyList_GET_ITEM(ctx->lengths, i), &length) < 0)
        return -1;
    PyObject *mm = PyList_GET_ITEM(ctx->maps, i);
    Py_INCREF(mm);
    sel->mm = mm;
    if (mm != Py_None) {
        if (PyObject_GetBuffer(mm, &sel->buf, PyBUF_SIMPLE) == 0)
            sel->have_buf = 1;
        else if (PyErr_ExceptionMatches(PyExc_ValueError))
            PyErr_Clear();
        else
            return -1;
    }
    if (checked == NULL || *checked != i) {
        long long now;
        if (view_current_size(mm, size_name, &now) < 0)
            return -1;
        if (now < length)
            return 2; /* shrunk: the reference says so once, and reads the rest */
        if (checked != NULL)
            *checked = i;
    }
    long long pos = offset % ctx->cl_file_size;
    if (pos < 0)
        pos += ctx->cl_file_size; /* Python's modulo (offset 0 is the only one that can get here) */
    long long readable = length, to_end = ctx->max_offset - start;
    if (to_end < readable)
        readable = to_end;
    if (pos + size > readable)
        return 0;
    if (pos + size > (sel->have_buf ? (long long)sel->buf.len : 0))
        return 2; /* a map shorter than its length: not a case the reference meets */
    sel->pos = pos;
    return 1;
}

/* store_time_picker(commitlog)(offset, size): 0 with *t the store time or -1, 2 leave, -1 error. */
static int store_time(const offsets_ctx_t *ctx, long long offset, long long size, long long *t)
{
    *t = -1;
    if (PyList_GET_SIZE(ctx->starts) == 0)
        return 0;
    long long first;
    if (view_as_int64(PyList_GET_ITEM(ctx->starts, 0), &first) < 0)
        return -1;
    if (offset < first)
        return 0;
    cl_sel_t sel;
    int rc = cl_select(ctx, offset, size, &sel, NULL);
    if (rc == 1) {
        rc = 0;
        const unsigned char *rec = (const unsigned char *)sel.buf.buf + sel.pos;
        if (size >= RECORD_SYS_FLAG_AT + 4) { /* up to the end of SYSFLAG: where STORETIMESTAMP is */
            long long at = record_store_timestamp_at(view_be32(rec + RECORD_SYS_FLAG_AT));
            if (size >= at + RECORD_STORE_TIMESTAMP_WIDTH)
                *t = view_be64(rec + at);
        }
    }
    cl_sel_release(&sel);
    return rc;
}

/* The queue file holding `byte_offset` (a logical offset times CQ_UNIT), viewed: 0 with *buf held
 * (the caller releases it), *pos the entry's position in it and *written where its entries end;
 * 2 no file holds it; 1 leave (cq_file_view's); -1 error. */
static int cq_locate(const cq_t *q, long long byte_offset, Py_buffer *buf, long long *pos, long long *written)
{
    Py_ssize_t i;
    if (view_bisect(q->starts, byte_offset, &i) < 0)
        return -1;
    if (i < 0)
        return 2;
    PyObject *f = PyList_GET_ITEM(q->files, i);
    long long start;
    if (attr_int64(f, n_start, &start) < 0)
        return -1;
    if (byte_offset >= start + q->file_size)
        return 2;
    int rc = cq_file_view(f, buf, written);
    if (rc != 0)
        return rc;
    *pos = byte_offset % q->file_size;
    return 0;
}

/* The entry at logical `offset` (ConsumeQueue.entry): 0 found (*phy, *size), 2 none, 1 leave, -1 error. */
static int cq_entry(const cq_t *q, long long offset, long long *phy, long long *size)
{
    if (offset < 0 || offset > LLONG_MAX / CQ_UNIT)
        return 2;
    long long byte_offset = offset * CQ_UNIT;
    if (byte_offset < q->min_logic)
        return 2;
    Py_buffer buf;
    long long pos, written;
    int rc = cq_locate(q, byte_offset, &buf, &pos, &written);
    if (rc != 0)
        return rc;
    if (pos >= written)
        rc = 2;
    else if (written - pos < CQ_UNIT)
        rc = 1; /* a partial entry: the reference's unpack fails */
    else {
        const unsigned char *e = (const unsigned char *)buf.buf + pos;
        *phy = view_be64(e);
        *size = view_be32(e + 8);
        rc = 0;
    }
    PyBuffer_Release(&buf);
    return rc;
}

static inline long long java_labs_diff(long long a, long long b)
{
    long long d = (long long)((unsigned long long)a - (unsigned long long)b);
    return d == LLONG_MIN ? d : (d < 0 ? -d : d);
}

/* ConsumeQueue.offset_by_time: 0 with *out, 1 leave, -1 error. */
static int cq_offset_by_time(const offsets_ctx_t *ctx, const cq_t *q, long long timestamp, long long *out)
{
    *out = 0;
    Py_ssize_t n = PyList_GET_SIZE(q->files);
    if (n == 0)
        return 0;
    PyObject *f = PyList_GET_ITEM(q->files, n - 1);
    for (Py_ssize_t k = 0; k < n; k++) {
        long long mtime;
        if (attr_int64(PyList_GET_ITEM(q->files, k), n_mtime, &mtime) < 0)
            return -1;
        if (mtime >= timestamp) {
            f = PyList_GET_ITEM(q->files, k);
            break;
        }
    }
    long long start;
    if (attr_int64(f, n_start, &start) < 0)
        return -1;
    Py_buffer buf;
    long long written;
    int rc = cq_file_view(f, &buf, &written);
    if (rc != 0)
        return rc;
    if (written <= 0)
        goto done;
    if (written % CQ_UNIT) {
        rc = 1;
        goto done;
    }
    long long low = q->min_logic > start ? q->min_logic - start : 0;
    long long high = written - CQ_UNIT;
    long long target = -1, left = -1, right = -1, left_value = -1, right_value = -1;
    /* _commitlog_min_offset: the first CommitLog file's start, -1 without files */
    long long min_phy = -1;
    if (PyList_GET_SIZE(ctx->starts) && view_as_int64(PyList_GET_ITEM(ctx->starts, 0), &min_phy) < 0) {
        rc = -1;
        goto done;
    }
    while (high >= low) {
        long long mid = (low + high) / (2 * CQ_UNIT) * CQ_UNIT;
        if (mid < 0 || mid + CQ_UNIT > written) {
            rc = 1;
            goto done;
        }
        const unsigned char *e = (const unsigned char *)buf.buf + mid;
        long long phy = view_be64(e), size = view_be32(e + 8);
        if (phy < min_phy) {
            low = mid + CQ_UNIT;
            left = mid;
            continue;
        }
        long long t;
        rc = store_time(ctx, phy, size, &t);
        if (rc != 0)
            goto done;
        if (t < 0)
            goto done; /* *out = 0 */
        if (t == timestamp) {
            target = mid;
            break;
        }
        if (t > timestamp) {
            high = mid - CQ_UNIT;
            right = mid;
            right_value = t;
        } else {
            low = mid + CQ_UNIT;
            left = mid;
            left_value = t;
        }
    }
    long long offset;
    if (target != -1)
        offset = target;
    else if (left_value == -1)
        offset = right;
    else if (right_value == -1)
        offset = left;
    else
        offset = java_labs_diff(timestamp, left_value) > java_labs_diff(timestamp, right_value) ? right : left;
    *out = (start + offset) / CQ_UNIT; /* Java's division truncates, as C's does */
done:
    PyBuffer_Release(&buf);
    return rc;
}

/* One request of the family: O_ANSWERED (its answer in out), O_LEAVE (nothing written: the Python
 * path answers it), -1 with an error set. */
static int answer_offsets(out_buf *out, offsets_ctx_t *ctx, long long code, long long opaque, const offsets_req_t *r)
{
    if ((code == SEARCH_OFFSET_BY_TIMESTAMP) != (r->has_timestamp != 0))
        return O_LEAVE;
    cq_t q;
    int found = cq_find(ctx, r, &q);
    if (found != O_ANSWERED)
        return found;
    long long value = 0;
    int rc = 0;
    switch (code) {
    case GET_MAX_OFFSET:
        rc = cq_max_offset(&q, &value);
        break;
    case GET_MIN_OFFSET:
        value = q.min_logic / CQ_UNIT;
        break;
    case GET_EARLIEST_MSG_STORETIME: {
        long long phy = 0, size = 0;
        value = -1;
        rc = cq_entry(&q, q.min_logic / CQ_UNIT, &phy, &size);
        if (rc == 2)
            rc = 0;
        else if (rc == 0)
            rc = store_time(ctx, phy, size, &value);
        break;
    }
    default:
        rc = cq_offset_by_time(ctx, &q, r->timestamp, &value);
    }
    cq_release(&q);
    if (rc < 0)
        return -1;
    if (rc > 0)
        return O_LEAVE;
    hole_values v;
    set_hole(&v, HOLE_OPAQUE, opaque);
    const template_t *t;
    if (code == GET_EARLIEST_MSG_STORETIME) {
        t = &offset_templates[T_TIMESTAMP];
        set_hole(&v, HOLE_TIMESTAMP, value);
    } else {
        t = &offset_templates[T_OFFSET];
        set_hole(&v, HOLE_OFFSET, value);
    }
    Py_ssize_t header_n = template_size(t, &v);
    if (ob_need(out, 8 + header_n) < 0)
        return -1;
    put_be32(out, (uint32_t)(4 + header_n));
    put_be32(out, (uint32_t)header_n);
    put_template(out, t, &v);
    ctx->answered[code - SEARCH_OFFSET_BY_TIMESTAMP]++;
    return O_ANSWERED;
}

/* One template (pieces, holes) into t. 0, or -1 with an error set. */
static int template_from(PyObject *spec, template_t *t)
{
    PyObject *pieces, *holes;
    if (!PyArg_ParseTuple(spec, "O!O!", &PyTuple_Type, &pieces, &PyTuple_Type, &holes))
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(pieces);
    if (n < 1 || n > MAX_PIECES || PyTuple_GET_SIZE(holes) != n - 1) {
        PyErr_SetString(PyExc_ValueError, "a template is 1..8 pieces and one hole between each two");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *piece = PyTuple_GET_ITEM(pieces, i);
        if (!PyBytes_Check(piece)) {
            PyErr_SetString(PyExc_TypeError, "template pieces are bytes");
            return -1;
        }
        t->pieces[i] = Py_NewRef(piece);
        t->n_pieces = (int)i + 1;
        if (i + 1 < n) {
            long hole = PyLong_AsLong(PyTuple_GET_ITEM(holes, i));
            if (hole < 0 || hole >= N_HOLES) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_ValueError, "unknown hole");
                return -1;
            }
            t->holes[i] = (int)hole;
        }
    }
    return 0;
}

/* bind_offsets(offset_answer, timestamp_answer, pull_found): each (pieces, holes), as bind()'s. */
static PyObject *bind_offsets(PyObject *self, PyObject *args)
{
    (void)self;
    if (PyTuple_GET_SIZE(args) != N_OFFSET_TEMPLATES) {
        PyErr_Format(PyExc_TypeError, "bind_offsets() takes %d templates", N_OFFSET_TEMPLATES);
        return NULL;
    }
    if (n_files == NULL) {
        n_files = PyUnicode_InternFromString("_files");
        n_starts = PyUnicode_InternFromString("_starts");
        n_min_logic = PyUnicode_InternFromString("_min_logic_offset");
        n_file_size = PyUnicode_InternFromString("mapped_file_size");
        n_start = PyUnicode_InternFromString("start");
        n_written = PyUnicode_InternFromString("written");
        n_view = PyUnicode_InternFromString("view");
        n_mtime = PyUnicode_InternFromString("mtime_ms");
        n_commitlog = PyUnicode_InternFromString("commitlog");
        if (!n_files || !n_starts || !n_min_logic || !n_file_size || !n_start || !n_written || !n_view ||
            !n_mtime || !n_commitlog)
            return NULL;
    }
    template_t fresh[N_OFFSET_TEMPLATES];
    memset(fresh, 0, sizeof fresh);
    for (int k = 0; k < N_OFFSET_TEMPLATES; k++)
        if (template_from(PyTuple_GET_ITEM(args, k), &fresh[k]) < 0)
            goto fail;
    for (int k = 0; k < N_OFFSET_TEMPLATES; k++) {
        for (int i = 0; i < offset_templates[k].n_pieces; i++)
            Py_CLEAR(offset_templates[k].pieces[i]);
        offset_templates[k] = fresh[k];
    }
    offsets_bound = 1;
    Py_RETURN_NONE;
fail:
    for (int k = 0; k < N_OFFSET_TEMPLATES; k++)
        for (int i = 0; i < fresh[k].n_pieces; i++)
            Py_CLEAR(fresh[k].pieces[i]);
    return NULL;
}

#endif
