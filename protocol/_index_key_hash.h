/*
 * Java's String.hashCode over a key's UTF-16 code units and IndexFile.indexKeyHashMethod, stated once
 * for the compiled code that hashes keys: protocol/_index_key_fast.c (the twins of
 * protocol/index_key.py, the reference) and the compiled QUERY_MESSAGE (server/remoting/_query_loop.h).
 * The hash is h = 31 * h + unit, so a key "topic#key" is hashed piece by piece, continuing from h.
 */
#ifndef RMQ_INDEX_KEY_HASH_H
#define RMQ_INDEX_KEY_HASH_H

#include <Python.h>
#include <stdint.h>

#include "_java_string_hash.h"

/* h continued over the code units of str s (ready): a code point above U+FFFF counts as its surrogate
 * pair (as Java stores it); a lone surrogate (what "surrogatepass" decoding gives) is one code unit. */
static inline int32_t java_hash_str(int32_t start, PyObject *s) {
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    uint32_t h = (uint32_t)start;
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = data;
        for (Py_ssize_t i = 0; i < n; i++) h = h * 31u + p[i];
        return (int32_t)h;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        h = java_hash_code_point(h, PyUnicode_READ(kind, data, i));
    }
    return (int32_t)h;
}

/* h continued over n ASCII bytes (each byte is its own code unit). */
static inline int32_t java_hash_ascii(int32_t start, const unsigned char *p, Py_ssize_t n) {
    uint32_t h = (uint32_t)start;
    for (Py_ssize_t i = 0; i < n; i++) h = h * 31u + p[i];
    return (int32_t)h;
}

/* IndexFile.indexKeyHashMethod: abs(hashCode), 0 for Integer.MIN_VALUE. */
static inline int32_t java_index_hash(int32_t h) {
    if (h == INT32_MIN) return 0;
    return h < 0 ? -h : h;
}

#endif
