/*
 * protocol._header_json_fast: the compiled twin of protocol.header_json.decode_json_header (same
 * name, same answers; the Python function is the readable reference and the tests check that both
 * agree).
 *
 *   bind(reference, command_class, language_lookup, other_language, json_type) -> None
 *   decode_json_header(data) -> RemotingCommand         (raises what the reference raises)
 *   decode_common_json_header(data) -> RemotingCommand | None   (the compiled path alone)
 *
 * The compiled path reads only the header shape Java's fastjson and the common clients write: one
 * flat object with no whitespace, the known keys (code, extFields, flag, language, opaque, remark,
 * serializeTypeCurrentRPC, version) at most once each, int32 numbers, a language name, ordinal or
 * null, a remark string or null, an extFields object of string values (or null) without duplicate
 * keys, strings of valid UTF-8 with JSON's escapes. For anything else (whitespace, unknown keys,
 * duplicates, other value types, numbers out of range, bad UTF-8, lone surrogates, trailing bytes)
 * it is "not sure" and the reference decides, so results, error types and messages are always the
 * reference's. It never raises a decode error of its own: only MemoryError.
 *
 * The frame decoder (protocol/_frame_fast.c) calls the compiled path without a Python call through
 * the capsule _C_API (a struct of one function pointer, see header_json_fast_api below).
 *
 * bind() hands over the Python side's objects (RemotingCommand, the language lookup dict and its
 * default, SerializeType.JSON) so that both sides build the command the same way: a positional call
 * to RemotingCommand, the language looked up in the same dict. Reads no files; GIL held throughout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_header_json_fast.h"

static PyObject *reference = NULL, *command_class = NULL, *language_lookup = NULL, *other_language = NULL,
                *json_type = NULL;

/* Results of the parsing steps. */
#define OK 1
#define UNSURE 0
#define FAILED (-1) /* a Python error is set (MemoryError) */

typedef struct {
    const unsigned char *p, *end;
} cursor;

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at p (p + 4 <= end checked by the caller) or -1. */
static long hex4(const unsigned char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p[i]);
        if (h < 0) return -1;
        v = (v << 4) | h;
    }
    return v;
}

static unsigned char *put_utf8(unsigned char *o, long cp) {
    if (cp < 0x80) {
        *o++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *o++ = (unsigned char)(0xC0 | (cp >> 6));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *o++ = (unsigned char)(0xE0 | (cp >> 12));
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | (cp >> 18));
        *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    return o;
}

/* UTF-8 bytes as str, strictly (CPython's decoder, as msgspec uses: overlong forms, encoded
 * surrogates and truncated sequences fail). A decode failure is UNSURE, not an error. */
static int utf8_to_str(const char *s, Py_ssize_t n, PyObject **out) {
    *out = PyUnicode_DecodeUTF8(s, n, "strict");
    if (*out != NULL) return OK;
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return UNSURE;
    }
    return FAILED;
}

/* Undo JSON escapes of s[0:n] (which holds at least one backslash) into UTF-8, then decode it.
 * Output is never longer than input: every escape is at least as long as the UTF-8 it stands for. */
static int unescape_to_str(const unsigned char *s, Py_ssize_t n, PyObject **out) {
    unsigned char small[256];
    unsigned char *buf = small;
    if (n > (Py_ssize_t)sizeof small) {
        buf = PyMem_Malloc((size_t)n);
        if (buf == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
    }
    const unsigned char *p = s, *end = s + n;
    unsigned char *o = buf;
    int result = UNSURE;
    while (p < end) {
        unsigned char c = *p;
        if (c != '\\') {
            *o++ = c;
            p++;
            continue;
        }
        if (end - p < 2) goto done; /* cannot happen: the scan saw a closing quote after it */
        c = p[1];
        p += 2;
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            if (end - p < 4) goto done;
            long cp = hex4(p);
            if (cp < 0) goto done;
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                /* A high surrogate must be followed by an escaped low one. */
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u') goto done;
                long low = hex4(p + 2);
                if (low < 0xDC00 || low > 0xDFFF) goto done;
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                goto done; /* a lone low surrogate */
            }
            o = put_utf8(o, cp);
            break;
        }
        default: goto done; /* not a JSON escape */
        }
    }
    result = utf8_to_str((const char *)buf, o - buf, out);
done:
    if (buf != small) PyMem_Free(buf);
    return result;
}

/* A string's bytes between its quotes, as scanned. */
typedef struct {
    const unsigned char *start;
    Py_ssize_t n;
    int escaped, ascii;
} raw_string;

/* Bytes a string cannot simply be copied over: 1 for '\\' and raw control characters (escapes or
 * not JSON), 2 for bytes beyond ASCII (UTF-8 to decode). Filled in by the module's init. */
static unsigned char byte_class[256];

/* Scan a string starting at the opening quote; leaves the cursor after the closing quote. The
 * common case (no backslash before the first quote) is one memchr and one pass over the table. */
static int scan_string(cursor *c, raw_string *s) {
    const unsigned char *p = c->p + 1, *end = c->end;
    s->start = p;
    const unsigned char *q = memchr(p, '"', (size_t)(end - p));
    if (q == NULL) return UNSURE;
    unsigned char seen = 0;
    for (const unsigned char *x = p; x < q; x++) seen |= byte_class[*x];
    if (!(seen & 1)) {
        c->p = q + 1;
        s->n = q - p;
        s->escaped = 0;
        s->ascii = !(seen & 2);
        return OK;
    }
    /* A backslash or a control character: byte by byte (an escaped quote is not the end). */
    int escaped = 0, ascii = 1;
    for (;;) {
        if (p >= end) return UNSURE;
        unsigned char ch = *p;
        if (ch == '"') break;
        if (ch < 0x20) return UNSURE; /* raw control characters are not JSON */
        if (ch == '\\') {
            escaped = 1;
            if (p + 1 >= end) return UNSURE;
            p += 2; /* the escape itself is checked when it is undone */
            continue;
        }
        if (ch >= 0x80) ascii = 0;
        p++;
    }
    c->p = p + 1;
    s->n = p - s->start;
    s->escaped = escaped;
    s->ascii = ascii;
    return OK;
}

static int build_string(const raw_string *s, PyObject **out) {
    if (s->escaped) return unescape_to_str(s->start, s->n, out);
    if (!s->ascii) return utf8_to_str((const char *)s->start, s->n, out);
    PyObject *str = PyUnicode_New(s->n, 127);
    if (str == NULL) return FAILED;
    memcpy(PyUnicode_1BYTE_DATA(str), s->start, (size_t)s->n);
    *out = str;
    return OK;
}

static int parse_string(cursor *c, PyObject **out) {
    raw_string s;
    int r = scan_string(c, &s);
    return r == OK ? build_string(&s, out) : r;
}

/* A string that is only checked (an ignored field): plain ASCII needs no decoding. */
static int skip_string(cursor *c) {
    raw_string s;
    PyObject *str;
    int r = scan_string(c, &s);
    if (r != OK || (s.ascii && !s.escaped)) return r;
    if ((r = build_string(&s, &str)) == OK) Py_DECREF(str);
    return r;
}

/* extFields keys repeat from request to request ("offset", "topic", "key", ...): a small
 * direct-mapped cache of plain ASCII keys hands back the same str object (its hash already
 * computed) instead of a new one. A str is immutable, so sharing one is invisible. */
#define KEY_CACHE_SLOTS 64
#define KEY_CACHE_MAX_LEN 32
static PyObject *key_cache[KEY_CACHE_SLOTS];

static int parse_key(cursor *c, PyObject **out) {
    raw_string s;
    int r = scan_string(c, &s);
    if (r != OK) return r;
    if (s.escaped || !s.ascii || s.n > KEY_CACHE_MAX_LEN) return build_string(&s, out);
    uint32_t h = 2166136261u;
    for (Py_ssize_t i = 0; i < s.n; i++) h = (h ^ s.start[i]) * 16777619u;
    PyObject **slot = &key_cache[h % KEY_CACHE_SLOTS];
    PyObject *cached = *slot;
    if (cached != NULL && PyUnicode_GET_LENGTH(cached) == s.n &&
        memcmp(PyUnicode_1BYTE_DATA(cached), s.start, (size_t)s.n) == 0) {
        *out = Py_NewRef(cached);
        return OK;
    }
    if ((r = build_string(&s, out)) != OK) return r;
    Py_XSETREF(*slot, Py_NewRef(*out));
    return OK;
}

/* The language lookup's string keys as bytes, so that a plain ASCII name is looked up without
 * making a str: built by bind() from the very dict the reference uses. Unusable (n_languages < 0)
 * if that dict has a string key the table cannot hold; then every name goes through the dict. */
#define MAX_LANGUAGES 32
#define MAX_LANGUAGE_NAME 24
static struct {
    char name[MAX_LANGUAGE_NAME];
    Py_ssize_t n;
    PyObject *value;
} languages[MAX_LANGUAGES];
static int n_languages = -1;

static void build_language_table(PyObject *lookup) {
    for (int i = 0; i < n_languages; i++) Py_CLEAR(languages[i].value);
    n_languages = 0;
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(lookup, &pos, &key, &value)) {
        if (!PyUnicode_Check(key)) continue;
        if (!PyUnicode_IS_ASCII(key) || PyUnicode_GET_LENGTH(key) > MAX_LANGUAGE_NAME ||
            n_languages == MAX_LANGUAGES) {
            for (int i = 0; i < n_languages; i++) Py_CLEAR(languages[i].value);
            n_languages = -1;
            return;
        }
        languages[n_languages].n = PyUnicode_GET_LENGTH(key);
        memcpy(languages[n_languages].name, PyUnicode_1BYTE_DATA(key), (size_t)languages[n_languages].n);
        languages[n_languages].value = Py_NewRef(value);
        n_languages++;
    }
}

/* What the lookup holds for key (a new reference), or the default: the reference's
 * _LANGUAGE_LOOKUP.get(language, _OTHER). */
static int lookup_language(PyObject *key, PyObject **member) {
    PyObject *found = PyDict_GetItemWithError(language_lookup, key);
    if (found == NULL && PyErr_Occurred()) return FAILED;
    *member = Py_NewRef(found != NULL ? found : other_language);
    return OK;
}

/* The language for a name string (cursor at its opening quote), a new reference. */
static int parse_language_name(cursor *c, PyObject **member) {
    raw_string s;
    int r = scan_string(c, &s);
    if (r != OK) return r;
    if (n_languages >= 0 && !s.escaped && s.ascii) {
        for (int i = 0; i < n_languages; i++) {
            if (languages[i].n == s.n && memcmp(languages[i].name, s.start, (size_t)s.n) == 0) {
                *member = Py_NewRef(languages[i].value);
                return OK;
            }
        }
        *member = Py_NewRef(other_language); /* the table holds every string key of the lookup */
        return OK;
    }
    PyObject *name;
    if ((r = build_string(&s, &name)) != OK) return r;
    r = lookup_language(name, member);
    Py_DECREF(name);
    return r;
}

/* A JSON integer (no fraction or exponent: the caller checks what follows) within [lo, hi]. */
static int parse_int(cursor *c, long long lo, long long hi, long long *out) {
    const unsigned char *p = c->p, *end = c->end;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9') return UNSURE;
    if (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9') return UNSURE; /* leading zero */
    long long v = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (++digits > 18) return UNSURE;
        v = v * 10 + (*p - '0');
        p++;
    }
    if (negative) v = -v;
    if (v < lo || v > hi) return UNSURE;
    c->p = p;
    *out = v;
    return OK;
}

static int is_null(cursor *c) {
    if (c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) {
        c->p += 4;
        return 1;
    }
    return 0;
}

/* extFields: an object of string values, no duplicate keys (the cursor at its '{'). */
static int parse_ext_fields(cursor *c, PyObject **out) {
    PyObject *dict = PyDict_New();
    if (dict == NULL) return FAILED;
    c->p++;
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        *out = dict;
        return OK;
    }
    for (;;) {
        PyObject *key = NULL, *value = NULL;
        int r;
        if (c->p >= c->end || *c->p != '"') goto unsure;
        if ((r = parse_key(c, &key)) != OK) goto fail_r;
        if (c->p >= c->end || *c->p != ':') {
            Py_DECREF(key);
            goto unsure;
        }
        c->p++;
        if (c->p >= c->end || *c->p != '"') { /* numbers, booleans, null: the lenient reference */
            Py_DECREF(key);
            goto unsure;
        }
        if ((r = parse_string(c, &value)) != OK) {
            Py_DECREF(key);
            goto fail_r;
        }
        Py_ssize_t before = PyDict_GET_SIZE(dict);
        r = PyDict_SetItem(dict, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (r < 0) goto failed;
        if (PyDict_GET_SIZE(dict) == before) goto unsure; /* a duplicate key */
        if (c->p >= c->end) goto unsure;
        if (*c->p == ',') {
            c->p++;
            continue;
        }
        if (*c->p == '}') {
            c->p++;
            *out = dict;
            return OK;
        }
        goto unsure;
    fail_r:
        if (r == FAILED) goto failed;
        goto unsure;
    }
unsure:
    Py_DECREF(dict);
    return UNSURE;
failed:
    Py_DECREF(dict);
    return FAILED;
}

enum { F_CODE = 1, F_EXT = 2, F_FLAG = 4, F_LANGUAGE = 8, F_OPAQUE = 16, F_REMARK = 32, F_SERIALIZE = 64, F_VERSION = 128 };

static int field_of(const unsigned char *k, Py_ssize_t n) {
#define IS(s) (n == (Py_ssize_t)(sizeof(s) - 1) && memcmp(k, s, sizeof(s) - 1) == 0)
    switch (n) {
    case 4:
        if (IS("code")) return F_CODE;
        if (IS("flag")) return F_FLAG;
        break;
    case 6:
        if (IS("opaque")) return F_OPAQUE;
        if (IS("remark")) return F_REMARK;
        break;
    case 7:
        if (IS("version")) return F_VERSION;
        break;
    case 8:
        if (IS("language")) return F_LANGUAGE;
        break;
    case 9:
        if (IS("extFields")) return F_EXT;
        break;
    case 23:
        if (IS("serializeTypeCurrentRPC")) return F_SERIALIZE;
        break;
    }
#undef IS
    return 0;
}

/* The compiled path: see header_json_fast_api in _header_json_fast.h. */
static int decode_common(const char *data, Py_ssize_t size, PyObject *body, PyObject **out) {
    if (command_class == NULL) return UNSURE; /* not bound: the reference decides */
    cursor c = {(const unsigned char *)data, (const unsigned char *)data + size};
    long long code = 0, version = 0, opaque = 0, flag = 0;
    PyObject *language = NULL; /* the LanguageCode (or default) when the field was there */
    PyObject *remark = NULL, *ext = NULL; /* NULL: absent or null */
    int seen = 0, r = UNSURE;
    if (c.p >= c.end || *c.p != '{') return UNSURE;
    c.p++;
    if (c.p < c.end && *c.p == '}') {
        c.p++;
        goto closed;
    }
    for (;;) {
        /* A top-level key, exactly one of the known names (Java and the clients never escape them:
         * an escaped one, like an unknown one, is left to the reference). */
        if (c.p >= c.end || *c.p != '"') goto unsure;
        const unsigned char *k = c.p + 1, *q = memchr(k, '"', (size_t)(c.end - k));
        if (q == NULL) goto unsure;
        int field = field_of(k, q - k);
        if (field == 0 || (seen & field)) goto unsure; /* unknown or repeated */
        seen |= field;
        c.p = q + 1;
        if (c.p >= c.end || *c.p != ':') goto unsure;
        c.p++;
        switch (field) {
        case F_CODE: r = parse_int(&c, INT32_MIN, INT32_MAX, &code); break;
        case F_FLAG: r = parse_int(&c, INT32_MIN, INT32_MAX, &flag); break;
        case F_OPAQUE: r = parse_int(&c, INT32_MIN, INT32_MAX, &opaque); break;
        case F_VERSION: r = parse_int(&c, INT32_MIN, INT32_MAX, &version); break;
        case F_LANGUAGE:
            if (is_null(&c)) {
                r = lookup_language(Py_None, &language);
            } else if (c.p < c.end && *c.p == '"') {
                r = parse_language_name(&c, &language);
            } else {
                long long ordinal;
                r = parse_int(&c, -999999999999999999LL, 999999999999999999LL, &ordinal);
                if (r == OK) {
                    PyObject *key = PyLong_FromLongLong(ordinal);
                    r = key == NULL ? FAILED : lookup_language(key, &language);
                    Py_XDECREF(key);
                }
            }
            break;
        case F_REMARK:
            if (is_null(&c))
                r = OK;
            else if (c.p < c.end && *c.p == '"')
                r = parse_string(&c, &remark);
            else
                r = UNSURE;
            break;
        case F_EXT:
            if (is_null(&c))
                r = OK;
            else if (c.p < c.end && *c.p == '{')
                r = parse_ext_fields(&c, &ext);
            else
                r = UNSURE;
            break;
        case F_SERIALIZE: /* ignored like any unknown field, but only a string is taken here */
            r = (c.p < c.end && *c.p == '"') ? skip_string(&c) : UNSURE;
            break;
        }
        if (r != OK) goto unsure_or_failed;
        if (c.p >= c.end) goto unsure;
        if (*c.p == ',') {
            c.p++;
            continue;
        }
        if (*c.p == '}') {
            c.p++;
            break;
        }
        goto unsure; /* a fraction, an exponent, whitespace, anything else */
    }
closed:
    if (c.p != c.end) goto unsure; /* trailing bytes, even whitespace */
    {
        if (language == NULL && lookup_language(Py_None, &language) != OK) goto failed;
        PyObject *args[9] = {NULL};
        args[0] = PyLong_FromLongLong(code);
        args[1] = language;
        args[2] = PyLong_FromLongLong(version);
        args[3] = PyLong_FromLongLong(opaque);
        args[4] = PyLong_FromLongLong(flag);
        args[5] = remark != NULL ? remark : Py_None;
        args[6] = ext != NULL ? ext : Py_None;
        args[7] = body != NULL ? body : Py_None;
        args[8] = json_type;
        PyObject *cmd = NULL;
        if (args[0] && args[2] && args[3] && args[4]) cmd = PyObject_Vectorcall(command_class, args, 9, NULL);
        Py_XDECREF(args[0]);
        Py_XDECREF(args[2]);
        Py_XDECREF(args[3]);
        Py_XDECREF(args[4]);
        if (cmd == NULL) goto failed;
        Py_XDECREF(language);
        Py_XDECREF(remark);
        Py_XDECREF(ext);
        *out = cmd;
        return OK;
    }
unsure_or_failed:
    if (r == FAILED) goto failed;
unsure:
    Py_XDECREF(language);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    return UNSURE;
failed:
    Py_XDECREF(language);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    return FAILED;
}

/* (result, buffer held) for a Python argument: UNSURE if it is not a byte buffer (str, say). */
static int get_bytes(PyObject *data, Py_buffer *view) {
    if (PyObject_GetBuffer(data, view, PyBUF_SIMPLE) == 0) return OK;
    if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
        PyErr_Clear();
        return UNSURE;
    }
    return FAILED;
}

static PyObject *decode_common_json_header(PyObject *self, PyObject *data) {
    Py_buffer view;
    int r = get_bytes(data, &view);
    if (r == FAILED) return NULL;
    PyObject *cmd = NULL;
    if (r == OK) {
        r = decode_common(view.buf, view.len, NULL, &cmd);
        PyBuffer_Release(&view);
        if (r == FAILED) return NULL;
    }
    if (r == OK) return cmd;
    Py_RETURN_NONE;
}

static PyObject *decode_json_header(PyObject *self, PyObject *data) {
    PyObject *cmd = decode_common_json_header(self, data);
    if (cmd != Py_None) return cmd;
    Py_DECREF(cmd);
    if (reference == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "protocol._header_json_fast is not bound (protocol.header_json does it)");
        return NULL;
    }
    return PyObject_CallOneArg(reference, data);
}

static PyObject *bind(PyObject *self, PyObject *args) {
    PyObject *ref, *cls, *lookup, *other, *json;
    if (!PyArg_ParseTuple(args, "OOO!OO:bind", &ref, &cls, &PyDict_Type, &lookup, &other, &json)) return NULL;
    Py_INCREF(ref);
    Py_INCREF(cls);
    Py_INCREF(lookup);
    Py_INCREF(other);
    Py_INCREF(json);
    Py_XSETREF(reference, ref);
    Py_XSETREF(command_class, cls);
    Py_XSETREF(language_lookup, lookup);
    Py_XSETREF(other_language, other);
    Py_XSETREF(json_type, json);
    build_language_table(lookup);
    Py_RETURN_NONE;
}

static header_json_fast_api api = {decode_common};

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS,
     "bind(reference, command_class, language_lookup, other_language, json_type): the Python side's objects."},
    {"decode_json_header", decode_json_header, METH_O, "Compiled protocol.header_json.decode_json_header."},
    {"decode_common_json_header", decode_common_json_header, METH_O,
     "The compiled path alone: a RemotingCommand, or None where the reference must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._header_json_fast",
    "Compiled twin of protocol.header_json.decode_json_header (see that function for the reference).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__header_json_fast(void) {
    for (int b = 0; b < 256; b++) byte_class[b] = (b < 0x20 || b == '\\') ? 1 : (b >= 0x80 ? 2 : 0);
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    PyObject *capsule = PyCapsule_New(&api, HEADER_JSON_FAST_CAPSULE, NULL);
    if (capsule == NULL || PyModule_AddObject(m, "_C_API", capsule) < 0) {
        Py_XDECREF(capsule);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
