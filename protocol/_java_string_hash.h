/*
 * One step of Java's String.hashCode (h = 31 * h + unit over the UTF-16 code units), for one code
 * point: a code point above U+FFFF counts as its surrogate pair, as Java stores it. Shared by the key
 * hash of the IndexFiles (_index_key_hash.h, from Python strings) and the HashMap order of a SEND's
 * stored properties (_java_hashmap.h, from UTF-8 bytes).
 */
#ifndef RMQ_JAVA_STRING_HASH_H
#define RMQ_JAVA_STRING_HASH_H

#include <stdint.h>

static inline uint32_t java_hash_code_point(uint32_t h, uint32_t c)
{
    if (c >= 0x10000) {
        c -= 0x10000;
        h = h * 31u + (0xD800u + (c >> 10));
        return h * 31u + (0xDC00u + (c & 0x3FFu));
    }
    return h * 31u + c;
}

#endif
