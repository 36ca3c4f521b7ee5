/*
 * store.check._index_scan_fast: the compiled twins of store/check/index_scan.py's scan_slots and
 * scan_entries (same names, same arguments, same results; the Python functions are the readable
 * reference and the tests compare both on damaged files).
 *
 *   scan_slots(data, slots_at, slots_n, entries_at, count, refs) -> (used, events)
 *   scan_entries(data, slots_n, entries_at, count, begin, end, refs) -> events
 *   matching_keys(entries, packed) -> how many leading 20-byte units agree in their first 12 bytes
 *
 * events: [(kind, times, a, b, c)], one per kind of problem in the order each kind was first met
 * (index_scan.py's docstring says what a, b, c are for each kind). refs (a bytearray of count
 * bytes) counts, capped at 2, how many slots or links name each entry.
 *
 * Why: a full IndexFile of the default geometry is 5M slots and 20M entries, and a Python step for
 * each was half of fsck's time. Every read is bounded: the arguments are checked against the
 * buffer first, and every entry read is at an index below count.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SLOT_SIZE 4
#define ENTRY_SIZE 20

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

/* Python's h % n for n > 0: never negative. */
static inline int64_t pymod(int64_t h, int64_t n)
{
    int64_t m = h % n;
    return m < 0 ? m + n : m;
}

/* -- the events: one per kind, in first-occurrence order -------------------------------------- */

enum { K_SLOT, K_SLOT_HASH, K_HASH, K_DIFF, K_PHY_ORDER, K_PHY_RANGE, K_LINK_SLOT, K_LINK_BAD, K_LINK, K_N };

static const char *const KIND_NAMES[K_N] = {
    "slot", "slot-hash", "hash", "diff", "phy-order", "phy-range", "link-slot", "link-bad", "link",
};

typedef struct {
    long long times[K_N];
    long long a[K_N], b[K_N], c[K_N];
    int order[K_N];
    int n;
} events_t;

static inline void event(events_t *ev, int kind, long long a, long long b, long long c)
{
    if (ev->times[kind]++ == 0) {
        ev->a[kind] = a;
        ev->b[kind] = b;
        ev->c[kind] = c;
        ev->order[ev->n++] = kind;
    }
}

static PyObject *events_list(const events_t *ev)
{
    PyObject *list = PyList_New(ev->n);
    if (list == NULL)
        return NULL;
    for (int i = 0; i < ev->n; i++) {
        int k = ev->order[i];
        PyObject *item = Py_BuildValue("(sLLLL)", KIND_NAMES[k], ev->times[k], ev->a[k], ev->b[k], ev->c[k]);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* The checks index_scan._check makes, so that the loops can read without bounds checks. */
static int check_args(const Py_buffer *data, Py_ssize_t slots_n, Py_ssize_t entries_at, Py_ssize_t count,
                      const Py_buffer *refs)
{
    if (slots_n <= 0 || count < 1 || refs->len != count || entries_at < 0) {
        PyErr_SetString(PyExc_ValueError,
                        "index scan: need slots_n > 0, count >= 1, entries_at >= 0, len(refs) == count");
        return -1;
    }
    if (count > (PY_SSIZE_T_MAX - entries_at) / ENTRY_SIZE || entries_at + count * ENTRY_SIZE > data->len) {
        PyErr_SetString(PyExc_ValueError, "index scan: the entries do not fit in the buffer");
        return -1;
    }
    return 0;
}

static PyObject *scan_slots(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer data, refs;
    Py_ssize_t slots_at, slots_n, entries_at, count;
    if (!PyArg_ParseTuple(args, "y*nnnnw*:scan_slots", &data, &slots_at, &slots_n, &entries_at, &count, &refs))
        return NULL;
    PyObject *result = NULL;
    if (check_args(&data, slots_n, entries_at, count, &refs) < 0)
        goto done;
    if (slots_at < 0 || slots_n > (PY_SSIZE_T_MAX - slots_at) / SLOT_SIZE || slots_at + slots_n * SLOT_SIZE > data.len) {
        PyErr_SetString(PyExc_ValueError, "index scan: the slots do not fit in the buffer");
        goto done;
    }
    const uint8_t *buf = (const uint8_t *)data.buf;
    const uint8_t *entries = buf + entries_at;
    uint8_t *ref = (uint8_t *)refs.buf;
    events_t ev;
    memset(&ev, 0, sizeof(ev));
    long long used = 0;
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *slot = buf + slots_at;
    for (Py_ssize_t s = 0; s < slots_n; s++, slot += SLOT_SIZE) {
        int32_t value = (int32_t)be32(slot);
        if (value == 0)
            continue;
        used++;
        if (value < 0 || value >= count) {
            event(&ev, K_SLOT, s, value, 0);
            continue;
        }
        int32_t hash = (int32_t)be32(entries + (Py_ssize_t)value * ENTRY_SIZE);
        if (pymod(hash, slots_n) != s)
            event(&ev, K_SLOT_HASH, s, value, 0);
        if (ref[value] < 2)
            ref[value]++;
    }
    Py_END_ALLOW_THREADS
    PyObject *list = events_list(&ev);
    if (list != NULL)
        result = Py_BuildValue("(LN)", used, list);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&refs);
    return result;
}

static PyObject *scan_entries(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer data, refs;
    Py_ssize_t slots_n, entries_at, count;
    long long begin, end;
    if (!PyArg_ParseTuple(args, "y*nnnLLw*:scan_entries", &data, &slots_n, &entries_at, &count, &begin, &end, &refs))
        return NULL;
    PyObject *result = NULL;
    if (check_args(&data, slots_n, entries_at, count, &refs) < 0)
        goto done;
    const uint8_t *entries = (const uint8_t *)data.buf + entries_at;
    uint8_t *ref = (uint8_t *)refs.buf;
    events_t ev;
    memset(&ev, 0, sizeof(ev));
    Py_BEGIN_ALLOW_THREADS
    int64_t last_phy = begin;
    for (Py_ssize_t n = 1; n < count; n++) {
        const uint8_t *e = entries + n * ENTRY_SIZE;
        int32_t key_hash = (int32_t)be32(e);
        int64_t phy = (int64_t)be64(e + 4);
        int32_t diff = (int32_t)be32(e + 12);
        int32_t prev = (int32_t)be32(e + 16);
        if (key_hash < 0)
            event(&ev, K_HASH, n, key_hash, 0);
        if (diff < 0)
            event(&ev, K_DIFF, n, diff, 0);
        if (begin <= phy && phy <= end) {
            if (phy > last_phy)
                last_phy = phy;
            else if (phy < last_phy)
                event(&ev, K_PHY_ORDER, n, phy, last_phy);
        } else {
            event(&ev, K_PHY_RANGE, n, phy, 0);
        }
        if (0 < prev && prev < n) {
            int32_t other = (int32_t)be32(entries + (Py_ssize_t)prev * ENTRY_SIZE);
            if (pymod(other, slots_n) != pymod(key_hash, slots_n))
                event(&ev, K_LINK_SLOT, n, prev, 0);
            if (ref[prev] < 2)
                ref[prev]++;
        } else if (prev < 0) {
            event(&ev, K_LINK_BAD, n, prev, 0);
        } else if (prev >= n) {
            event(&ev, K_LINK, n, prev, 0);
        }
    }
    Py_END_ALLOW_THREADS
    result = events_list(&ev);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&refs);
    return result;
}

static PyObject *matching_keys(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*:matching_keys", &a, &b))
        return NULL;
    Py_ssize_t n = (a.len < b.len ? a.len : b.len) / ENTRY_SIZE;
    const uint8_t *pa = (const uint8_t *)a.buf, *pb = (const uint8_t *)b.buf;
    Py_ssize_t i = 0;
    while (i < n && memcmp(pa + i * ENTRY_SIZE, pb + i * ENTRY_SIZE, 12) == 0)
        i++;
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(i);
}

static PyMethodDef methods[] = {
    {"scan_slots", scan_slots, METH_VARARGS,
     "scan_slots(data, slots_at, slots_n, entries_at, count, refs) -> (used, events)\n"
     "The compiled store.check.index_scan.scan_slots (see that module)."},
    {"scan_entries", scan_entries, METH_VARARGS,
     "scan_entries(data, slots_n, entries_at, count, begin, end, refs) -> events\n"
     "The compiled store.check.index_scan.scan_entries (see that module)."},
    {"matching_keys", matching_keys, METH_VARARGS,
     "matching_keys(entries, packed) -> int\n"
     "The compiled store.check.index_scan.matching_keys (see that module)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.check._index_scan_fast",
    "Compiled twin of store.check.index_scan: fsck's per-slot and per-entry IndexFile loops.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__index_scan_fast(void)
{
    return PyModule_Create(&module);
}
