/* The compiled twin of server/grpc/message_bytes.py's encode_response: one received message's
 * ReceiveMessageResponse bytes from its parts, in one pass of C instead of some forty Python steps.
 * The field tags and enum values are received_message.h's; the Python function is the reference,
 * and tests/server/grpc/test_message_bytes.py compares both (and the protobuf objects' output) for
 * every optional field present or absent. Errors are the reference's: ValueError for a timestamp
 * out of Timestamp's range, UnicodeEncodeError for a string that is not valid UTF-8 (a lone
 * surrogate), TypeError for a property that is not a str. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_record_layout.h"
#include "received_message.h"

typedef struct {
    uint8_t *data;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    uint8_t *data = PyMem_Realloc(b->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static int put_raw(Buf *b, const void *data, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    return 0;
}

/* tag, a varint */
static int put_number(Buf *b, const char *tag, size_t tag_len, uint64_t v)
{
    if (buf_reserve(b, tag_len + 10) < 0)
        return -1;
    memcpy(b->data + b->len, tag, tag_len);
    uint8_t *end = put_varint(b->data + b->len + tag_len, v);
    b->len = (size_t)(end - b->data);
    return 0;
}

/* tag, length, bytes */
static int put_delimited(Buf *b, const char *tag, size_t tag_len, const char *data, size_t n)
{
    if (buf_reserve(b, tag_len + 10 + n) < 0)
        return -1;
    memcpy(b->data + b->len, tag, tag_len);
    uint8_t *p = put_varint(b->data + b->len + tag_len, n);
    memcpy(p, data, n);
    b->len = (size_t)(p + n - b->data);
    return 0;
}

/* tag, length, a str's UTF-8 (NULL -> error set) */
static int put_text(Buf *b, const char *tag, size_t tag_len, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "a str was expected, not %.100s", Py_TYPE(text)->tp_name);
        return -1;
    }
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    if (utf8 == NULL)
        return -1;
    return put_delimited(b, tag, tag_len, utf8, (size_t)n);
}

static int put_tag_text(Buf *b, uint8_t tag, PyObject *text)
{
    char t = (char)tag;
    return put_text(b, &t, 1, text);
}

/* A Timestamp of ms milliseconds as Timestamp.FromMilliseconds sets it: seconds by floor division,
 * the rest as nanos, each left out at zero; ValueError out of Timestamp's range. */
static int put_timestamp(Buf *b, uint8_t tag, PyObject *value)
{
    int overflow = 0;
    long long ms = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (ms == -1 && PyErr_Occurred())
        return -1;
    long long seconds = ms / 1000, rest = ms % 1000;
    if (rest < 0) {
        rest += 1000;
        seconds -= 1;
    }
    if (overflow || seconds < RM_TIMESTAMP_SECONDS_MIN || seconds > RM_TIMESTAMP_SECONDS_MAX) {
        PyErr_Format(PyExc_ValueError, "Timestamp is not valid: %R ms", value);
        return -1;
    }
    uint64_t nanos = (uint64_t)rest * 1000000u;
    size_t inner = (seconds ? 1 + varint_len((uint64_t)seconds) : 0) + (nanos ? 1 + varint_len(nanos) : 0);
    if (buf_reserve(b, 2 + inner) < 0)
        return -1;
    uint8_t *p = b->data + b->len;
    *p++ = tag;
    p = put_varint(p, inner);
    if (seconds) {
        *p++ = RM_SECONDS;
        p = put_varint(p, (uint64_t)seconds);
    }
    if (nanos) {
        *p++ = RM_NANOS;
        p = put_varint(p, nanos);
    }
    b->len = (size_t)(p - b->data);
    return 0;
}

static PyObject *K_TAGS, *K_KEYS, *K_SHARDING, *K_TRACE, *K_TRAN, *K_DELAY, *K_DELIVER_MS, *K_DELAY_SEC,
    *K_DELAY_MS;

/* props[key] or NULL (no error) when absent; -1 on error */
static int lookup(PyObject *props, PyObject *key, PyObject **out)
{
    *out = PyDict_GetItemWithError(props, key);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}

/* conversion.message_type_of */
static int message_type(PyObject *props)
{
    PyObject *tran = PyDict_GetItemWithError(props, K_TRAN);
    if (tran == NULL && PyErr_Occurred())
        return -1;
    if (tran != NULL && PyUnicode_Check(tran) && PyUnicode_CompareWithASCIIString(tran, "true") == 0)
        return RM_TYPE_TRANSACTION;
    PyObject *delays[] = {K_DELAY, K_DELIVER_MS, K_DELAY_SEC, K_DELAY_MS};
    for (size_t i = 0; i < sizeof delays / sizeof delays[0]; i++) {
        int has = PyDict_Contains(props, delays[i]);
        if (has < 0)
            return -1;
        if (has)
            return RM_TYPE_DELAY;
    }
    int fifo = PyDict_Contains(props, K_SHARDING);
    if (fifo < 0)
        return -1;
    return fifo ? RM_TYPE_FIFO : RM_TYPE_NORMAL;
}

static int nonempty(PyObject *text)
{
    return PyUnicode_Check(text) ? PyUnicode_GET_LENGTH(text) > 0 : PyObject_IsTrue(text);
}

/* encode_response(props, system_names, body, digest, message_id, born_host, born_ms, store_ms,
 *                 deliver_ms, receipt_handle, queue_id, queue_offset, attempt, topic_field,
 *                 store_host_field, invisible_field) -> bytes */
static PyObject *encode_response(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 16) {
        PyErr_Format(PyExc_TypeError, "encode_response takes 16 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *props = args[0], *names = args[1], *body_obj = args[2], *digest = args[3];
    PyObject *message_id = args[4], *born_host = args[5], *born_ms = args[6], *store_ms = args[7];
    PyObject *deliver_ms = args[8], *handle = args[9], *queue_id = args[10], *queue_offset = args[11];
    PyObject *attempt = args[12], *topic_field = args[13], *store_field = args[14], *invisible = args[15];
    if (!PyDict_Check(props)) {
        PyErr_SetString(PyExc_TypeError, "props must be a dict");
        return NULL;
    }
    if (!PyBytes_Check(topic_field) || !PyBytes_Check(store_field) || !PyBytes_Check(invisible)) {
        PyErr_SetString(PyExc_TypeError, "the topic, store host and invisible fields must be bytes");
        return NULL;
    }
    Py_buffer body;
    if (PyObject_GetBuffer(body_obj, &body, PyBUF_SIMPLE) < 0)
        return NULL;
    Buf sys = {0}, user = {0};
    PyObject *result = NULL, *user_names = NULL, *value;
    int kind;

    /* SystemProperties, in field number order */
    if (lookup(props, K_TAGS, &value) < 0 || (value != NULL && put_tag_text(&sys, RM_TAG, value) < 0))
        goto done;
    if (lookup(props, K_KEYS, &value) < 0)
        goto done;
    if (value != NULL) {
        if (!PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "the KEYS property must be a str");
            goto done;
        }
        Py_ssize_t n;
        const char *keys = PyUnicode_AsUTF8AndSize(value, &n);
        if (keys == NULL)
            goto done;
        /* str.split(" "): every space splits, empty items kept (a space is never inside a
         * multi-byte UTF-8 sequence) */
        const char *start = keys, *end = keys + n;
        char tag = RM_KEYS;
        for (;;) {
            const char *space = memchr(start, ' ', (size_t)(end - start));
            const char *stop = space ? space : end;
            if (put_delimited(&sys, &tag, 1, start, (size_t)(stop - start)) < 0)
                goto done;
            if (space == NULL)
                break;
            start = space + 1;
        }
    }
    if (nonempty(message_id) && put_tag_text(&sys, RM_MESSAGE_ID, message_id) < 0)
        goto done;
    {
        if (!PyUnicode_Check(digest)) {
            PyErr_SetString(PyExc_TypeError, "digest must be a str");
            goto done;
        }
        Py_ssize_t n;
        const char *hex = PyUnicode_AsUTF8AndSize(digest, &n);
        if (hex == NULL || buf_reserve(&sys, 8 + (size_t)n) < 0)
            goto done;
        uint8_t *p = sys.data + sys.len;
        *p++ = RM_BODY_DIGEST;
        *p++ = 2 + 2 + RM_DIGEST_HEX;
        *p++ = RM_DIGEST_TYPE;
        *p++ = RM_DIGEST_MD5;
        *p++ = RM_DIGEST_CHECKSUM;
        *p++ = RM_DIGEST_HEX;
        memcpy(p, hex, (size_t)n);
        p += n;
        *p++ = RM_BODY_ENCODING;
        *p++ = RM_ENCODING_IDENTITY;
        sys.len = (size_t)(p - sys.data);
    }
    kind = message_type(props);
    if (kind < 0)
        goto done;
    {
        char tag = RM_MESSAGE_TYPE;
        if (put_number(&sys, &tag, 1, (uint64_t)kind) < 0)
            goto done;
    }
    if (put_timestamp(&sys, RM_BORN_TIMESTAMP, born_ms) < 0)
        goto done;
    if (nonempty(born_host) && put_tag_text(&sys, RM_BORN_HOST, born_host) < 0)
        goto done;
    if (put_timestamp(&sys, RM_STORE_TIMESTAMP, store_ms) < 0)
        goto done;
    if (put_raw(&sys, PyBytes_AS_STRING(store_field), (size_t)PyBytes_GET_SIZE(store_field)) < 0)
        goto done;
    if (deliver_ms != Py_None && put_timestamp(&sys, RM_DELIVERY_TIMESTAMP, deliver_ms) < 0)
        goto done;
    if (nonempty(handle) && put_tag_text(&sys, RM_RECEIPT_HANDLE, handle) < 0)
        goto done;
    {
        int truthy = PyObject_IsTrue(queue_id);
        if (truthy < 0)
            goto done;
        char tag = RM_QUEUE_ID;
        /* an int32/int64 as its 64-bit two's complement, as the reference masks it */
        uint64_t q = PyLong_AsUnsignedLongLongMask(queue_id);
        if (PyErr_Occurred())
            goto done;
        if (truthy && put_number(&sys, &tag, 1, q) < 0)
            goto done;
        tag = RM_QUEUE_OFFSET;
        uint64_t offset = PyLong_AsUnsignedLongLongMask(queue_offset);
        if (PyErr_Occurred() || put_number(&sys, &tag, 1, offset) < 0)
            goto done;
    }
    if (put_raw(&sys, PyBytes_AS_STRING(invisible), (size_t)PyBytes_GET_SIZE(invisible)) < 0)
        goto done;
    {
        uint64_t a = PyLong_AsUnsignedLongLongMask(attempt);
        if (PyErr_Occurred() || put_number(&sys, RM_DELIVERY_ATTEMPT, 2, a) < 0)
            goto done;
    }
    if (lookup(props, K_SHARDING, &value) < 0 ||
        (value != NULL && put_text(&sys, RM_MESSAGE_GROUP, 2, value) < 0))
        goto done;
    if (lookup(props, K_TRACE, &value) < 0 || (value != NULL && put_text(&sys, RM_TRACE_CONTEXT, 2, value) < 0))
        goto done;

    /* the user properties: every key not the system's, in key order (a map as deterministic
     * serialization writes it) */
    user_names = PyList_New(0);
    if (user_names == NULL)
        goto done;
    {
        Py_ssize_t pos = 0;
        PyObject *name, *item;
        while (PyDict_Next(props, &pos, &name, &item)) {
            int system = PySet_Contains(names, name);
            if (system < 0 || (!system && PyList_Append(user_names, name) < 0))
                goto done;
        }
    }
    if (PyList_GET_SIZE(user_names) > 1 && PyList_Sort(user_names) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(user_names); i++) {
        PyObject *name = PyList_GET_ITEM(user_names, i);
        PyObject *item = PyDict_GetItemWithError(props, name);
        if (item == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "the properties changed while encoded");
            goto done;
        }
        if (!PyUnicode_Check(name) || !PyUnicode_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "a property's name and value must be str");
            goto done;
        }
        Py_ssize_t kn, vn;
        const char *k = PyUnicode_AsUTF8AndSize(name, &kn);
        if (k == NULL)
            goto done;
        const char *v = PyUnicode_AsUTF8AndSize(item, &vn);
        if (v == NULL)
            goto done;
        size_t entry = 1 + varint_len((uint64_t)kn) + (size_t)kn + 1 + varint_len((uint64_t)vn) + (size_t)vn;
        if (buf_reserve(&user, 1 + 10 + entry) < 0)
            goto done;
        uint8_t *p = user.data + user.len;
        *p++ = RM_USER_PROPERTY;
        p = put_varint(p, entry);
        *p++ = RM_ENTRY_KEY;
        p = put_varint(p, (uint64_t)kn);
        memcpy(p, k, (size_t)kn);
        p += kn;
        *p++ = RM_ENTRY_VALUE;
        p = put_varint(p, (uint64_t)vn);
        memcpy(p, v, (size_t)vn);
        p += vn;
        user.len = (size_t)(p - user.data);
    }

    /* Message { topic, user_properties, system_properties, body } inside the response */
    {
        size_t topic_len = (size_t)PyBytes_GET_SIZE(topic_field), body_len = (size_t)body.len;
        size_t whole = topic_len + user.len + 1 + varint_len(sys.len) + sys.len;
        if (body_len)
            whole += 1 + varint_len(body_len) + body_len;
        size_t total = 1 + varint_len(whole) + whole;
        result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
        if (result == NULL)
            goto done;
        uint8_t *p = (uint8_t *)PyBytes_AS_STRING(result);
        *p++ = RM_RESPONSE_MESSAGE;
        p = put_varint(p, whole);
        memcpy(p, PyBytes_AS_STRING(topic_field), topic_len);
        p += topic_len;
        if (user.len) {
            memcpy(p, user.data, user.len);
            p += user.len;
        }
        *p++ = RM_SYSTEM_PROPERTIES;
        p = put_varint(p, sys.len);
        memcpy(p, sys.data, sys.len);
        p += sys.len;
        if (body_len) {
            *p++ = RM_BODY;
            p = put_varint(p, body_len);
            memcpy(p, body.buf, body_len);
        }
    }
done:
    Py_XDECREF(user_names);
    PyMem_Free(sys.data);
    PyMem_Free(user.data);
    PyBuffer_Release(&body);
    return result;
}

/* The record's fields read big-endian at their offsets (the layout of _record_layout.h). */
static int32_t be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static int64_t be64(const uint8_t *p)
{
    return (int64_t)(((uint64_t)(uint32_t)be32(p) << 32) | (uint64_t)(uint32_t)be32(p + 4));
}

/* COMPRESSED_FLAG (protocol/message_flags.py): a compressed body is inflated by the Python path. */
#define RR_COMPRESSED_FLAG 0x1

/* string_to_properties over the record's properties bytes: items split by 0x02, a name and a
 * value (both non-empty) split by the first 0x01, a repeated name keeps its last value. 0 and the
 * dict in *out, -1 on a Python error, 1 to decline (an item kept that is not UTF-8: the reference
 * decodes with "replace"). */
static int record_properties(const uint8_t *pr, Py_ssize_t n, PyObject **out)
{
    PyObject *props = PyDict_New();
    if (props == NULL)
        return -1;
    Py_ssize_t s = 0;
    while (s <= n) {
        const uint8_t *sep = s < n ? memchr(pr + s, 0x02, (size_t)(n - s)) : NULL;
        Py_ssize_t e = sep ? (Py_ssize_t)(sep - pr) : n;
        const uint8_t *cut = e > s ? memchr(pr + s, 0x01, (size_t)(e - s)) : NULL;
        if (cut != NULL && cut > pr + s && cut < pr + e - 1) {
            Py_ssize_t c = (Py_ssize_t)(cut - pr);
            PyObject *name = PyUnicode_DecodeUTF8((const char *)pr + s, c - s, NULL);
            PyObject *value = name ? PyUnicode_DecodeUTF8((const char *)pr + c + 1, e - c - 1, NULL) : NULL;
            if (value == NULL) {
                Py_XDECREF(name);
                Py_DECREF(props);
                if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    PyErr_Clear();
                    return 1;
                }
                return -1;
            }
            int failed = PyDict_SetItem(props, name, value);
            Py_DECREF(name);
            Py_DECREF(value);
            if (failed < 0) {
                Py_DECREF(props);
                return -1;
            }
        }
        if (sep == NULL)
            break;
        s = e + 1;
    }
    *out = props;
    return 0;
}

static PyObject *K_UNIQ, *K_BORN_HOST;

/* record_response(record, topic, topic_field, invisible_field, system_names, attempt, receipt_handle,
 *                 digest) -> bytes | None
 * ReceivedMessages.response(decode_message(record), ...)'s bytes straight from a record the caller
 * validated (decode_message's checks), through encode_response; ``digest(body)`` gives the body's
 * MD5 in upper-case hex. None (declined: the caller takes the Python path) for what the reference
 * does in Python: a compressed body, an IPv6 host, a topic other than ``topic`` (UTF-8 bytes), no
 * UNIQ_KEY, a TIMER_DELIVER_MS, text that is not UTF-8, or a layout that does not add up. */
static PyObject *record_response(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "record_response takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *record = args[0], *topic = args[1];
    if (!PyBytes_Check(record) || !PyBytes_Check(topic)) {
        PyErr_SetString(PyExc_TypeError, "the record and the topic must be bytes");
        return NULL;
    }
    const uint8_t *r = (const uint8_t *)PyBytes_AS_STRING(record);
    Py_ssize_t size = PyBytes_GET_SIZE(record);
    if (size < RECORD_MIN_RECORD_SIZE)
        Py_RETURN_NONE;
    int32_t total = be32(r + RECORD_TOTAL_SIZE_AT), magic = be32(r + RECORD_MAGIC_CODE_AT);
    int32_t sys_flag = be32(r + RECORD_SYS_FLAG_AT);
    if (total != size || (magic != RECORD_MAGIC_CODE_V1 && magic != RECORD_MAGIC_CODE_V2) ||
        (sys_flag & (RR_COMPRESSED_FLAG | RECORD_BORNHOST_V6_FLAG | RECORD_STOREHOST_V6_FLAG)))
        Py_RETURN_NONE;
    int64_t body_len_at = record_body_length_at(sys_flag);
    int64_t store_host_at = record_store_timestamp_at(sys_flag) + RECORD_STORE_TIMESTAMP_WIDTH;
    int32_t body_len = be32(r + body_len_at);
    int64_t body_at = body_len_at + RECORD_BODY_LENGTH_WIDTH;
    int64_t topic_width = magic == RECORD_MAGIC_CODE_V1 ? RECORD_TOPIC_LENGTH_WIDTH_V1 : RECORD_TOPIC_LENGTH_WIDTH_V2;
    if (body_len < 0 || body_at + body_len + topic_width > size)
        Py_RETURN_NONE;
    int64_t topic_len_at = body_at + body_len;
    int64_t topic_len = topic_width == 1 ? (int8_t)r[topic_len_at]
                                         : (int16_t)(((uint16_t)r[topic_len_at] << 8) | r[topic_len_at + 1]);
    int64_t topic_at = topic_len_at + topic_width;
    if (topic_len != PyBytes_GET_SIZE(topic) || topic_at + topic_len + RECORD_PROPERTIES_LENGTH_WIDTH > size ||
        memcmp(r + topic_at, PyBytes_AS_STRING(topic), (size_t)topic_len) != 0)
        Py_RETURN_NONE;
    int64_t props_len_at = topic_at + topic_len;
    int64_t props_len = (int16_t)(((uint16_t)r[props_len_at] << 8) | r[props_len_at + 1]);
    int64_t props_at = props_len_at + RECORD_PROPERTIES_LENGTH_WIDTH;
    if (props_len < 0 || props_at + props_len != size)
        Py_RETURN_NONE;

    PyObject *props = NULL, *body = NULL, *digest = NULL, *born_host = NULL, *store_field = NULL;
    PyObject *born_ms = NULL, *store_ms = NULL, *queue_id = NULL, *queue_offset = NULL, *result = NULL;
    int declined = record_properties(r + props_at, props_len, &props);
    if (declined < 0)
        return NULL;
    if (declined)
        Py_RETURN_NONE;
    PyObject *message_id = PyDict_GetItemWithError(props, K_UNIQ);
    if (message_id == NULL || PyDict_Contains(props, K_DELIVER_MS) != 0) {
        if (!PyErr_Occurred())
            result = Py_NewRef(Py_None);
        goto done;
    }
    born_host = PyDict_GetItemWithError(props, K_BORN_HOST);
    if (born_host != NULL) {
        Py_INCREF(born_host);
    } else if (PyErr_Occurred()) {
        goto done;
    } else {
        const uint8_t *ip = r + RECORD_BORN_HOST_AT;
        born_host = PyUnicode_FromFormat("%u.%u.%u.%u", ip[0], ip[1], ip[2], ip[3]);
        if (born_host == NULL)
            goto done;
    }
    {
        /* SystemProperties.store_host (10): "a.b.c.d:port" */
        const uint8_t *ip = r + store_host_at;
        char text[32];
        int n = snprintf(text, sizeof text, "%u.%u.%u.%u:%d", ip[0], ip[1], ip[2], ip[3], (int)be32(ip + 4));
        if (n <= 0 || n >= (int)sizeof text) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        char field[34];
        field[0] = 0x52;
        field[1] = (char)n;
        memcpy(field + 2, text, (size_t)n);
        store_field = PyBytes_FromStringAndSize(field, n + 2);
        if (store_field == NULL)
            goto done;
    }
    body = PyMemoryView_FromMemory((char *)r + body_at, body_len, PyBUF_READ);
    if (body == NULL)
        goto done;
    digest = PyObject_CallOneArg(args[7], body);
    born_ms = PyLong_FromLongLong(be64(r + RECORD_BORN_TIMESTAMP_AT));
    store_ms = PyLong_FromLongLong(be64(r + record_store_timestamp_at(sys_flag)));
    queue_id = PyLong_FromLong(be32(r + RECORD_QUEUE_ID_AT));
    queue_offset = PyLong_FromLongLong(be64(r + RECORD_QUEUE_OFFSET_AT));
    if (digest == NULL || born_ms == NULL || store_ms == NULL || queue_id == NULL || queue_offset == NULL)
        goto done;
    {
        PyObject *parts[16] = {props,      args[4], body,     digest,   message_id,   born_host,
                               born_ms,    store_ms, Py_None, args[6],  queue_id,     queue_offset,
                               args[5],    args[2], store_field, args[3]};
        result = encode_response(module, parts, 16);
    }
done:
    Py_XDECREF(props);
    Py_XDECREF(body);
    Py_XDECREF(digest);
    Py_XDECREF(born_host);
    Py_XDECREF(store_field);
    Py_XDECREF(born_ms);
    Py_XDECREF(store_ms);
    Py_XDECREF(queue_id);
    Py_XDECREF(queue_offset);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_response", (PyCFunction)(void (*)(void))encode_response, METH_FASTCALL,
     "One received message's ReceiveMessageResponse bytes (message_bytes.encode_response)."},
    {"record_response", (PyCFunction)(void (*)(void))record_response, METH_FASTCALL,
     "A stored record's ReceiveMessageResponse bytes, or None (message_bytes.ReceivedMessages.record)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_message_bytes_fast", "The compiled twin of server/grpc/message_bytes.py.", -1,
    methods,
};

PyMODINIT_FUNC PyInit__message_bytes_fast(void)
{
    struct {
        PyObject **slot;
        const char *name;
    } keys[] = {
        {&K_TAGS, "TAGS"},
        {&K_KEYS, "KEYS"},
        {&K_SHARDING, "__SHARDINGKEY"},
        {&K_TRACE, "TRACE_CONTEXT"},
        {&K_TRAN, "TRAN_MSG"},
        {&K_DELAY, "DELAY"},
        {&K_DELIVER_MS, "TIMER_DELIVER_MS"},
        {&K_DELAY_SEC, "TIMER_DELAY_SEC"},
        {&K_DELAY_MS, "TIMER_DELAY_MS"},
        {&K_UNIQ, "UNIQ_KEY"},
        {&K_BORN_HOST, "__BORNHOST"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        *keys[i].slot = PyUnicode_InternFromString(keys[i].name);
        if (*keys[i].slot == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
