/*
 * The iteration order of a java.util.HashMap<String, String>, for the compiled code that writes a
 * map as Java serializes it (server/remoting/_request_path_plain.h: a SEND's stored properties).
 * The reference is protocol/java_hashmap.py (JavaHashMap); tests compare the two through the bytes
 * each stores.
 *
 * A default HashMap has 16 buckets, doubled whenever a put makes its size pass 3/4 of them (and never
 * shrunk); a key lives in bucket (h ^ (h >>> 16)) & (buckets - 1), h being String.hashCode over the
 * key's UTF-16 code units; iteration walks the buckets in index order, each in insertion order. A bin
 * of 9 keys turns into a tree in Java, ordered otherwise: callers leave a map with a bin of 8 or more
 * to the reference.
 */
#ifndef RMQ_JAVA_HASHMAP_H
#define RMQ_JAVA_HASHMAP_H

#include <stdint.h>
#include <stddef.h>

#include "_java_string_hash.h"

/* The buckets of a default HashMap after `size` puts of distinct keys (JavaHashMap._capacity). */
static inline uint32_t java_hashmap_capacity(size_t size)
{
    uint32_t capacity = 16;
    while (size > (size_t)capacity * 3 / 4)
        capacity *= 2;
    return capacity;
}

/* HashMap.hash's spread and the bucket index. */
static inline uint32_t java_hashmap_bucket(int32_t hash_code, uint32_t capacity)
{
    uint32_t h = (uint32_t)hash_code;
    return (h ^ (h >> 16)) & (capacity - 1);
}

/* String.hashCode of the text whose strict UTF-8 is p[0..n): h = 31 * h + unit over its UTF-16 code
 * units (a code point above U+FFFF as its surrogate pair). 0 and *hash set, or -1 when p is not strict
 * UTF-8 (an overlong form, a surrogate, past U+10FFFF, a cut sequence): the caller leaves such text to
 * the reference. */
static inline int java_hash_utf8(const uint8_t *p, size_t n, int32_t *hash)
{
    uint32_t h = 0;
    size_t i = 0;
    while (i < n) {
        uint32_t c = p[i];
        size_t len;
        if (c < 0x80) {
            h = h * 31u + c;
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            c &= 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            c &= 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            c &= 0x07;
        } else {
            return -1;
        }
        if (n - i < len)
            return -1;
        for (size_t k = 1; k < len; k++) {
            uint8_t b = p[i + k];
            if ((b & 0xC0) != 0x80)
                return -1;
            c = (c << 6) | (b & 0x3F);
        }
        if ((len == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (len == 4 && (c < 0x10000 || c > 0x10FFFF)))
            return -1;
        h = java_hash_code_point(h, c);
        i += len;
    }
    *hash = (int32_t)h;
    return 0;
}

#endif
