/*
 * The CommitLog record layout for the compiled twins: the same declaration as protocol/record_layout.py
 * (read its docstring for the layout and where it comes from: RocketMQ 4.9.7 CommitLog.calMsgLength,
 * MessageDecoder, CommitLog.DefaultAppendMessageCallback). Every C file that reads records includes
 * this header instead of stating offsets of its own; tests/protocol/test_record_layout.py checks that
 * each RECORD_* name below has the value of the Python constant of the same name without the prefix.
 *
 * Everything is a constant or a static inline function of constants: a read such as
 * p0 + record_body_length_at(sys_flag) compiles to the same code as the literal offsets did.
 */
#ifndef RMQ_RECORD_LAYOUT_H
#define RMQ_RECORD_LAYOUT_H
#include <stdint.h>

/* -- magic codes (the signed int32 Java writes) -- */
#define RECORD_MAGIC_CODE_V1 ((int32_t)0xDAA320A7u)
#define RECORD_MAGIC_CODE_V2 ((int32_t)0xDAA320ABu)
#define RECORD_BLANK_MAGIC_CODE ((int32_t)0xCBD43194u)

/* -- the sysFlag bits that move fields -- */
#define RECORD_BORNHOST_V6_FLAG 0x10
#define RECORD_STOREHOST_V6_FLAG 0x20

/* -- field widths (bytes) -- */
#define RECORD_TOTAL_SIZE_WIDTH 4
#define RECORD_HOST_V4_WIDTH 8  /* 4-byte address + 4-byte port */
#define RECORD_HOST_V6_WIDTH 20 /* 16-byte address + 4-byte port */
#define RECORD_STORE_TIMESTAMP_WIDTH 8
#define RECORD_RECONSUME_TIMES_WIDTH 4
#define RECORD_PREPARED_TRANSACTION_OFFSET_WIDTH 8
#define RECORD_BODY_LENGTH_WIDTH 4
#define RECORD_TOPIC_LENGTH_WIDTH_V1 1 /* signed byte */
#define RECORD_TOPIC_LENGTH_WIDTH_V2 2 /* signed short */
#define RECORD_PROPERTIES_LENGTH_WIDTH 2 /* signed short */

/* -- fixed offsets -- */
#define RECORD_TOTAL_SIZE_AT 0
#define RECORD_MAGIC_CODE_AT 4
#define RECORD_BODY_CRC_AT 8
#define RECORD_QUEUE_ID_AT 12
#define RECORD_FLAG_AT 16
#define RECORD_QUEUE_OFFSET_AT 20
#define RECORD_PHYSICAL_OFFSET_AT 28
#define RECORD_SYS_FLAG_AT 36
#define RECORD_BORN_TIMESTAMP_AT 40
#define RECORD_BORN_HOST_AT 48

/* TOTALSIZE + MAGICCODE: what every record and every end-of-file blank begins with. */
#define RECORD_SIZE_MAGIC_WIDTH 8
/* The end-of-file blank (END_FILE_MIN_BLANK_LENGTH). */
#define RECORD_BLANK_SIZE 8
/* V1, IPv4 hosts, empty body, topic and properties. */
#define RECORD_MIN_RECORD_SIZE 91

/* -- the parts that move with the IPv6 bits -- */
static inline int64_t record_born_host_width(int32_t sys_flag)
{
    return (sys_flag & RECORD_BORNHOST_V6_FLAG) ? RECORD_HOST_V6_WIDTH : RECORD_HOST_V4_WIDTH;
}

static inline int64_t record_store_host_width(int32_t sys_flag)
{
    return (sys_flag & RECORD_STOREHOST_V6_FLAG) ? RECORD_HOST_V6_WIDTH : RECORD_HOST_V4_WIDTH;
}

/* Offset of STORETIMESTAMP: 56, or 68 after an IPv6 born host. */
static inline int64_t record_store_timestamp_at(int32_t sys_flag)
{
    return RECORD_BORN_HOST_AT + record_born_host_width(sys_flag);
}

/* Offset of BODYLEN: 84, 96 or 108 (the body starts RECORD_BODY_LENGTH_WIDTH later). */
static inline int64_t record_body_length_at(int32_t sys_flag)
{
    return record_store_timestamp_at(sys_flag) + RECORD_STORE_TIMESTAMP_WIDTH + record_store_host_width(sys_flag) +
           RECORD_RECONSUME_TIMES_WIDTH + RECORD_PREPARED_TRANSACTION_OFFSET_WIDTH;
}

#endif
