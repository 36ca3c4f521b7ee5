/* The v2 wire format of a received message (apache.rocketmq.v2 definition.proto / service.proto), as
 * the compiled twin in _message_bytes_fast.c writes it: each field's tag byte(s) (field number << 3 |
 * wire type: 0 varint, 2 length-delimited) and the enum values it names. The Python reference is
 * server/grpc/message_bytes.py; tests/server/grpc/test_message_bytes.py compares both with the
 * protobuf objects' serialization. */
#ifndef RMQ_RECEIVED_MESSAGE_H
#define RMQ_RECEIVED_MESSAGE_H

/* ReceiveMessageResponse.message (2) */
#define RM_RESPONSE_MESSAGE 0x12
/* Message: topic (1) is passed in whole; user_properties (2, map entries of key 1, value 2),
 * system_properties (3), body (4) */
#define RM_USER_PROPERTY 0x12
#define RM_ENTRY_KEY 0x0a
#define RM_ENTRY_VALUE 0x12
#define RM_SYSTEM_PROPERTIES 0x1a
#define RM_BODY 0x22
/* SystemProperties */
#define RM_TAG 0x0a                 /* 1 */
#define RM_KEYS 0x12                /* 2, repeated */
#define RM_MESSAGE_ID 0x1a          /* 3 */
#define RM_BODY_DIGEST 0x22         /* 4: Digest { type (1) = MD5, checksum (2) } */
#define RM_DIGEST_TYPE 0x08
#define RM_DIGEST_CHECKSUM 0x12
#define RM_BODY_ENCODING 0x28       /* 5 */
#define RM_MESSAGE_TYPE 0x30        /* 6 */
#define RM_BORN_TIMESTAMP 0x3a      /* 7 */
#define RM_BORN_HOST 0x42           /* 8 */
#define RM_STORE_TIMESTAMP 0x4a     /* 9; store_host (10) is passed in whole */
#define RM_DELIVERY_TIMESTAMP 0x5a  /* 11 */
#define RM_RECEIPT_HANDLE 0x62      /* 12 */
#define RM_QUEUE_ID 0x68            /* 13 */
#define RM_QUEUE_OFFSET 0x70        /* 14; invisible_duration (15) is passed in whole */
#define RM_DELIVERY_ATTEMPT "\x80\x01"  /* 16 */
#define RM_MESSAGE_GROUP "\x8a\x01"     /* 17 */
#define RM_TRACE_CONTEXT "\x92\x01"     /* 18 */
/* Timestamp / Duration: seconds (1), nanos (2) */
#define RM_SECONDS 0x08
#define RM_NANOS 0x10

/* Enums: DigestType.MD5, Encoding.IDENTITY, MessageType */
#define RM_DIGEST_MD5 2
#define RM_ENCODING_IDENTITY 1
#define RM_TYPE_NORMAL 1
#define RM_TYPE_FIFO 2
#define RM_TYPE_DELAY 3
#define RM_TYPE_TRANSACTION 4
/* An MD5 in hex */
#define RM_DIGEST_HEX 32

/* Timestamp's valid seconds (0001-01-01 to 9999-12-31) */
#define RM_TIMESTAMP_SECONDS_MIN (-62135596800LL)
#define RM_TIMESTAMP_SECONDS_MAX 253402300799LL

#endif
