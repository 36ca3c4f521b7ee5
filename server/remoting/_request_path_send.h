/*
 * The compiled request path's SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and SEND_MESSAGE
 * (10), included by _request_path_fast.c. Only under `serve --writable` (the test kit's server),
 * given the sends context (RequestPath.answer_sends). A Java producer sends V2 (one-letter fields)
 * and its batches with the same header, the Go client's single messages SEND_MESSAGE (the long
 * names); all read into the same send_req_t. Whether a SEND is a batch is the header's `batch`
 * flag, as for the broker: store_send decodes the batch body.
 *
 * The frame is split here, its header read (send_fields) and the SUCCESS answer written from a
 * template made by the Python encoder (SendMessageProcessor's answer, with the processor's region and
 * trace flag). A plain SEND (_request_path_plain.h says which) is then stored here too, its record
 * written with the call's other plain SENDs in one pwrite; any other keeps the checks, the record and
 * the append where their rules are written once, in Python (SendMessageProcessor.store_send:
 * server.broker.send_check, put_message, WritableStore.append), through one call of the sends
 * callback instead of the frame decoder, the header codec, the dispatcher and the answer's encoder.
 *
 *   1. the header is plain (send_fields, send_fields_v1): the fields of SendMessageRequestHeaderV2
 *      a..n (or SendMessageRequestHeader's names for SEND_MESSAGE); the
 *      properties (i) may hold JSON escapes (a Java client writes its separators 1 and 2 as
 *      \u0001 and \u0002), the other strings may not; numbers are plain digits (ints at most 9,
 *      bornTimestamp at most 19, no sign, no leading zero), booleans Boolean.parseBoolean's;
 *   2. the header object is made here, header_class(a, b, c, d, e, f, g, h, i, j, k, l, m, n) (the
 *      dataclass SendMessageRequestHeader.from_ext_fields makes, in its field order), and the body
 *      copied into bytes, as the processor copies it;
 *   3. a plain SEND is stored and answered here (plain_send); the group of plain SENDs before it is
 *      written (plain_flush) before any other SEND's callback runs, and at the end of the call;
 *      otherwise callback(opaque, code, header, body, at) answers (at: the length of the batch's answers so
 *      far, where this SEND's answer starts: once this call returns, and before any answer is sent,
 *      request_path.py settles the stored SENDs together and replaces the answers of those whose
 *      settle failed; send_group.py)
 *        False           nothing was done: the frame is left to the Python path (a consumer's
 *                        retry, which reads the request's version),
 *        (msgId, queueId, queueOffset)  stored: SUCCESS is written here (msgId is the offset
 *                        message id, or a batch's ids joined by commas: no JSON escape needed),
 *        bytes           a whole answer frame (a refusal, as the Python path answers it),
 *        None            the answer comes later, from a task the callback started (a SEND that
 *                        created its topic is answered once the topic table is saved).
 *      An error from it is raised (the callback turns a processor's failure into an answer).
 *
 * A SEND changes what the batch's other requests read (the CommitLog's end, the queues), which the
 * batch read once at its start (view_snapshot, the opened queues, a compiled query's snapshot): so
 * once a SEND was answered, the batch stops at the first frame that is not one (answer_batch then
 * reports `again`, and request_path.py calls again with a fresh snapshot). So a call's SEND answers
 * are the last of its output, each running to the next one's `at`.
 */
#ifndef RMQ_REQUEST_PATH_SEND_H
#define RMQ_REQUEST_PATH_SEND_H

#define SEND_MESSAGE 10
#define SEND_MESSAGE_V2 310
#define SEND_BATCH_MESSAGE 320

typedef struct {
    const unsigned char *group, *topic, *default_topic, *bname;
    Py_ssize_t group_n, topic_n, default_topic_n, bname_n;
    long long default_queue_nums, queue_id, sys_flag, born_timestamp, flag, reconsume_times, max_reconsume_times;
    int unit_mode, batch;
    json_text_t properties;
    unsigned seen;
} send_req_t;

/* extFields of SEND_MESSAGE_V2 (SendMessageRequestHeaderV2's one-letter names): a producerGroup,
 * b topic, c defaultTopic, d defaultTopicQueueNums, e queueId, f sysFlag, g bornTimestamp, h flag
 * (required), i properties, j reconsumeTimes, k unitMode, l maxReconsumeTimes, m batch, n bname
 * (optional), in any order, nothing else. */
enum { S_A, S_B, S_C, S_D, S_E, S_F, S_G, S_H, S_I, S_J, S_K, S_L, S_M, S_N, N_SEND_FIELDS };
#define SEND_TEXT(name, field) FIELD(name, FIELD_TEXT, 0, offsetof(send_req_t, field), offsetof(send_req_t, field##_n))
#define SEND_NUMBER(name, digits, field) FIELD(name, FIELD_NUMBER, digits, offsetof(send_req_t, field), 0)
static const field_spec send_fields[N_SEND_FIELDS] = {
    [S_A] = SEND_TEXT("a", group),
    [S_B] = SEND_TEXT("b", topic),
    [S_C] = SEND_TEXT("c", default_topic),
    [S_D] = SEND_NUMBER("d", 9, default_queue_nums),
    [S_E] = SEND_NUMBER("e", 9, queue_id),
    [S_F] = SEND_NUMBER("f", 9, sys_flag),
    [S_G] = SEND_NUMBER("g", 19, born_timestamp),
    [S_H] = SEND_NUMBER("h", 9, flag),
    [S_I] = FIELD("i", FIELD_JSON_TEXT, 0, offsetof(send_req_t, properties), 0),
    [S_J] = SEND_NUMBER("j", 9, reconsume_times),
    [S_K] = FIELD("k", FIELD_BOOLEAN, 0, offsetof(send_req_t, unit_mode), 0),
    [S_L] = SEND_NUMBER("l", 9, max_reconsume_times),
    [S_M] = FIELD("m", FIELD_BOOLEAN, 0, offsetof(send_req_t, batch), 0),
    [S_N] = SEND_TEXT("n", bname),
};
#undef SEND_TEXT
#undef SEND_NUMBER
/* The @CFNotNull fields a..h. */
#define S_REQUIRED (BIT(S_I) - 1)

/* SEND_MESSAGE's: the same fields under SendMessageRequestHeader's names, in the same order. */
#define SEND_TEXT(name, field) FIELD(name, FIELD_TEXT, 0, offsetof(send_req_t, field), offsetof(send_req_t, field##_n))
#define SEND_NUMBER(name, digits, field) FIELD(name, FIELD_NUMBER, digits, offsetof(send_req_t, field), 0)
static const field_spec send_fields_v1[N_SEND_FIELDS] = {
    [S_A] = SEND_TEXT("producerGroup", group),
    [S_B] = SEND_TEXT("topic", topic),
    [S_C] = SEND_TEXT("defaultTopic", default_topic),
    [S_D] = SEND_NUMBER("defaultTopicQueueNums", 9, default_queue_nums),
    [S_E] = SEND_NUMBER("queueId", 9, queue_id),
    [S_F] = SEND_NUMBER("sysFlag", 9, sys_flag),
    [S_G] = SEND_NUMBER("bornTimestamp", 19, born_timestamp),
    [S_H] = SEND_NUMBER("flag", 9, flag),
    [S_I] = FIELD("properties", FIELD_JSON_TEXT, 0, offsetof(send_req_t, properties), 0),
    [S_J] = SEND_NUMBER("reconsumeTimes", 9, reconsume_times),
    [S_K] = FIELD("unitMode", FIELD_BOOLEAN, 0, offsetof(send_req_t, unit_mode), 0),
    [S_L] = SEND_NUMBER("maxReconsumeTimes", 9, max_reconsume_times),
    [S_M] = FIELD("batch", FIELD_BOOLEAN, 0, offsetof(send_req_t, batch), 0),
    [S_N] = SEND_TEXT("bname", bname),
};
#undef SEND_TEXT
#undef SEND_NUMBER

/* 1 (V2's fields), 2 (SEND_MESSAGE's) or 0, with r filled. */
static int send_fields_of(const ext_fields *e, send_req_t *r)
{
    for (int form = 1; form <= 2; form++) {
        r->properties.s = NULL;
        r->bname = NULL;
        r->bname_n = 0;
        r->unit_mode = r->batch = 0;
        if (match_fields(e, form == 1 ? send_fields : send_fields_v1, N_SEND_FIELDS, S_REQUIRED, r, &r->seen))
            return form;
    }
    return 0;
}

#include "_request_path_plain.h" /* the plain SENDs stored here */

/* The batch's sends: (callback, header_class, (pieces, holes)) or (callback, header_class, (pieces,
 * holes), begin, flush) with plain SENDs (_request_path_plain.h), read at the batch's first SEND
 * (send_ctx_ready): a read of VIEWs or pulls on a writable server pays nothing for it. */
typedef struct {
    PyObject *arg;
    PyObject *callback, *header_class;
    template_t success; /* its own references, once ready: send_ctx_clear releases them */
    int ready;
    long long answered;
    plain_t plain;
} send_ctx_t;

/* 1 with sends (the context's shape checked), 0 without (None), -1 on error. */
static int send_ctx_init(send_ctx_t *ctx, PyObject *arg)
{
    memset(ctx, 0, sizeof *ctx);
    if (arg == NULL || arg == Py_None)
        return 0;
    if (!PyTuple_Check(arg) || (PyTuple_GET_SIZE(arg) != 3 && PyTuple_GET_SIZE(arg) != 5)) {
        PyErr_SetString(PyExc_TypeError,
                        "the sends context is (callback, header class, (pieces, holes)[, begin, flush])");
        return -1;
    }
    ctx->arg = arg;
    return 1;
}

/* The callback, the header class and the SUCCESS template, read once per batch. 0, or -1. */
static int send_ctx_ready(send_ctx_t *ctx)
{
    if (ctx->ready)
        return 0;
    ctx->callback = PyTuple_GET_ITEM(ctx->arg, 0);
    ctx->header_class = PyTuple_GET_ITEM(ctx->arg, 1);
    if (PyTuple_GET_SIZE(ctx->arg) == 5)
        plain_init(&ctx->plain, PyTuple_GET_ITEM(ctx->arg, 3), PyTuple_GET_ITEM(ctx->arg, 4));
    if (template_from(PyTuple_GET_ITEM(ctx->arg, 2), &ctx->success) < 0)
        return -1;
    ctx->ready = 1;
    return 0;
}

/* The call ends: its plain SENDs written (0), or, with an error set (failed), given back (-1). */
static int send_ctx_finish(send_ctx_t *ctx, int failed)
{
    if (failed) {
        plain_abort(&ctx->plain);
        return -1;
    }
    if (plain_flush(&ctx->plain) < 0) {
        plain_abort(&ctx->plain);
        return -1;
    }
    return 0;
}

static void send_ctx_clear(send_ctx_t *ctx)
{
    plain_clear(&ctx->plain);
    for (int i = 0; i < ctx->success.n_pieces; i++)
        Py_CLEAR(ctx->success.pieces[i]);
    ctx->success.n_pieces = 0;
}

/* The text t stands for, its JSON escapes decoded, into buf (at least t->n bytes: every escape is at
 * least as long as the UTF-8 of what it stands for; scan_string checked them and left surrogates to
 * the reference): its length. */
static Py_ssize_t json_unescape(const json_text_t *t, unsigned char *buf)
{
    const unsigned char *s = t->s;
    Py_ssize_t n = t->n, k = 0;
    for (Py_ssize_t i = 0; i < n;) {
        if (s[i] != '\\') {
            buf[k++] = s[i++];
            continue;
        }
        unsigned char e = s[i + 1];
        if (e != 'u') {
            buf[k++] = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
            i += 2;
            continue;
        }
        unsigned v = 0;
        hex4(s + i + 2, &v);
        i += 6;
        if (v < 0x80) {
            buf[k++] = (unsigned char)v;
        } else if (v < 0x800) {
            buf[k++] = (unsigned char)(0xC0 | (v >> 6));
            buf[k++] = (unsigned char)(0x80 | (v & 0x3F));
        } else {
            buf[k++] = (unsigned char)(0xE0 | (v >> 12));
            buf[k++] = (unsigned char)(0x80 | ((v >> 6) & 0x3F));
            buf[k++] = (unsigned char)(0x80 | (v & 0x3F));
        }
    }
    return k;
}

/* The properties as a str (escapes decoded), or None when absent: NULL with *leave set if not UTF-8. */
static PyObject *json_text(const json_text_t *t, int *leave)
{
    if (t->s == NULL || !t->escaped)
        return optional_text(t->s, t->n, leave);
    unsigned char *buf = PyMem_Malloc(t->n ? (size_t)t->n : 1);
    if (buf == NULL)
        return PyErr_NoMemory();
    PyObject *text = decode_text(buf, json_unescape(t, buf), leave);
    PyMem_Free(buf);
    return text;
}

/* An optional number field: its value, or None when absent. */
static PyObject *optional_number(const send_req_t *r, int spec, long long v)
{
    if (!(r->seen & BIT(spec)))
        return Py_NewRef(Py_None);
    return PyLong_FromLongLong(v);
}

/* The header object (step 2): NULL with *leave set when a text is not UTF-8 (the reference
 * decides), NULL with an error set otherwise. */
static PyObject *send_header(const send_ctx_t *ctx, const send_req_t *r, int *leave)
{
    PyObject *a[14] = {NULL};
    PyObject *header = NULL;
    if ((a[0] = decode_text(r->group, r->group_n, leave)) == NULL ||
        (a[1] = decode_text(r->topic, r->topic_n, leave)) == NULL ||
        (a[2] = decode_text(r->default_topic, r->default_topic_n, leave)) == NULL ||
        (a[3] = PyLong_FromLongLong(r->default_queue_nums)) == NULL ||
        (a[4] = PyLong_FromLongLong(r->queue_id)) == NULL || (a[5] = PyLong_FromLongLong(r->sys_flag)) == NULL ||
        (a[6] = PyLong_FromLongLong(r->born_timestamp)) == NULL || (a[7] = PyLong_FromLongLong(r->flag)) == NULL)
        goto done;
    if ((a[8] = json_text(&r->properties, leave)) == NULL ||
        (a[9] = optional_number(r, S_J, r->reconsume_times)) == NULL)
        goto done;
    a[10] = Py_NewRef(r->unit_mode ? Py_True : Py_False);
    if ((a[11] = optional_number(r, S_L, r->max_reconsume_times)) == NULL)
        goto done;
    a[12] = Py_NewRef(r->batch ? Py_True : Py_False);
    if ((a[13] = optional_text(r->bname, r->bname_n, leave)) == NULL)
        goto done;
    header = PyObject_Vectorcall(ctx->header_class, a, 14, NULL);
done:
    for (int i = 0; i < 14; i++)
        Py_XDECREF(a[i]);
    return header;
}

/* SUCCESS for (msgId, queueId, queueOffset). 0, or -1 with an error set. */
static int send_success(out_buf *out, const send_ctx_t *ctx, long long opaque, PyObject *stored)
{
    long long queue_id, queue_offset;
    PyObject *msg_id = PyTuple_GET_ITEM(stored, 0);
    if (!PyUnicode_Check(msg_id) || view_as_int64(PyTuple_GET_ITEM(stored, 1), &queue_id) < 0 ||
        view_as_int64(PyTuple_GET_ITEM(stored, 2), &queue_offset) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "the send callback's msgId is a str");
        return -1;
    }
    Py_ssize_t id_n;
    const char *id = PyUnicode_AsUTF8AndSize(msg_id, &id_n);
    if (id == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < id_n; i++) {
        unsigned char ch = (unsigned char)id[i];
        if (ch < 0x20 || ch == '"' || ch == '\\' || ch > 0x7e) {
            PyErr_SetString(PyExc_ValueError, "the send callback's msgId needs a JSON escape");
            return -1;
        }
    }
    if (id_n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "msgId too long");
        return -1;
    }
    hole_values v;
    set_hole(&v, HOLE_OPAQUE, opaque);
    set_hole(&v, HOLE_QUEUE_ID, queue_id);
    set_hole(&v, HOLE_OFFSET, queue_offset);
    set_hole_text(&v, HOLE_MSG_ID, id, (int)id_n);
    Py_ssize_t header_n = template_size(&ctx->success, &v);
    if (ob_need(out, 8 + header_n) < 0)
        return -1;
    put_be32(out, (uint32_t)(4 + header_n));
    put_be32(out, (uint32_t)header_n);
    put_template(out, &ctx->success, &v);
    return 0;
}

/* One SEND: O_ANSWERED (its answer in out, or to come from a task),
 * O_LEAVE (nothing done), -1 with an error set. */
static int answer_send(out_buf *out, send_ctx_t *ctx, long long code, long long opaque, const send_req_t *r,
                       const unsigned char *body, Py_ssize_t body_n)
{
    int leave = 0, rc = -1;
    if (send_ctx_ready(ctx) < 0)
        return -1;
    rc = plain_send(&ctx->plain, &ctx->success, out, code, opaque, r, body, body_n);
    if (rc == O_ANSWERED)
        ctx->answered++;
    if (rc != O_LEAVE)
        return rc;
    /* not plain: what the group holds is written before the callback runs any Python */
    if (plain_flush(&ctx->plain) < 0)
        return -1;
    rc = -1;
    PyObject *header = send_header(ctx, r, &leave), *data = NULL, *got = NULL;
    if (header == NULL)
        return leave ? O_LEAVE : -1;
    if ((data = PyBytes_FromStringAndSize((const char *)body, body_n)) == NULL)
        goto done;
    got = PyObject_CallFunction(ctx->callback, "LLOOn", opaque, code, header, data, out->len);
    if (got == NULL)
        goto done;
    if (got == Py_False) {
        rc = O_LEAVE;
    } else if (got == Py_None) {
        rc = O_ANSWERED;
    } else if (PyBytes_Check(got)) {
        if (ob_need(out, PyBytes_GET_SIZE(got)) == 0) {
            put(out, PyBytes_AS_STRING(got), PyBytes_GET_SIZE(got));
            rc = O_ANSWERED;
        }
    } else if (PyTuple_Check(got) && PyTuple_GET_SIZE(got) == 3) {
        if (send_success(out, ctx, opaque, got) == 0)
            rc = O_ANSWERED;
    } else {
        PyErr_SetString(PyExc_TypeError,
                        "the send callback answers False, None, bytes or (msgId, queueId, queueOffset)");
    }
    if (rc == O_ANSWERED)
        ctx->answered++;
done:
    Py_DECREF(header);
    Py_XDECREF(data);
    Py_XDECREF(got);
    return rc;
}

#endif
