/*
 * A SEND_BATCH_MESSAGE body's format, once for every compiled reader of it: the body decoder
 * (protocol/_batch_decode_fast.c, the twin of protocol/send_message.py's decode_batch_body) and the
 * compiled request path's plain batches (server/remoting/_request_path_plain.h), so that what one
 * calls a message the other does too.
 *
 * Each message is TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODY length (five big-endian int32), the
 * body, a big-endian int16 properties length and the properties (MessageDecoder.encodeMessages).
 * Java walks the body by the inner lengths and never checks TOTALSIZE against them, so neither do
 * we; but every length must stay inside the body, or the body does not parse.
 *
 * The stored properties of a message are its own, then 0x02 unless they are empty or already end
 * with it, then the batch's own (the broker's needAppendLastPropertySeparator).
 */
#ifndef RMQ_BATCH_BODY_H
#define RMQ_BATCH_BODY_H

#include <Python.h>
#include <stdint.h>

#define BATCH_HEAD_SIZE 20
#define BATCH_PROPERTY_SEPARATOR 0x02

typedef struct {
    int32_t flag;
    const unsigned char *body, *properties;
    Py_ssize_t body_n, properties_n;
} batch_item_t;

/* The message at *pos of buf[0:end] into item, *pos moved past it: 1, 0 at the end of the body, -1
 * when a length runs past the body (the body does not parse). */
static inline int batch_body_next(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, batch_item_t *item)
{
    Py_ssize_t at = *pos;
    if (at >= end)
        return 0;
    if (end - at < BATCH_HEAD_SIZE + 2)
        return -1;
    const unsigned char *h = buf + at;
    int32_t body_n = (int32_t)(((uint32_t)h[16] << 24) | ((uint32_t)h[17] << 16) | ((uint32_t)h[18] << 8) | h[19]);
    Py_ssize_t start = at + BATCH_HEAD_SIZE;
    if (body_n < 0 || (Py_ssize_t)body_n > end - start - 2)
        return -1;
    Py_ssize_t props_at = start + body_n;
    int16_t props_n = (int16_t)(((uint16_t)buf[props_at] << 8) | buf[props_at + 1]);
    if (props_n < 0 || (Py_ssize_t)props_n > end - props_at - 2)
        return -1;
    item->flag = (int32_t)(((uint32_t)h[12] << 24) | ((uint32_t)h[13] << 16) | ((uint32_t)h[14] << 8) | h[15]);
    item->body = buf + start;
    item->body_n = body_n;
    item->properties = buf + props_at + 2;
    item->properties_n = props_n;
    *pos = props_at + 2 + props_n;
    return 1;
}

/* Whether a separator goes between a message's own properties and a non-empty batch suffix. */
static inline int batch_needs_separator(const unsigned char *own, Py_ssize_t own_n, Py_ssize_t suffix_n)
{
    return suffix_n > 0 && own_n > 0 && own[own_n - 1] != BATCH_PROPERTY_SEPARATOR;
}

/* The stored properties of a message: own, the separator if needed, suffix, into out (own_n + 1 +
 * suffix_n bytes at least); their length. */
static inline Py_ssize_t batch_join_properties(const unsigned char *own, Py_ssize_t own_n, const unsigned char *suffix,
                                               Py_ssize_t suffix_n, unsigned char *out)
{
    int sep = batch_needs_separator(own, own_n, suffix_n);
    memcpy(out, own, (size_t)own_n);
    if (sep)
        out[own_n] = BATCH_PROPERTY_SEPARATOR;
    if (suffix_n > 0)
        memcpy(out + own_n + sep, suffix, (size_t)suffix_n);
    return own_n + sep + suffix_n;
}

#endif
