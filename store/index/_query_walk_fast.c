/*
 * store.index._query_walk_fast: the compiled twin of store/index/query_walk.py (same function names, same
 * arguments, same results; the Python module is the readable reference and the tests check that
 * both agree, on the golden store and on hostile bytes).
 *
 *   walk_chain(buf, length, entries_at, start, key_hash, index_count, limit, begin_timestamp,
 *              begin_phy_offset, begin, end, room, budget[, chain_start, chain_visited, deadline])
 *       -> (offsets, visited, stop, stop_entry, forward_entry)
 *   read_records(views, starts, lengths, max_offset, offsets) -> [memoryview | None, ...]
 *   read_checked(maps, views, starts, lengths, max_offset, offsets) -> (records, shrunk)
 *   query_files(maps, fds, headers, size, hash_slot_num, index_num, key_hash, max_num, begin, end, budget
 *               [, resume, deadline])
 *       -> (offsets, visited, budget_exhausted, last_timestamp, last_phy_offset, events, resume)
 *
 * The walks, the record check and query_files' loop over the files are in _query_walk_core.h, which
 * the compiled QUERY_MESSAGE of the request path (server/remoting/_query_loop.h) includes too; this
 * file turns their C results into the Python values below.
 *
 * Safety contract (files can shrink under a live reader: a truncated CommitLog, an index file
 * replaced by `cp`; touching a mapped page past the new end of file raises SIGBUS):
 *   - Only bytes inside `length` (the size the Python layer checked when it mapped the file, also
 *     capped by the buffer's own length) are ever read. Sizing the map, and re-checking the file
 *     before handing out that length, is the Python layer's job.
 *   - Every pointer read from a file is bounds-checked before it is followed: a chain's prevIndex
 *     (and the starting slot value) must name an entry lying wholly inside `length`; a record's
 *     TOTALSIZE and its variable-length fields must lie inside the file and the written end.
 *   - The buffer export (PyObject_GetBuffer) is held for the whole walk, including while the GIL is
 *     released in walk_chain: an exported mmap refuses close() (BufferError), so a concurrent
 *     refresh on the event loop cannot unmap memory this code is reading.
 *   - walk_chain visits at most `budget` entries and never revisits one, so hostile chains end.
 * No Python object is touched while the GIL is released: offsets are gathered in a C array.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_query_walk_core.h"
#include "_record_layout.h"


static PyObject *walk_chain(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t length, entries_at, room, budget;
    long long start, index_count, limit, begin_ts, begin_phy, begin, end, chain_start = -1, deadline = 0;
    Py_ssize_t chain_visited = 0;
    int key_hash;
    if (!PyArg_ParseTuple(args, "OnnLiLLLLLLnn|LnL:walk_chain", &obj, &length, &entries_at, &start, &key_hash,
                          &index_count, &limit, &begin_ts, &begin_phy, &begin, &end, &room, &budget,
                          &chain_start, &chain_visited, &deadline))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) return NULL;
    if (length > view.len) length = view.len;
    if (length < 0) length = 0;
    if (entries_at < 0) entries_at = length; /* nothing can be read */
    walk_result r;
    memset(&r, 0, sizeof r);
    Py_BEGIN_ALLOW_THREADS
    walk((const unsigned char *)view.buf, length, entries_at, start, (int32_t)key_hash, index_count, limit,
         begin_ts, begin_phy, begin, end, room, budget, chain_start, chain_visited, deadline, NULL, &r);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (r.nomem) {
        free(r.offsets);
        return PyErr_NoMemory();
    }
    PyObject *offsets = PyList_New(r.count);
    if (offsets == NULL) {
        free(r.offsets);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < r.count; i++) {
        PyObject *v = PyLong_FromLongLong(r.offsets[i]);
        if (v == NULL) {
            free(r.offsets);
            Py_DECREF(offsets);
            return NULL;
        }
        PyList_SET_ITEM(offsets, i, v);
    }
    free(r.offsets);
    return Py_BuildValue("(NniLL)", offsets, r.visited, r.stop, r.stop_entry, r.forward);
}


static Py_ssize_t current_size(PyObject *mm, Py_ssize_t mapped);

/* read_records, and with `maps_in` (read_checked) each file's current size checked at its first read,
 * the files found short appended to `shrunk` as (file, readable length). */
static PyObject *read_impl(PyObject *views_in, PyObject *starts_in, PyObject *lengths_in, long long max_offset,
                           PyObject *offsets_in, PyObject *maps_in, PyObject *shrunk) {
    PyObject *maps = NULL;
    if (maps_in != NULL && (maps = PySequence_Fast(maps_in, "maps must be a sequence")) == NULL) return NULL;
    PyObject *views = PySequence_Fast(views_in, "views must be a sequence");
    PyObject *starts = views ? PySequence_Fast(starts_in, "starts must be a sequence") : NULL;
    PyObject *lengths = starts ? PySequence_Fast(lengths_in, "lengths must be a sequence") : NULL;
    PyObject *offsets = lengths ? PySequence_Fast(offsets_in, "offsets must be a sequence") : NULL;
    PyObject *out = NULL;
    long long *start_v = NULL, *length_v = NULL;
    Py_buffer *bufs = NULL;
    char *got = NULL;
    Py_ssize_t n = 0;
    if (offsets == NULL) goto done;
    n = PySequence_Fast_GET_SIZE(starts);
    if (PySequence_Fast_GET_SIZE(views) < n || PySequence_Fast_GET_SIZE(lengths) < n ||
        (maps != NULL && PySequence_Fast_GET_SIZE(maps) < n)) {
        PyErr_SetString(PyExc_ValueError, "views, starts and lengths must have the same length");
        goto done;
    }
    start_v = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    length_v = PyMem_Calloc((size_t)n + 1, sizeof(long long));
    bufs = PyMem_Calloc((size_t)n + 1, sizeof(Py_buffer));
    got = PyMem_Calloc((size_t)n + 1, 1);
    if (!start_v || !length_v || !bufs || !got) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        start_v[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(starts, i));
        length_v[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(lengths, i));
        if (PyErr_Occurred()) goto done;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(offsets);
    out = PyList_New(count);
    if (out == NULL) goto done;
    for (Py_ssize_t k = 0; k < count; k++) {
        long long offset = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(offsets, k));
        if (offset == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) goto fail;
            PyErr_Clear(); /* beyond a Java long: no record there */
        }
        PyObject *item = Py_None;
        if (offset >= 0 && offset < max_offset && n > 0) {
            Py_ssize_t lo = 0, hi = n;
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (offset < start_v[mid]) hi = mid;
                else lo = mid + 1;
            }
            Py_ssize_t i = lo - 1;
            if (i >= 0) {
                if (!got[i]) {
                    if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(views, i), &bufs[i], PyBUF_SIMPLE) < 0)
                        goto fail;
                    got[i] = 1;
                    if (maps != NULL) {
                        /* The one size check of this file for this call, before anything of it is read. */
                        PyObject *mm = PySequence_Fast_GET_ITEM(maps, i);
                        long long mapped = length_v[i] > 0 ? length_v[i] : 0;
                        long long now = mm == Py_None ? 0 : current_size(mm, (Py_ssize_t)mapped);
                        if (now < 0) goto fail;
                        if (now < length_v[i]) {
                            PyObject *t = Py_BuildValue("(nL)", i, now);
                            if (t == NULL || PyList_Append(shrunk, t) < 0) {
                                Py_XDECREF(t);
                                goto fail;
                            }
                            Py_DECREF(t);
                            length_v[i] = now;
                        }
                    }
                }
                long long pos = offset - start_v[i];
                long long limit = length_v[i];
                if (bufs[i].len < limit) limit = bufs[i].len;
                if (max_offset - start_v[i] < limit) limit = max_offset - start_v[i];
                const unsigned char *b = bufs[i].buf;
                if (pos + RECORD_TOTAL_SIZE_WIDTH <= limit) {
                    int32_t size = be32(b + pos + RECORD_TOTAL_SIZE_AT);
                    if (size > 0 && pos + size <= limit && record_size(b, pos, pos + size) > 0) {
                        item = PySequence_GetSlice(PySequence_Fast_GET_ITEM(views, i), pos, pos + size);
                        if (item == NULL) goto fail;
                        PyList_SET_ITEM(out, k, item);
                        continue;
                    }
                }
            }
        }
        Py_INCREF(Py_None);
        PyList_SET_ITEM(out, k, Py_None);
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    if (bufs != NULL)
        for (Py_ssize_t i = 0; i < n; i++)
            if (got[i]) PyBuffer_Release(&bufs[i]);
    PyMem_Free(bufs);
    PyMem_Free(got);
    PyMem_Free(start_v);
    PyMem_Free(length_v);
    Py_XDECREF(views);
    Py_XDECREF(starts);
    Py_XDECREF(lengths);
    Py_XDECREF(offsets);
    Py_XDECREF(maps);
    return out;
}

static PyObject *read_records(PyObject *self, PyObject *args) {
    PyObject *views_in, *starts_in, *lengths_in, *offsets_in;
    long long max_offset;
    if (!PyArg_ParseTuple(args, "OOOLO:read_records", &views_in, &starts_in, &lengths_in, &max_offset,
                          &offsets_in))
        return NULL;
    return read_impl(views_in, starts_in, lengths_in, max_offset, offsets_in, NULL, NULL);
}

static PyObject *read_checked(PyObject *self, PyObject *args) {
    PyObject *maps_in, *views_in, *starts_in, *lengths_in, *offsets_in;
    long long max_offset;
    if (!PyArg_ParseTuple(args, "OOOOLO:read_checked", &maps_in, &views_in, &starts_in, &lengths_in, &max_offset,
                          &offsets_in))
        return NULL;
    PyObject *shrunk = PyList_New(0);
    if (shrunk == NULL) return NULL;
    PyObject *records = read_impl(views_in, starts_in, lengths_in, max_offset, offsets_in, maps_in, shrunk);
    if (records == NULL) {
        Py_DECREF(shrunk);
        return NULL;
    }
    return Py_BuildValue("(NN)", records, shrunk);
}


/* ----------------------------------------------------------------------------------- query_files */

/* Append (file, kind, detail) to events; detail is a new reference (stolen). */
static int add_event(PyObject *events, Py_ssize_t file, int kind, PyObject *detail) {
    if (detail == NULL) return -1;
    PyObject *t = Py_BuildValue("(niN)", file, kind, detail);
    if (t == NULL) return -1;
    int rc = PyList_Append(events, t);
    Py_DECREF(t);
    return rc;
}


/* The file's readable length now: min(mm.size(), len(mm)), 0 when size() fails (closed, EIO). */
static Py_ssize_t current_size(PyObject *mm, Py_ssize_t mapped) {
    static PyObject *size_name = NULL;
    if (size_name == NULL && (size_name = PyUnicode_InternFromString("size")) == NULL) return -1;
    PyObject *v = PyObject_CallMethodNoArgs(mm, size_name);
    if (v == NULL) {
        if (PyErr_ExceptionMatches(PyExc_OSError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    Py_ssize_t now = PyLong_AsSsize_t(v);
    Py_DECREF(v);
    if (now == -1 && PyErr_Occurred()) return -1;
    return now < mapped ? now : mapped;
}

static PyObject *query_files(PyObject *self, PyObject *args) {
    PyObject *maps_in, *fds_in, *headers_in, *resume_in = Py_None, *caches_in = Py_None;
    Py_ssize_t size, max_num, budget;
    long long hash_slot_num, index_num, begin, end, deadline = 0;
    int key_hash;
    if (!PyArg_ParseTuple(args, "OOOnLLinLLn|OLO:query_files", &maps_in, &fds_in, &headers_in, &size, &hash_slot_num,
                          &index_num, &key_hash, &max_num, &begin, &end, &budget, &resume_in, &deadline,
                          &caches_in))
        return NULL;
    /* A resume point (query_walk.Resume): where a budget stopped an earlier call. */
    qw_point point_in;
    PyObject *r_offsets = NULL;
    memset(&point_in, 0, sizeof point_in);
    if (resume_in != Py_None) {
        if (!PyArg_ParseTuple(resume_in, "nLLLLLLnOnLL:resume", &point_in.file, &point_in.entry, &point_in.index_count,
                              &point_in.limit, &point_in.begin_ts, &point_in.begin_phy, &point_in.chain_start,
                              &point_in.chain_visited, &r_offsets, &point_in.visited, &point_in.last_ts,
                              &point_in.last_phy))
            return NULL;
    }
    PyObject *maps = NULL, *fds = NULL, *headers = NULL, *found = NULL, *events = NULL, *point = NULL, *caches = NULL;
    int64_t *resume_offsets = NULL;
    Py_ssize_t n_resume = 0;
    qw_outcome o;
    memset(&o, 0, sizeof o);
    if ((maps = PySequence_Fast(maps_in, "maps must be a sequence")) == NULL) goto fail;
    if ((fds = PySequence_Fast(fds_in, "fds must be a sequence")) == NULL) goto fail;
    if (headers_in != Py_None && (headers = PySequence_Fast(headers_in, "headers must be a sequence or None")) == NULL)
        goto fail;
    if (caches_in != Py_None && (caches = PySequence_Fast(caches_in, "caches must be a sequence or None")) == NULL)
        goto fail;
    if (r_offsets != NULL) {
        if ((found = PySequence_Fast(r_offsets, "resume offsets must be a sequence")) == NULL) goto fail;
        n_resume = PySequence_Fast_GET_SIZE(found);
        resume_offsets = PyMem_Calloc((size_t)n_resume + 1, sizeof(int64_t));
        if (resume_offsets == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
        for (Py_ssize_t k = 0; k < n_resume; k++) {
            resume_offsets[k] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(found, k));
            if (resume_offsets[k] == -1 && PyErr_Occurred()) goto fail;
        }
    }
    if (qw_query_files(maps, fds, headers, size, hash_slot_num, index_num, (int32_t)key_hash, max_num, begin, end,
                       budget, r_offsets != NULL ? &point_in : NULL, resume_offsets, n_resume, deadline, NULL, caches, NULL,
                       &o) < 0)
        goto fail;
    if ((events = PyList_New(0)) == NULL) goto fail;
    for (Py_ssize_t k = 0; k < o.n_events; k++) {
        const qw_event *e = &o.events[k];
        PyObject *detail;
        if (e->kind == EVENT_HEADER)
            detail = Py_BuildValue("(LLLLLL)", e->v[0], e->v[1], e->v[2], e->v[3], e->v[4], e->v[5]);
        else if (e->kind == EVENT_SLOT)
            detail = Py_BuildValue("(LL)", e->v[0], e->v[1]);
        else
            detail = PyLong_FromLongLong(e->v[0]);
        if (add_event(events, e->file, e->kind, detail) < 0) goto fail;
    }
    PyObject *offsets = PyList_New(o.all.count);
    if (offsets == NULL) goto fail;
    for (Py_ssize_t k = 0; k < o.all.count; k++) {
        PyObject *v = PyLong_FromLongLong(o.all.offsets[k]);
        if (v == NULL) {
            Py_DECREF(offsets);
            goto fail;
        }
        PyList_SET_ITEM(offsets, k, v);
    }
    if (o.have_point) {
        const qw_point *p = &o.point;
        PyObject *so_far = PyList_AsTuple(offsets);
        if (so_far == NULL) {
            Py_DECREF(offsets);
            goto fail;
        }
        point = Py_BuildValue("(nLLLLLLnNnLL)", p->file, p->entry, p->index_count, p->limit, p->begin_ts, p->begin_phy,
                              p->chain_start, p->chain_visited, so_far, p->visited, p->last_ts, p->last_phy);
        if (point == NULL) {
            Py_DECREF(offsets);
            goto fail;
        }
    } else {
        point = Py_NewRef(Py_None);
    }
    PyObject *result = Py_BuildValue("(NnOLLNN)", offsets, o.all.visited, o.exhausted ? Py_True : Py_False, o.last_ts,
                                     o.last_phy, events, point);
    events = point = NULL;
    qw_outcome_free(&o);
    PyMem_Free(resume_offsets);
    Py_XDECREF(maps);
    Py_XDECREF(fds);
    Py_XDECREF(headers);
    Py_XDECREF(found);
    Py_XDECREF(caches);
    return result;
fail:
    qw_outcome_free(&o);
    PyMem_Free(resume_offsets);
    Py_XDECREF(events);
    Py_XDECREF(point);
    Py_XDECREF(maps);
    Py_XDECREF(fds);
    Py_XDECREF(headers);
    Py_XDECREF(found);
    Py_XDECREF(caches);
    return NULL;
}

static PyMethodDef methods[] = {
    {"walk_chain", walk_chain, METH_VARARGS, "Compiled store.index.query_walk.walk_chain (GIL released)."},
    {"read_records", read_records, METH_VARARGS, "Compiled store.index.query_walk.read_records."},
    {"read_checked", read_checked, METH_VARARGS, "Compiled store.index.query_walk.read_checked."},
    {"query_files", query_files, METH_VARARGS, "Compiled store.index.query_walk.query_files."},
    QW_SEGMENT_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.index._query_walk_fast",
    "Compiled twins of store.index.query_walk (see that module for the reference).", -1, methods,
};

PyMODINIT_FUNC PyInit__query_walk_fast(void) { return PyModule_Create(&module); }
