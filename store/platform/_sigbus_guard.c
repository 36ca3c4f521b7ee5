/* A SIGBUS handler that turns "a store file was cut under its map" into pages of zeros.
 *
 * Reading a memory-mapped page past the file's current end (truncate, `cp`/`>` over the file, a
 * broker's recovery) raises SIGBUS, which kills the process: Python cannot catch it, and no size
 * check made beforehand closes the window between the check and the read when another process cuts
 * the file. The store registers the address range of every map it makes (store/platform/sigbus.py `track`).
 * For a fault inside one of those ranges this handler maps an anonymous page of zeros over the
 * faulting page (MAP_FIXED) and returns, so the read is retried and sees zeros, which no record or
 * index check accepts; it counts the faults, and the store remaps its files when the count moves.
 *
 * Any other fault (an address outside the store's maps: another mmap in the process, a bug in a C
 * extension; a fault of another kind; an mmap that fails) is not ours to hide: the handler restores
 * the disposition that was there before it (SIG_DFL, or e.g. faulthandler's) and returns, so the
 * instruction faults again and kills the process as it would have without the guard.
 *
 * Async-signal-safety: the handler only reads the registry with atomic loads (no locks, no
 * allocation, no Python), and calls mmap(2) and sigaction(2), both plain system calls on Linux
 * (sigaction is on the POSIX list; mmap is not, but glibc's wrapper takes no lock). The registry is
 * written only under the GIL (one writer at a time); a slot is published by storing its start and
 * then, with release order, its length, and freed by storing length 0, so a reader that sees a
 * non-zero length sees the start that goes with it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* One slot per mapped store file; a store with more maps than this leaves the extra ones unguarded
 * (their size checks still protect them), and register() says so by returning -1. */
#define SLOTS 65536

static volatile sig_atomic_t fault_count = 0;
static struct sigaction previous;
static int installed = 0;
static uintptr_t page_mask = 0;
static size_t page_size = 0;

static uintptr_t slot_start[SLOTS];
static uintptr_t slot_length[SLOTS];
static size_t slots_used = 0; /* high-water mark: slots at or above it were never used */

static int in_store_map(uintptr_t address) {
    size_t used = __atomic_load_n(&slots_used, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < used; i++) {
        uintptr_t length = __atomic_load_n(&slot_length[i], __ATOMIC_ACQUIRE);
        if (length != 0) {
            uintptr_t start = __atomic_load_n(&slot_start[i], __ATOMIC_RELAXED);
            if (address >= start && address - start < length) {
                return 1;
            }
        }
    }
    return 0;
}

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)context;
    if (info != NULL && info->si_code == BUS_ADRERR && info->si_addr != NULL &&
        in_store_map((uintptr_t)info->si_addr)) {
        void *page = (void *)((uintptr_t)info->si_addr & page_mask);
        void *got = mmap(page, page_size, PROT_READ | PROT_WRITE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (got != MAP_FAILED) {
            fault_count++;
            return;
        }
    }
    sigaction(SIGBUS, &previous, NULL);
}

static PyObject *guard_install(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (!installed) {
        struct sigaction action;
        memset(&action, 0, sizeof(action));
        action.sa_sigaction = on_sigbus;
        action.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&action.sa_mask);
        page_size = (size_t)sysconf(_SC_PAGESIZE);
        page_mask = ~((uintptr_t)page_size - 1);
        if (sigaction(SIGBUS, &action, &previous) != 0) {
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        installed = 1;
    }
    Py_RETURN_NONE;
}

static PyObject *guard_register(PyObject *self, PyObject *obj) {
    (void)self;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) != 0) {
        return NULL;
    }
    uintptr_t start = (uintptr_t)view.buf;
    uintptr_t length = (uintptr_t)view.len;
    PyBuffer_Release(&view);
    if (length == 0) {
        return PyLong_FromLong(-1);
    }
    for (size_t i = 0; i < SLOTS; i++) {
        if (__atomic_load_n(&slot_length[i], __ATOMIC_RELAXED) == 0) {
            __atomic_store_n(&slot_start[i], start, __ATOMIC_RELAXED);
            __atomic_store_n(&slot_length[i], length, __ATOMIC_RELEASE);
            if (i >= slots_used) {
                __atomic_store_n(&slots_used, i + 1, __ATOMIC_RELEASE);
            }
            return PyLong_FromSsize_t((Py_ssize_t)i);
        }
    }
    return PyLong_FromLong(-1);
}

static PyObject *guard_unregister(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t slot = PyLong_AsSsize_t(arg);
    if (slot == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (slot >= 0 && (size_t)slot < SLOTS) {
        __atomic_store_n(&slot_length[slot], 0, __ATOMIC_RELEASE);
    }
    Py_RETURN_NONE;
}

static PyObject *guard_faults(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLong((long)fault_count);
}

static PyMethodDef methods[] = {
    {"install", guard_install, METH_NOARGS, "Install the SIGBUS handler (once; later calls do nothing)."},
    {"register", guard_register, METH_O,
     "Guard the range of a buffer (a store's mmap); returns its slot, -1 when none is free or it is empty."},
    {"unregister", guard_unregister, METH_O, "Stop guarding a slot register() returned (once its map is gone)."},
    {"faults", guard_faults, METH_NOARGS, "How many faults the handler has turned into zero pages."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "store.platform._sigbus_guard", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sigbus_guard(void) { return PyModule_Create(&module); }
