/*
 * A stored record's properties as both dispatchers read them, for the compiled twins: one pass over
 * the properties bytes finds what the consume queue needs (the last non-empty TAGS value, whether a
 * DELAY item is present) and what the index needs (the last non-empty KEYS and UNIQ_KEY values).
 * The rules are protocol/message_properties.py's (0x02 separates items, 0x01 a name from its value;
 * neither byte occurs inside a multi-byte UTF-8 sequence), as store/reput/decode.py's dispatch_entry
 * and index_record read them.
 *
 * Why one header (h50): the consume queue's walk (store/consumequeue/_consume_queue_build_fast.c)
 * and the index's (store/index/_index_range_fast.c) each scanned every record's properties; the
 * writer's own settle now parses each record once, in the consume queue's walk, and hands the index
 * a record_parsed_t per record (the "parsed" argument of both), so the rule lives here, once.
 */
#ifndef RMQ_RECORD_PROPERTIES_H
#define RMQ_RECORD_PROPERTIES_H
#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *tags, *keys, *uniq; /* NULL: absent (or only empty values) */
    Py_ssize_t tags_len, keys_len, uniq_len;
    int has_delay;
} record_props_t;

static inline void record_props_scan(const uint8_t *pr, Py_ssize_t n, record_props_t *out)
{
    out->tags = out->keys = out->uniq = NULL;
    out->tags_len = out->keys_len = out->uniq_len = 0;
    out->has_delay = 0;
    Py_ssize_t s = 0;
    for (;;) {
        const uint8_t *sep = s < n ? memchr(pr + s, 0x02, (size_t)(n - s)) : NULL;
        Py_ssize_t stop = sep ? sep - pr : n;
        Py_ssize_t item = stop - s;
        const uint8_t *it = pr + s;
        if (item > 5 && memcmp(it, "TAGS\x01", 5) == 0) {
            out->tags = it + 5;
            out->tags_len = item - 5;
        } else if (item > 5 && memcmp(it, "KEYS\x01", 5) == 0) {
            out->keys = it + 5;
            out->keys_len = item - 5;
        } else if (item > 9 && memcmp(it, "UNIQ_KEY\x01", 9) == 0) {
            out->uniq = it + 9;
            out->uniq_len = item - 9;
        } else if (item >= 6 && memcmp(it, "DELAY\x01", 6) == 0) {
            out->has_delay = 1;
        }
        if (sep == NULL)
            break;
        s = stop + 1;
    }
}

/* One record as the consume queue's walk parsed it, for the index (native byte order: it never
 * leaves the process). Offsets are from the record's first byte; a length of -1 is an absent value.
 * Written only for a record that passes every check the index's own parse makes (parse_record with
 * the CRC left to the caller: magic, size, PHYSICALOFFSET, lengths that add up to TOTALSIZE), so the
 * index may take it instead of parsing; anything else gets no entry and the index parses it. */
typedef struct {
    int64_t pos;      /* the record's position in the run's view */
    int64_t size;     /* TOTALSIZE */
    int64_t store_ts; /* STORETIMESTAMP */
    int32_t sys_flag;
    int32_t topic_at, topic_len;
    int32_t keys_at, keys_len;
    int32_t uniq_at, uniq_len;
    int32_t reserved; /* zero */
} record_parsed_t;

#endif
