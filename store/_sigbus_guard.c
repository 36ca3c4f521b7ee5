/* A SIGBUS handler that turns "a mapped file was cut under us" into pages of zeros.
 *
 * Reading a memory-mapped page past the file's current end (truncate, `cp`/`>` over the file, a
 * broker's recovery) or a page the disk cannot deliver (EIO) raises SIGBUS, which kills the process:
 * Python cannot catch it, and no size check made beforehand closes the window between the check
 * and the read when another process cuts the file. This handler maps an anonymous page of zeros
 * over the faulting page (MAP_FIXED) and returns, so the read is retried and sees zeros, which no
 * record or index check accepts; it counts the faults, and the store remaps its files when the
 * count moves (store/sigbus.py). Faults of another kind (misaligned access, hardware memory
 * errors) or an mmap that fails restore the previous disposition, so they kill the process as
 * before.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile sig_atomic_t fault_count = 0;
static struct sigaction previous;
static int installed = 0;
static uintptr_t page_mask = 0;
static size_t page_size = 0;

static void on_sigbus(int sig, siginfo_t *info, void *context) {
    (void)sig;
    (void)context;
    if (info != NULL && info->si_code == BUS_ADRERR && info->si_addr != NULL) {
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

static PyObject *guard_faults(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return PyLong_FromLong((long)fault_count);
}

static PyMethodDef methods[] = {
    {"install", guard_install, METH_NOARGS, "Install the SIGBUS handler (once; later calls do nothing)."},
    {"faults", guard_faults, METH_NOARGS, "How many faults the handler has turned into zero pages."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "store._sigbus_guard", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sigbus_guard(void) { return PyModule_Create(&module); }
