/*
 * The compiled batch append of store.write.writer.RecordWriter.put_batch (issue 33): the records of
 * one batch (SEND_BATCH_MESSAGE's, or a lone SEND's one) encoded in one call, where the Python path
 * builds a MessageExt and calls protocol.message.encode_message per record (17-24 us each).
 *
 *   encode_uniform(recs, born_addr, store_addr, store_port, sys_flag, store_timestamp, queue_offset, place)
 *     -> (data, sizes, offset_msg_ids, unique_keys) or None
 *
 * Only for records that share everything but their flag, body and properties (a batch from
 * server.broker.put_message.batch_records does): topic, queue id, sysFlag, born timestamp, born host
 * and port, reconsume times, prepared transaction offset, store host and port are recs[0]'s, compared
 * per record. None, before anything else is done, when they do not, or when anything is outside
 * what this writes (a topic over 127 UTF-8 bytes, a body that is not bytes, properties that are not
 * UTF-8 or longer than 32767 bytes, a value out of its width): the caller then takes the Python path,
 * which stores the same bytes or raises its own error. Otherwise place(total) is called once with
 * the batch's size and answers its first CommitLog offset (it may raise: nothing else was done),
 * and the records are written back to back from there: queue offsets consecutive from queue_offset
 * (every one 0 when queue_offset is None: a prepared or rolled-back transaction), BODYCRC each
 * body's CRC-32 & 0x7FFFFFFF, the offset message id upper-case hex of store_addr, store_port and the
 * record's offset, the unique key the last non-empty UNIQ_KEY of the properties (as
 * string_to_properties keeps), decoded with "replace". The record layout is _record_encode.h's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_crc32.h"
#include "_py_int_range.h"
#include "_record_encode.h"

/* The attributes every record must share with the first. */
static const char *const SAME_NAMES[] = {"topic", "queue_id", "sys_flag", "born_timestamp", "born_host", "born_port",
                                          "reconsume_times", "prepared_transaction_offset", "store_host", "store_port"};
#define N_SAME (sizeof SAME_NAMES / sizeof SAME_NAMES[0])
static PyObject *same_attr[N_SAME];
static PyObject *s_flag, *s_body, *s_properties;

static int attr_in_range(PyObject *rec, PyObject *name, long long lo, long long hi, long long *out)
{
    PyObject *o = PyObject_GetAttr(rec, name);
    if (o == NULL) {
        PyErr_Clear();
        return 0;
    }
    int ok = py_int_in_range(o, lo, hi, out);
    Py_DECREF(o);
    return ok;
}

/* Where the value of the last item "UNIQ_KEY\x01<non-empty>" starts (NULL if none). */
static const uint8_t *unique_key(const uint8_t *p, Py_ssize_t n, Py_ssize_t *len)
{
    static const char name[] = "UNIQ_KEY";
    const Py_ssize_t name_len = (Py_ssize_t)(sizeof name - 1);
    const uint8_t *found = NULL, *end = p + n, *item = p;
    while (item <= end) {
        const uint8_t *stop = memchr(item, 0x02, (size_t)(end - item));
        if (stop == NULL)
            stop = end;
        const uint8_t *cut = memchr(item, 0x01, (size_t)(stop - item));
        /* string_to_properties: 0 < cut < len(item) - 1 */
        if (cut != NULL && cut - item == name_len && stop - cut > 1 && memcmp(item, name, (size_t)name_len) == 0) {
            found = cut + 1;
            *len = stop - found;
        }
        item = stop + 1;
    }
    return found;
}

static const char HEX[] = "0123456789ABCDEF";

static PyObject *offset_msg_id(const uint8_t *addr, Py_ssize_t addr_len, int32_t port, int64_t offset)
{
    uint8_t raw[28];
    memcpy(raw, addr, (size_t)addr_len);
    record_put_i64(record_put_i32(raw + addr_len, port), offset);
    Py_ssize_t n = addr_len + 12;
    char text[56];
    for (Py_ssize_t i = 0; i < n; i++) {
        text[2 * i] = HEX[raw[i] >> 4];
        text[2 * i + 1] = HEX[raw[i] & 15];
    }
    return PyUnicode_FromStringAndSize(text, 2 * n);
}

static PyObject *encode_uniform(PyObject *self, PyObject *args)
{
    PyObject *recs, *queue_offset_obj, *place;
    Py_buffer born_addr, store_addr;
    long long store_port, sys_flag, store_timestamp;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!y*y*LLLOO", &PyList_Type, &recs, &born_addr, &store_addr, &store_port, &sys_flag,
                          &store_timestamp, &queue_offset_obj, &place))
        return NULL;
    PyObject *result = NULL, *first_same[N_SAME] = {NULL};
    Py_ssize_t n = PyList_GET_SIZE(recs);
    struct record_fields *fields = NULL;
    PyObject *data = NULL, *sizes = NULL, *ids = NULL, *keys = NULL;
    long long v, queue_offset = 0;
    int skips_queue = queue_offset_obj == Py_None;
    int32_t flags32 = (int32_t)sys_flag;
    if (n == 0 || sys_flag < INT32_MIN || sys_flag > INT32_MAX || store_port < INT32_MIN || store_port > INT32_MAX ||
        born_addr.len != record_born_host_width(flags32) - 4 || store_addr.len != record_store_host_width(flags32) - 4 ||
        (!skips_queue && !py_int_in_range(queue_offset_obj, 0, INT64_MAX - n, &queue_offset)))
        goto not_here;
    PyObject *first = PyList_GET_ITEM(recs, 0);
    for (size_t k = 0; k < N_SAME; k++) {
        first_same[k] = PyObject_GetAttr(first, same_attr[k]);
        if (first_same[k] == NULL) {
            PyErr_Clear();
            goto not_here;
        }
    }
    struct record_fields base = {0};
    Py_ssize_t topic_len;
    if (!PyUnicode_Check(first_same[0]))
        goto not_here;
    const char *topic = PyUnicode_AsUTF8AndSize(first_same[0], &topic_len);
    if (topic == NULL) {
        PyErr_Clear();
        goto not_here;
    }
    if (topic_len > 0x7F)
        goto not_here;
    base.topic = (const uint8_t *)topic;
    base.topic_len = topic_len;
    if (!py_int_in_range(first_same[1], INT32_MIN, INT32_MAX, &v))
        goto not_here;
    base.queue_id = (int32_t)v;
    base.sys_flag = flags32;
    if (!py_int_in_range(first_same[3], INT64_MIN, INT64_MAX, &v))
        goto not_here;
    base.born_timestamp = v;
    if (!py_int_in_range(first_same[5], INT32_MIN, INT32_MAX, &v))
        goto not_here;
    base.born_port = (int32_t)v;
    if (!py_int_in_range(first_same[6], INT32_MIN, INT32_MAX, &v))
        goto not_here;
    base.reconsume_times = (int32_t)v;
    if (!py_int_in_range(first_same[7], INT64_MIN, INT64_MAX, &v))
        goto not_here;
    base.prepared_transaction_offset = v;
    base.store_timestamp = store_timestamp;
    base.store_port = (int32_t)store_port;
    base.born_addr = born_addr.buf;
    base.store_addr = store_addr.buf;

    fields = PyMem_Malloc(sizeof *fields * (size_t)n);
    if (fields == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Every check before place: a record this call cannot write leaves everything to the Python path. */
    int64_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = PyList_GET_ITEM(recs, i);
        if (i > 0) {
            for (size_t k = 0; k < N_SAME; k++) {
                PyObject *o = PyObject_GetAttr(rec, same_attr[k]);
                if (o == NULL) {
                    PyErr_Clear();
                    goto not_here;
                }
                int eq = o == first_same[k] ? 1 : PyObject_RichCompareBool(o, first_same[k], Py_EQ);
                Py_DECREF(o);
                if (eq != 1) {
                    PyErr_Clear();
                    goto not_here;
                }
            }
        }
        struct record_fields *f = &fields[i];
        *f = base;
        if (!attr_in_range(rec, s_flag, INT32_MIN, INT32_MAX, &v))
            goto not_here;
        f->flag = (int32_t)v;
        /* the record keeps them alive: borrowed pointers stay valid for this call */
        PyObject *body = PyObject_GetAttr(rec, s_body), *props = PyObject_GetAttr(rec, s_properties);
        Py_XDECREF(body);
        Py_XDECREF(props);
        if (body == NULL || props == NULL || !PyBytes_CheckExact(body)) {
            PyErr_Clear();
            goto not_here;
        }
        f->body = (const uint8_t *)PyBytes_AS_STRING(body);
        f->body_len = PyBytes_GET_SIZE(body);
        if (PyBytes_CheckExact(props)) {
            f->properties = (const uint8_t *)PyBytes_AS_STRING(props);
            f->properties_len = PyBytes_GET_SIZE(props);
        } else if (PyUnicode_CheckExact(props)) {
            Py_ssize_t len;
            const char *utf8 = PyUnicode_AsUTF8AndSize(props, &len);
            if (utf8 == NULL) {
                PyErr_Clear();
                goto not_here;
            }
            f->properties = (const uint8_t *)utf8;
            f->properties_len = len;
        } else {
            goto not_here;
        }
        if (f->properties_len > 0x7FFF || f->body_len > INT32_MAX)
            goto not_here;
        total += record_v1_size(flags32, f->body_len, f->topic_len, f->properties_len);
    }
    if (total > INT32_MAX)
        goto not_here;
    PyObject *placed = PyObject_CallFunction(place, "L", (long long)total);
    if (placed == NULL)
        goto done;
    long long offset;
    int ok = py_int_in_range(placed, 0, INT64_MAX - total, &offset);
    Py_DECREF(placed);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "place() must answer a CommitLog offset");
        goto done;
    }
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    sizes = PyList_New(n);
    ids = PyList_New(n);
    keys = PyList_New(n);
    if (data == NULL || sizes == NULL || ids == NULL || keys == NULL)
        goto done;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    for (Py_ssize_t i = 0; i < n; i++) {
        struct record_fields *f = &fields[i];
        f->queue_offset = skips_queue ? 0 : queue_offset + i;
        f->physical_offset = offset;
        f->body_crc = (int32_t)(crc32_ieee(f->body, (size_t)f->body_len) & 0x7FFFFFFFu);
        uint8_t *end = record_v1_encode(out, f);
        PyObject *size = PyLong_FromSsize_t(end - out);
        PyObject *id = offset_msg_id(store_addr.buf, store_addr.len, base.store_port, offset);
        Py_ssize_t key_len = 0;
        const uint8_t *key_at = unique_key(f->properties, f->properties_len, &key_len);
        PyObject *key = key_at == NULL ? Py_NewRef(Py_None) : PyUnicode_DecodeUTF8((const char *)key_at, key_len, "replace");
        PyList_SET_ITEM(sizes, i, size);
        PyList_SET_ITEM(ids, i, id);
        PyList_SET_ITEM(keys, i, key);
        if (size == NULL || id == NULL || key == NULL)
            goto done;
        offset += end - out;
        out = end;
    }
    result = PyTuple_Pack(4, data, sizes, ids, keys);
    goto done;
not_here:
    result = Py_NewRef(Py_None);
done:
    for (size_t k = 0; k < N_SAME; k++)
        Py_XDECREF(first_same[k]);
    Py_XDECREF(data);
    Py_XDECREF(sizes);
    Py_XDECREF(ids);
    Py_XDECREF(keys);
    PyMem_Free(fields);
    PyBuffer_Release(&born_addr);
    PyBuffer_Release(&store_addr);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_uniform", encode_uniform, METH_VARARGS,
     "encode_uniform(recs, born_addr, store_addr, store_port, sys_flag, store_timestamp, queue_offset, place)\n"
     "-> (data, sizes, offset_msg_ids, unique_keys) or None: a uniform batch appended in one call (see the file)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_batch_encode_fast", NULL, -1, methods};

PyMODINIT_FUNC PyInit__batch_encode_fast(void)
{
    crc_init();
    for (size_t k = 0; k < N_SAME; k++)
        if ((same_attr[k] = PyUnicode_InternFromString(SAME_NAMES[k])) == NULL)
            return NULL;
    if ((s_flag = PyUnicode_InternFromString("flag")) == NULL || (s_body = PyUnicode_InternFromString("body")) == NULL ||
        (s_properties = PyUnicode_InternFromString("properties")) == NULL)
        return NULL;
    return PyModule_Create(&module);
}
