/*
 * Optional C helper: vmsplice(2), which Python's os module does not offer.
 *
 * vmsplice(pipe_fd, buffers) hands the pages of the first buffers (bytes-like
 * objects, at most MAX_BUFFERS of them) to the write end of a pipe by
 * reference, as vmsplice(2) without SPLICE_F_GIFT does, and returns how many
 * bytes the pipe took: what fits in it, from the first buffer on. os.splice
 * then moves those pages on to a socket, which sends the pages themselves where
 * sendmsg would copy their bytes first. The pipe's write end should be
 * non-blocking: a full pipe raises BlockingIOError.
 *
 * The caller keeps vmsplice(2)'s rule: the memory is not written again while
 * the kernel may still hold its pages (until the peer has read them), and it
 * is not handed back to an allocator that could reuse it; a page unmapped
 * meanwhile stays alive while the kernel refers to it. The memory log's arenas
 * are such memory (see kafkette/server/net/zero_copy.py).
 *
 * Built on Linux only; elsewhere the module is empty and the callers send with
 * sendmsg. Errors raise OSError from errno; EINTR is retried after running
 * signal handlers (PEP 475).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef __linux__
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sys/uio.h>

#define MAX_BUFFERS 256

static PyObject *
splice_vmsplice(PyObject *module, PyObject *args)
{
    int fd;
    PyObject *buffers;
    if (!PyArg_ParseTuple(args, "iO:vmsplice", &fd, &buffers))
        return NULL;
    PyObject *seq = PySequence_Fast(buffers, "buffers must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    if (count > MAX_BUFFERS)
        count = MAX_BUFFERS;
    Py_buffer views[MAX_BUFFERS];
    struct iovec iov[MAX_BUFFERS];
    Py_ssize_t held = 0;
    PyObject *result = NULL;
    for (; held < count; held++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, held), &views[held],
                               PyBUF_SIMPLE) < 0)
            goto done;
        iov[held].iov_base = views[held].buf;
        iov[held].iov_len = (size_t)views[held].len;
    }
    ssize_t taken;
    int error;
    do {
        Py_BEGIN_ALLOW_THREADS
        taken = vmsplice(fd, iov, (unsigned long)count, SPLICE_F_NONBLOCK);
        Py_END_ALLOW_THREADS
        error = errno;
    } while (taken < 0 && error == EINTR && PyErr_CheckSignals() == 0);
    if (taken < 0) {
        if (!PyErr_Occurred()) {
            errno = error;
            PyErr_SetFromErrno(PyExc_OSError);
        }
        goto done;
    }
    result = PyLong_FromSsize_t(taken);
done:
    for (Py_ssize_t i = 0; i < held; i++)
        PyBuffer_Release(&views[i]);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef splice_methods[] = {
    {"vmsplice", splice_vmsplice, METH_VARARGS,
     "vmsplice(pipe_fd, buffers) -> bytes the pipe took, by reference to their pages."},
    {NULL, NULL, 0, NULL},
};
#else
static PyMethodDef splice_methods[] = {
    {NULL, NULL, 0, NULL},
};
#endif

static struct PyModuleDef splice_module = {
    PyModuleDef_HEAD_INIT, "_splice", "vmsplice(2) for sending stored batches by reference.", 0,
    splice_methods,
};

PyMODINIT_FUNC
PyInit__splice(void)
{
    return PyModuleDef_Init(&splice_module);
}
