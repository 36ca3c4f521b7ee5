/*
 * The compiled request path's PULL_MESSAGE (11), included by _request_path_fast.c after
 * _request_path_offsets.h (whose queue lookup and CommitLog.select it shares). Only under
 * `serve --writable` (a registered server: PullMessageProcessor with a BrokerController), whose
 * Python path answers a pull that does not wait synchronously, in the connection's order; read-only,
 * the Python path answers a pull from a task, after the read's other answers, so it stays there.
 *
 * The one branch taken here is the common one, reproduced byte for byte from
 * server/remoting/processors/pull_message.py (_first_pass -> pull_once -> _pull_registered -> _read)
 * and store/consumequeue/get_message.py: every check passes and the store finds messages (FOUND).
 *   1. the header is plain (pull_fields);
 *   2. plan(group, topic, queueId, sysFlag, subVersion, subscription, expressionType), the
 *      processor's plain_pull, answers (tag filter,): the checks of _pull_registered pass, found
 *      without a side effect (no group is auto-created); None, or an error, leaves the frame;
 *   3. the queue is opened (cq_find_topic) and getMessage's scan, run here over the queue's file and
 *      the CommitLog snapshot (pull_scan), ends FOUND; any other status (no message, offset moved,
 *      not matched, removing: long polling, the OFFSET_MOVED_EVENT, their own codes) leaves the frame,
 *      as do a record gone from the CommitLog (retention), a shrunk CommitLog file, a partial
 *      entry or a released view. Nothing has had a side
 *      effect up to here, so the Python path answers a left frame whole.
 *   4. With the commit-offset flag, commit(group, topic, queueId, commitOffset, opaque): the
 *      processor's commit, where _pull_registered commits (after the read); it answers None, or the
 *      frame of the answer the Python path gives when the commit fails (then written instead).
 *   5. The answer: SUCCESS, remark FOUND, the response fields in the JSON order (template T_PULL),
 *      the records' bytes as the body. The store's served-bytes accounting, PullStats and the
 *      /metrics counts are made by request_path.py per read from the counts this code returns.
 */
#ifndef RMQ_REQUEST_PATH_PULL_H
#define RMQ_REQUEST_PATH_PULL_H

#include <time.h>

#define PULL_MESSAGE 11
#define PULL_COMMIT_OFFSET_FLAG 0x1

typedef struct {
    const unsigned char *group, *topic, *subscription, *expression_type;
    Py_ssize_t group_n, topic_n, subscription_n, expression_type_n;
    long long queue_id, queue_offset, max_msg_nums, sys_flag, commit_offset, suspend, sub_version;
} pull_req_t;

/* extFields of a PULL: exactly the nine @CFNotNull fields (consumerGroup, topic: strings without
 * escapes or control characters; queueId, maxMsgNums, sysFlag: plain digits, at most 9; queueOffset,
 * commitOffset, suspendTimeoutMillis, subVersion: at most 19, at most Long.MAX_VALUE; no leading
 * zeros) and optionally subscription, expressionType, bname and ReqT (strings; bname is
 * RpcRequestHeader's broker name, which a 4.9.7 client sends; ReqT the request type a client with
 * enableStreamRequestType adds to every request, StreamTypeRPCHook's "0": a DefaultLitePullConsumer's;
 * the reference ignores both, as the 4.9.7 broker does), in any order, nothing else. */
enum {
    P_GROUP, P_TOPIC, P_QUEUE_ID, P_QUEUE_OFFSET, P_MAX_MSG_NUMS, P_SYS_FLAG, P_COMMIT_OFFSET, P_SUSPEND,
    P_SUB_VERSION, P_SUBSCRIPTION, P_EXPRESSION_TYPE, P_BNAME, P_REQ_TYPE, N_PULL_FIELDS
};
#define PULL_TEXT(name, field) FIELD(name, FIELD_TEXT, 0, offsetof(pull_req_t, field), offsetof(pull_req_t, field##_n))
#define PULL_NUMBER(name, digits, field) FIELD(name, FIELD_NUMBER, digits, offsetof(pull_req_t, field), 0)
static const field_spec pull_fields[N_PULL_FIELDS] = {
    [P_GROUP] = PULL_TEXT("consumerGroup", group),
    [P_TOPIC] = PULL_TEXT("topic", topic),
    [P_QUEUE_ID] = PULL_NUMBER("queueId", 9, queue_id),
    [P_QUEUE_OFFSET] = PULL_NUMBER("queueOffset", 19, queue_offset),
    [P_MAX_MSG_NUMS] = PULL_NUMBER("maxMsgNums", 9, max_msg_nums),
    [P_SYS_FLAG] = PULL_NUMBER("sysFlag", 9, sys_flag),
    [P_COMMIT_OFFSET] = PULL_NUMBER("commitOffset", 19, commit_offset),
    [P_SUSPEND] = PULL_NUMBER("suspendTimeoutMillis", 19, suspend),
    [P_SUB_VERSION] = PULL_NUMBER("subVersion", 19, sub_version),
    [P_SUBSCRIPTION] = PULL_TEXT("subscription", subscription),
    [P_EXPRESSION_TYPE] = PULL_TEXT("expressionType", expression_type),
    [P_BNAME] = FIELD("bname", FIELD_IGNORED, 0, 0, 0),
    [P_REQ_TYPE] = FIELD("ReqT", FIELD_IGNORED, 0, 0, 0),
};
#undef PULL_TEXT
#undef PULL_NUMBER
/* The nine @CFNotNull fields: every spec before P_SUBSCRIPTION. */
#define P_REQUIRED (BIT(P_SUBSCRIPTION) - 1)

static int pull_fields_of(const ext_fields *e, pull_req_t *p)
{
    p->subscription = p->expression_type = NULL;
    p->subscription_n = p->expression_type_n = 0;
    return match_fields(e, pull_fields, N_PULL_FIELDS, P_REQUIRED, p, NULL);
}

/* What the batch's pulls need besides the offsets context: the processor's calls and the store's
 * limits, (plan, commit, (max bytes in memory, max count in memory, max bytes on disk, max count on
 * disk, memory)), and what they did, returned in the counts. The context is read at the batch's first
 * pull (pull_ctx_ready), not per call: under serve --writable every batch is handed it, and most
 * batches that hold lookups or SENDs hold no pull (its two tuple parses were a VIEW's largest
 * per-call cost there beyond the read-only server's). */
typedef struct {
    PyObject *arg; /* the context tuple (borrowed), NULL without pulls */
    int ready;
    PyObject *plan, *commit;
    long long bytes_mem, count_mem, bytes_disk, count_disk, memory;
    long long found, records, bytes, max_ms, success;
} pull_ctx_t;

/* 1 with a context to read at the first pull, 0 without pulls (None), -1 on error. */
static int pull_ctx_init(pull_ctx_t *ctx, PyObject *arg)
{
    memset(ctx, 0, sizeof *ctx);
    if (arg == NULL || arg == Py_None)
        return 0;
    if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != 3) {
        PyErr_SetString(PyExc_TypeError, "the pulls context is (plan, commit, limits)");
        return -1;
    }
    ctx->arg = arg;
    return 1;
}

/* The context's calls and limits, read once per batch at its first pull. 0, or -1 on error. */
static int pull_ctx_ready(pull_ctx_t *ctx)
{
    if (ctx->ready)
        return 0;
    PyObject *limits;
    if (!PyArg_ParseTuple(ctx->arg, "OOO!", &ctx->plan, &ctx->commit, &PyTuple_Type, &limits))
        return -1;
    if (!PyArg_ParseTuple(limits, "LLLLL", &ctx->bytes_mem, &ctx->count_mem, &ctx->bytes_disk, &ctx->count_disk,
                          &ctx->memory))
        return -1;
    ctx->ready = 1;
    return 0;
}

/* A scan's outcome: the records found, copied into body, and the answer's numbers. */
typedef struct {
    out_buf body;
    long long count, next, min_offset, max_offset;
} pull_found_t;

/* get_message()'s scan when it ends FOUND: 1 (found filled), 0 any other status (leave), -1 error. */
static int pull_scan(const offsets_ctx_t *octx, const pull_ctx_t *pctx, const cq_t *q, const pull_req_t *p,
                     PyObject *tags, pull_found_t *found)
{
    long long min_offset = q->min_logic / CQ_UNIT, max_offset;
    if (cq_max_offset(q, &max_offset) != 0)
        return PyErr_Occurred() ? -1 : 0;
    long long offset = p->queue_offset;
    if (max_offset == 0 || offset < min_offset || offset >= max_offset)
        return 0; /* NO_MESSAGE_IN_QUEUE, OFFSET_TOO_SMALL, OFFSET_OVERFLOW_ONE / BADLY */
    if (offset > LLONG_MAX / CQ_UNIT)
        return 0;
    /* index_buffer(offset): the entries from offset to the written end of its file */
    long long byte_offset = offset * CQ_UNIT;
    Py_buffer cq;
    long long pos, written;
    int rc = cq_locate(q, byte_offset, &cq, &pos, &written);
    if (rc != 0)
        return rc < 0 ? -1 : 0; /* no file holds it (OFFSET_FOUND_NULL), or left to the reference */
    long long avail = written - pos;
    if (avail <= 0 || avail % CQ_UNIT) {
        PyBuffer_Release(&cq);
        return 0; /* OFFSET_FOUND_NULL, or a partial entry the reference reads its own way */
    }
    const unsigned char *entries = (const unsigned char *)cq.buf + pos;
    long long limit = p->max_msg_nums * CQ_UNIT > 16000 ? p->max_msg_nums * CQ_UNIT : 16000;
    if (avail < limit)
        limit = avail;
    long long max_phy = octx->max_offset, total = 0, count = 0, i = 0;
    int leave = 0;
    Py_ssize_t checked = -1;
    rc = 0;
    for (; i < limit; i += CQ_UNIT) {
        const unsigned char *e = entries + i;
        long long phy = view_be64(e), size = view_be32(e + 8), code = view_be64(e + 12);
        if (total != 0 && count != 0) { /* isTheBatchFull */
            if (p->max_msg_nums <= count)
                break;
            int in_disk = max_phy - phy > pctx->memory;
            long long max_bytes = in_disk ? pctx->bytes_disk : pctx->bytes_mem;
            long long max_count = in_disk ? pctx->count_disk : pctx->count_mem;
            if (total + size > max_bytes || count > max_count - 1)
                break;
        }
        if (tags != Py_None && code > -2147483649LL) { /* not a ConsumeQueueExt address */
            PyObject *low = PyLong_FromLong((long)(int32_t)(uint32_t)(uint64_t)code);
            if (low == NULL) {
                rc = -1;
                break;
            }
            int in = PySet_Contains(tags, low);
            Py_DECREF(low);
            if (in < 0) {
                rc = -1;
                break;
            }
            if (!in)
                continue; /* NO_MATCHED_MESSAGE while nothing was found */
        }
        cl_sel_t sel;
        int got = cl_select(octx, phy, size, &sel, &checked);
        if (got == 1) {
            if (ob_need(&found->body, size) < 0)
                got = -1;
            else
                put(&found->body, (const char *)sel.buf.buf + sel.pos, size);
        }
        cl_sel_release(&sel);
        if (got < 0) {
            rc = -1;
            break;
        }
        if (got != 1) {
            /* 2: a shrunk file (the reference reports it); 0: a record gone from the CommitLog (the
             * reference skips to the next CommitLog file, MESSAGE_WAS_REMOVING while nothing was
             * found): both rare, both left to the reference */
            leave = 1;
            break;
        }
        total += size;
        count++;
    }
    PyBuffer_Release(&cq);
    if (rc < 0)
        return -1;
    if (leave || count == 0)
        return 0;
    found->count = count;
    found->next = offset + i / CQ_UNIT;
    found->min_offset = min_offset;
    found->max_offset = max_offset;
    return 1;
}

/* A str argument for a callback, or None for an absent field: NULL with *leave set if not UTF-8. */
static PyObject *optional_text(const unsigned char *s, Py_ssize_t n, int *leave)
{
    if (s == NULL)
        return Py_NewRef(Py_None);
    return decode_text(s, n, leave);
}

/* One PULL: O_ANSWERED, O_LEAVE (nothing written, nothing done), -1 with an error set. */
static int answer_pull(out_buf *out, offsets_ctx_t *octx, pull_ctx_t *pctx, long long opaque, const pull_req_t *p)
{
    int leave = 0, rc = -1;
    PyObject *group = NULL, *topic = NULL, *sub = NULL, *expr = NULL, *plan = NULL;
    pull_found_t found;
    memset(&found, 0, sizeof found);
    cq_t q;
    memset(&q, 0, sizeof q);
    struct timespec t0, t1;
    if ((group = decode_text(p->group, p->group_n, &leave)) == NULL ||
        (topic = decode_text(p->topic, p->topic_n, &leave)) == NULL ||
        (sub = optional_text(p->subscription, p->subscription_n, &leave)) == NULL ||
        (expr = optional_text(p->expression_type, p->expression_type_n, &leave)) == NULL)
        goto done;
    plan = PyObject_CallFunction(pctx->plan, "OOLLLOO", group, topic, p->queue_id, p->sys_flag, p->sub_version,
                                 sub, expr);
    if (plan == NULL) {
        PyErr_Clear(); /* side-effect free: the Python path meets it again and answers its way */
        leave = 1;
        goto done;
    }
    PyObject *tags;
    if (!PyTuple_Check(plan) || PyTuple_GET_SIZE(plan) != 1 ||
        ((tags = PyTuple_GET_ITEM(plan, 0)) != Py_None && !PyAnySet_Check(tags))) {
        leave = 1; /* None: not a plain pull */
        goto done;
    }
    int got = cq_find_topic(octx, topic, p->queue_id, &q);
    if (got != O_ANSWERED) {
        if (got == O_LEAVE)
            leave = 1;
        goto done;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    got = pull_scan(octx, pctx, &q, p, tags, &found);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (got <= 0) {
        if (got == 0)
            leave = 1;
        goto done;
    }
    /* FOUND: from here on the pull is answered here (the Python path would have counted it too) */
    long long ms = (long long)(t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    pctx->found++;
    pctx->records += found.count;
    pctx->bytes += found.body.len;
    if (ms > pctx->max_ms)
        pctx->max_ms = ms;
    if (p->sys_flag & PULL_COMMIT_OFFSET_FLAG) {
        PyObject *failed = PyObject_CallFunction(pctx->commit, "OOLLL", group, topic, p->queue_id, p->commit_offset,
                                                 opaque);
        if (failed == NULL)
            goto done;
        if (failed != Py_None) {
            if (!PyBytes_Check(failed) || ob_need(out, PyBytes_GET_SIZE(failed)) < 0) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "the commit callback answers None or bytes");
                Py_DECREF(failed);
                goto done;
            }
            put(out, PyBytes_AS_STRING(failed), PyBytes_GET_SIZE(failed));
            Py_DECREF(failed);
            rc = O_ANSWERED;
            goto done;
        }
        Py_DECREF(failed);
    }
    hole_values v;
    set_hole(&v, HOLE_OPAQUE, opaque);
    set_hole(&v, HOLE_OFFSET, found.next);
    set_hole(&v, HOLE_TIMESTAMP, found.min_offset);
    set_hole(&v, HOLE_PHYOFFSET, found.max_offset);
    const template_t *t = &offset_templates[T_PULL];
    Py_ssize_t header_n = template_size(t, &v);
    if (ob_need(out, 8 + header_n + found.body.len) < 0)
        goto done;
    put_be32(out, (uint32_t)(4 + header_n + found.body.len));
    put_be32(out, (uint32_t)header_n);
    put_template(out, t, &v);
    put(out, found.body.p, found.body.len);
    pctx->success++;
    rc = O_ANSWERED;
done:
    if (leave && rc != O_ANSWERED && !PyErr_Occurred())
        rc = O_LEAVE;
    cq_release(&q);
    PyMem_Free(found.body.p);
    Py_XDECREF(group);
    Py_XDECREF(topic);
    Py_XDECREF(sub);
    Py_XDECREF(expr);
    Py_XDECREF(plan);
    return rc;
}

/* The counts into the context's list (see N_COUNTS), when anything was answered. 0, or -1. */
static int family_finish(const offsets_ctx_t *octx, const pull_ctx_t *pctx)
{
    long long total = pctx->found;
    for (int i = 0; i < N_OFFSET_CODES; i++)
        total += octx->answered[i];
    if (octx->counts == NULL || total == 0)
        return 0;
    long long values[N_COUNTS];
    for (int i = 0; i < N_OFFSET_CODES; i++)
        values[i] = octx->answered[i];
    values[N_OFFSET_CODES] = total;
    values[N_OFFSET_CODES + 1] = pctx->found;
    values[N_OFFSET_CODES + 2] = pctx->records;
    values[N_OFFSET_CODES + 3] = pctx->bytes;
    values[N_OFFSET_CODES + 4] = pctx->max_ms;
    values[N_OFFSET_CODES + 5] = pctx->success;
    for (int i = 0; i < N_COUNTS; i++) {
        PyObject *n = PyLong_FromLongLong(values[i]);
        if (n == NULL)
            return -1;
        PyList_SetItem(octx->counts, i, n); /* steals n */
    }
    return 0;
}

#endif
