/*
 * The C interface of protocol._header_json_fast, for the frame decoder (protocol/_frame_fast.c):
 * a capsule holding one function pointer, so that decoding a frame's JSON header costs no Python
 * call.
 *
 * decode_common(data, size, body, &out): the compiled path of decode_json_header over data[0:size],
 * with body (borrowed; NULL means None) as the command's body. Returns 1 and a new
 * RemotingCommand in *out; 0 when the header is not of the common shape (the caller must ask the
 * Python reference, which decides and raises the error if any); -1 with a Python error set
 * (MemoryError only).
 */
#ifndef PROTOCOL_HEADER_JSON_FAST_H
#define PROTOCOL_HEADER_JSON_FAST_H

#include <Python.h>

#define HEADER_JSON_FAST_CAPSULE "protocol._header_json_fast._C_API"

typedef struct {
    int (*decode_common)(const char *data, Py_ssize_t size, PyObject *body, PyObject **out);
} header_json_fast_api;

#endif
