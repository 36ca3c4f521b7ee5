/*
 * Writing one CommitLog record, for the compiled twins that append (store/write/_batch_encode_fast.c):
 * the byte order and field order of protocol.message.encode_message (RocketMQ 4.9.7
 * CommitLog.DefaultAppendMessageCallback.doAppend / MessageDecoder.encode), over the offsets of
 * _record_layout.h. Only this header states how a record is written in C; the Python reference is
 * encode_message, and tests/store/test_batch_encode.py compares the two byte for byte.
 *
 * The caller has checked every value fits its width (ints passed here are written as they are) and
 * that the topic fits MAGIC_CODE_V1 (its length is one signed byte).
 */
#ifndef RMQ_RECORD_ENCODE_H
#define RMQ_RECORD_ENCODE_H
#include <stdint.h>
#include <string.h>

#include "_record_layout.h"

static inline uint8_t *record_put_i32(uint8_t *p, int32_t v)
{
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)(u >> 24);
    p[1] = (uint8_t)(u >> 16);
    p[2] = (uint8_t)(u >> 8);
    p[3] = (uint8_t)u;
    return p + 4;
}

static inline uint8_t *record_put_i64(uint8_t *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)u;
        u >>= 8;
    }
    return p + 8;
}

/* The fields of one record that the append writes (the body, topic and properties by pointer). */
struct record_fields {
    int32_t body_crc, queue_id, flag, sys_flag, born_port, store_port, reconsume_times;
    int64_t queue_offset, physical_offset, born_timestamp, store_timestamp, prepared_transaction_offset;
    const uint8_t *born_addr, *store_addr; /* 4 or 16 bytes, as sys_flag's IPv6 bits say */
    const uint8_t *body, *topic, *properties;
    int64_t body_len, topic_len, properties_len;
};

/* TOTALSIZE of a MAGIC_CODE_V1 record with these lengths. */
static inline int64_t record_v1_size(int32_t sys_flag, int64_t body_len, int64_t topic_len, int64_t properties_len)
{
    return record_body_length_at(sys_flag) + RECORD_BODY_LENGTH_WIDTH + body_len + RECORD_TOPIC_LENGTH_WIDTH_V1 +
           topic_len + RECORD_PROPERTIES_LENGTH_WIDTH + properties_len;
}

/* Writes the MAGIC_CODE_V1 record at out (record_v1_size bytes); returns the end. */
static inline uint8_t *record_v1_encode(uint8_t *out, const struct record_fields *f)
{
    int64_t born_ip = record_born_host_width(f->sys_flag) - 4, store_ip = record_store_host_width(f->sys_flag) - 4;
    uint8_t *p = record_put_i32(out, (int32_t)record_v1_size(f->sys_flag, f->body_len, f->topic_len, f->properties_len));
    p = record_put_i32(p, RECORD_MAGIC_CODE_V1);
    p = record_put_i32(p, f->body_crc);
    p = record_put_i32(p, f->queue_id);
    p = record_put_i32(p, f->flag);
    p = record_put_i64(p, f->queue_offset);
    p = record_put_i64(p, f->physical_offset);
    p = record_put_i32(p, f->sys_flag);
    p = record_put_i64(p, f->born_timestamp);
    memcpy(p, f->born_addr, (size_t)born_ip);
    p = record_put_i32(p + born_ip, f->born_port);
    p = record_put_i64(p, f->store_timestamp);
    memcpy(p, f->store_addr, (size_t)store_ip);
    p = record_put_i32(p + store_ip, f->store_port);
    p = record_put_i32(p, f->reconsume_times);
    p = record_put_i64(p, f->prepared_transaction_offset);
    p = record_put_i32(p, (int32_t)f->body_len);
    memcpy(p, f->body, (size_t)f->body_len);
    p += f->body_len;
    *p++ = (uint8_t)f->topic_len;
    memcpy(p, f->topic, (size_t)f->topic_len);
    p += f->topic_len;
    p[0] = (uint8_t)(f->properties_len >> 8);
    p[1] = (uint8_t)f->properties_len;
    p += RECORD_PROPERTIES_LENGTH_WIDTH;
    memcpy(p, f->properties, (size_t)f->properties_len);
    return p + f->properties_len;
}

#endif
