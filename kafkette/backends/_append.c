/*
 * Optional C accelerator for the storage backends' append path.
 *
 * check_batch(data, check_crc) does what the append fast path of
 * SegmentedLog.append checks of a buffer that should hold exactly one whole
 * magic 2 batch (length, magic, non-negative counts, not a control batch and,
 * when asked, the CRC-32C over attributes..end) and returns the header fields
 * as HEADER_STRUCT.unpack_from would. Whatever it does not accept it returns
 * None for: the Python general path then handles the buffer and raises the
 * exact error, so the two paths cannot disagree on errors.
 *
 * write_batch(fd, data, base_offset, leader_epoch) writes the batch as a log
 * stores it: a new 16-byte prefix (base offset, batch length, leader epoch)
 * and the caller's bytes after their own first 16, with one writev (more on a
 * short write), straight to the file: the bytes are in the OS page cache when
 * it returns. Errors raise OSError from errno, EINTR is retried after running
 * signal handlers (PEP 475), as os.writev does. Not built without writev
 * (Windows): the segment then writes with os.writev.
 *
 * These are functions of their arguments only (bytes, a file descriptor, numbers):
 * the log's state stays in Python. (An append_fast that also did the segment's and
 * the log's bookkeeping on their slots saved 0.6 us of a 2 us append of a 170-byte
 * batch and nothing measurable at 16 KiB; it was removed with them.)
 *
 * The CRC-32C is the crc32c package's, called from here: kafkette has one
 * implementation (its own in this file was no faster than the package's: 16 KiB
 * in 1.5-2.0 us either way, 1 MiB in 66-102 us against the package's 54 us).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#ifndef _WIN32
#include <sys/uio.h>
#include <unistd.h>
#define HAVE_WRITEV 1
#endif

#define RECORD_BATCH_OVERHEAD 61
#define LOG_OVERHEAD 12
#define PREFIX_SIZE 16
#define ATTRIBUTES_OFFSET 21
#define CONTROL_MASK 0x20

/* ---- batches ------------------------------------------------------------- */

static inline int64_t
be64(const unsigned char *p)
{
    return (int64_t)((uint64_t)p[0] << 56 | (uint64_t)p[1] << 48 | (uint64_t)p[2] << 40 |
                     (uint64_t)p[3] << 32 | (uint64_t)p[4] << 24 | (uint64_t)p[5] << 16 |
                     (uint64_t)p[6] << 8 | (uint64_t)p[7]);
}

static inline uint32_t
be32u(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline int32_t
be32(const unsigned char *p)
{
    return (int32_t)be32u(p);
}

static inline int16_t
be16(const unsigned char *p)
{
    return (int16_t)((uint16_t)p[0] << 8 | (uint16_t)p[1]);
}

static inline void
put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

static inline void
put_be32(unsigned char *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

/* ---- CRC-32C: the crc32c package's (the one implementation kafkette uses) ---- */

static PyObject *package_crc32c; /* crc32c.crc32c */

/* Whether the batch's CRC field matches its bytes: 1, 0, or -1 with an exception. */
static int
crc_matches(const unsigned char *buf, Py_ssize_t size)
{
    PyObject *view = PyMemoryView_FromMemory((char *)buf + ATTRIBUTES_OFFSET,
                                             size - ATTRIBUTES_OFFSET, PyBUF_READ);
    if (view == NULL)
        return -1;
    PyObject *crc = PyObject_CallOneArg(package_crc32c, view);
    Py_DECREF(view);
    if (crc == NULL)
        return -1;
    unsigned long value = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (value == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return value == be32u(buf + 17);
}

/* Whether the fast path takes the one batch in `buf` (what SegmentedLog.append checks):
 * 1, 0, or -1 with an exception. */
static int
accepted(const unsigned char *buf, Py_ssize_t size, int check_crc)
{
    if (size < RECORD_BATCH_OVERHEAD || be32(buf + 8) != size - LOG_OVERHEAD || buf[16] != 2)
        return 0;
    if (be32(buf + 23) < 0 || be32(buf + 57) < 0 || (be16(buf + 21) & CONTROL_MASK))
        return 0;
    return check_crc ? crc_matches(buf, size) : 1;
}

/* The 13 header fields of the batch at `buf`, as HEADER_STRUCT.unpack_from returns them. */
static PyObject *
header_fields(const unsigned char *buf)
{
    PyObject *t = PyTuple_New(13);
    if (t == NULL)
        return NULL;
    PyObject *items[13] = {
        PyLong_FromLongLong(be64(buf)),
        PyLong_FromLong(be32(buf + 8)),
        PyLong_FromLong(be32(buf + 12)),
        PyLong_FromLong((signed char)buf[16]),
        PyLong_FromUnsignedLong(be32u(buf + 17)),
        PyLong_FromLong(be16(buf + 21)),
        PyLong_FromLong(be32(buf + 23)),
        PyLong_FromLongLong(be64(buf + 27)),
        PyLong_FromLongLong(be64(buf + 35)),
        PyLong_FromLongLong(be64(buf + 43)),
        PyLong_FromLong(be16(buf + 51)),
        PyLong_FromLong(be32(buf + 53)),
        PyLong_FromLong(be32(buf + 57)),
    };
    for (int i = 0; i < 13; i++) {
        if (items[i] == NULL) {
            for (int j = i + 1; j < 13; j++)
                Py_XDECREF(items[j]);
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, items[i]);
    }
    return t;
}

/*
 * The header fields of the one batch in `buf` when the fast path takes it;
 * NULL with no exception set when it must not.
 */
static PyObject *
checked_fields(const unsigned char *buf, Py_ssize_t size, int check_crc)
{
    return accepted(buf, size, check_crc) == 1 ? header_fields(buf) : NULL;
}

static PyObject *
check_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "check_batch(data, check_crc) takes 2 arguments");
        return NULL;
    }
    int check_crc = PyObject_IsTrue(args[1]);
    if (check_crc < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *fields = checked_fields(view.buf, view.len, check_crc);
    PyBuffer_Release(&view);
    if (fields == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return fields;
}

#ifdef HAVE_WRITEV
/* Write all of iov[0..count) to fd: 0, or -1 with an exception set. */
static int
write_all(int fd, struct iovec *iov, int count)
{
    while (count) {
        ssize_t n;
        Py_BEGIN_ALLOW_THREADS
        n = writev(fd, iov, count);
        Py_END_ALLOW_THREADS
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0)
                    return -1;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        if (n == 0) { /* not for a regular file; do not spin */
            errno = EIO;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        while (count && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            count--;
        }
        if (count) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return 0;
}

/* Write the stored form of the batch at buf (16 bytes or more): 0, or -1 with an exception. */
static int
write_stored(int fd, const void *buf, Py_ssize_t len, long long base_offset, int32_t epoch)
{
    unsigned char prefix[PREFIX_SIZE];
    put_be64(prefix, (uint64_t)base_offset);
    put_be32(prefix + 8, (uint32_t)(len - LOG_OVERHEAD));
    put_be32(prefix + 12, (uint32_t)epoch);
    struct iovec iov[2] = {
        {prefix, PREFIX_SIZE},
        {(char *)buf + PREFIX_SIZE, (size_t)(len - PREFIX_SIZE)},
    };
    return write_all(fd, iov, len > PREFIX_SIZE ? 2 : 1);
}

static PyObject *
write_batch(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "write_batch(fd, data, base_offset, leader_epoch) takes 4 arguments");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (fd < INT_MIN || fd > INT_MAX) { /* -1 (a closed segment) fails in writev: EBADF */
        PyErr_SetString(PyExc_OverflowError, "file descriptor out of int range");
        return NULL;
    }
    long long base_offset = PyLong_AsLongLong(args[2]);
    if (base_offset == -1 && PyErr_Occurred())
        return NULL;
    long epoch = PyLong_AsLong(args[3]);
    if (epoch == -1 && PyErr_Occurred())
        return NULL;
    if (epoch < INT32_MIN || epoch > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "leader epoch out of int32 range");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (view.len < PREFIX_SIZE || view.len - LOG_OVERHEAD > INT32_MAX) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "a batch has 16 bytes to 2 GiB");
        return NULL;
    }
    int status = write_stored((int)fd, view.buf, view.len, base_offset, (int32_t)epoch);
    PyBuffer_Release(&view);
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}


#endif /* HAVE_WRITEV */

static PyMethodDef append_methods[] = {
    {"check_batch", (PyCFunction)(void (*)(void))check_batch, METH_FASTCALL,
     "check_batch(data, check_crc) -> the 13 header fields of the one batch in data, or None\n"
     "when the append fast path must leave it to the general path."},
#ifdef HAVE_WRITEV /* without it (Windows) the segment writes with os.writev */
    {"write_batch", (PyCFunction)(void (*)(void))write_batch, METH_FASTCALL,
     "write_batch(fd, data, base_offset, leader_epoch) -> None: write the batch in data\n"
     "to fd with its first 16 bytes rewritten (base offset, length, leader epoch)."},
#endif
    {NULL, NULL, 0, NULL},
};

static int
append_exec(PyObject *module)
{
    PyObject *package = PyImport_ImportModule("crc32c");
    if (package == NULL)
        return -1;
    Py_XSETREF(package_crc32c, PyObject_GetAttrString(package, "crc32c"));
    Py_DECREF(package);
    return package_crc32c == NULL ? -1 : 0;
}

static PyModuleDef_Slot append_slots[] = {
    {Py_mod_exec, append_exec},
    {0, NULL},
};

static struct PyModuleDef append_module = {
    PyModuleDef_HEAD_INIT,
    "kafkette.backends._append",
    "Optional C accelerator for the storage backends' append path.",
    0,
    append_methods,
    append_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__append(void)
{
    return PyModuleDef_Init(&append_module);
}
