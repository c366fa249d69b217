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
 * crc32c(data, value=0) is the CRC-32C of data continuing from value (as the
 * crc32c package computes it), for tests and for callers wanting the same
 * implementation.
 *
 * CRC-32C. With SSE4.2 (checked at run time) three interleaved streams of
 * crc32 instructions, combined by "shift" tables: the CRC register is linear
 * over GF(2), so the register after A then B is shift_|B|(reg after A) XOR the
 * register of B alone started from zero, and shifting a register by a fixed
 * number of zero bytes is a 32x32 bit matrix, applied a byte at a time with
 * four 256-entry tables. Without SSE4.2: slice-by-8 tables.
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_SSE42_PATH 1
/* VPCLMULQDQ intrinsics and target names: GCC 8, clang 6. */
#if (defined(__clang__) && __clang_major__ >= 6) || (!defined(__clang__) && __GNUC__ >= 8)
#define HAVE_AVX512_PATH 1
#endif
#endif

#define POLY 0x82F63B78u /* CRC-32C, reflected */
#define RECORD_BATCH_OVERHEAD 61
#define LOG_OVERHEAD 12
#define PREFIX_SIZE 16
#define ATTRIBUTES_OFFSET 21
#define CONTROL_MASK 0x20

/* ---- CRC-32C ------------------------------------------------------------- */

static uint32_t slice_table[8][256];

/* Interleaved block lengths of the hardware path (bytes per stream). */
#define LONG_BLOCK 4096
#define SHORT_BLOCK 256
static uint32_t shift_long[4][256];
static uint32_t shift_short[4][256];

static inline uint64_t
load_le64(const unsigned char *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

/* The raw register (no pre- or post-inversion) after `n` bytes at `p`. */
static uint32_t
crc_table(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint64_t w = load_le64(p) ^ crc;
        crc = slice_table[7][w & 0xff] ^ slice_table[6][(w >> 8) & 0xff] ^
              slice_table[5][(w >> 16) & 0xff] ^ slice_table[4][(w >> 24) & 0xff] ^
              slice_table[3][(w >> 32) & 0xff] ^ slice_table[2][(w >> 40) & 0xff] ^
              slice_table[1][(w >> 48) & 0xff] ^ slice_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = slice_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

/* The register after `n` zero bytes, from `crc` (slow: only for building tables). */
static uint32_t
crc_zeros(uint32_t crc, size_t n)
{
    static const unsigned char zeros[256];
    while (n) {
        size_t chunk = n < sizeof(zeros) ? n : sizeof(zeros);
        crc = crc_table(crc, zeros, chunk);
        n -= chunk;
    }
    return crc;
}

static void
build_shift_table(uint32_t table[4][256], size_t n)
{
    uint32_t image[32];
    for (int bit = 0; bit < 32; bit++)
        image[bit] = crc_zeros((uint32_t)1 << bit, n);
    for (int k = 0; k < 4; k++) {
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int bit = 0; bit < 8; bit++)
                if (b & (1 << bit))
                    v ^= image[8 * k + bit];
            table[k][b] = v;
        }
    }
}

static void
build_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
        slice_table[0][n] = c;
    }
    for (int k = 1; k < 8; k++)
        for (int n = 0; n < 256; n++)
            slice_table[k][n] =
                (slice_table[k - 1][n] >> 8) ^ slice_table[0][slice_table[k - 1][n] & 0xff];
    build_shift_table(shift_long, LONG_BLOCK);
    build_shift_table(shift_short, SHORT_BLOCK);
}

static inline uint32_t
shift(uint32_t table[4][256], uint32_t crc)
{
    return table[0][crc & 0xff] ^ table[1][(crc >> 8) & 0xff] ^ table[2][(crc >> 16) & 0xff] ^
           table[3][crc >> 24];
}

#ifdef HAVE_SSE42_PATH
/*
 * Three interleaved crc32 streams over whole runs of three `block`-byte blocks
 * (the instruction's latency hides behind the other two), joined with the
 * shift table for `block`; *p and *n advance past the runs.
 */
__attribute__((target("sse4.2"))) static inline uint64_t
crc_sse42_runs(uint64_t c0, const unsigned char **p, size_t *n, size_t block,
               uint32_t table[4][256])
{
    const unsigned char *q = *p;
    size_t left = *n;
    while (left >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        for (const unsigned char *end = q + block; q < end; q += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, q, 8);
            memcpy(&w1, q + block, 8);
            memcpy(&w2, q + 2 * block, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c0 = shift(table, shift(table, (uint32_t)c0) ^ (uint32_t)c1) ^ (uint32_t)c2;
        q += 2 * block;
        left -= 3 * block;
    }
    *p = q;
    *n = left;
    return c0;
}

__attribute__((target("sse4.2"))) static uint32_t
crc_sse42(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c0 = crc_sse42_runs(crc, &p, &n, LONG_BLOCK, shift_long);
    c0 = crc_sse42_runs(c0, &p, &n, SHORT_BLOCK, shift_short);
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c0 = _mm_crc32_u64(c0, w);
    }
    uint32_t c = (uint32_t)c0;
    while (n--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

#ifdef HAVE_AVX512_PATH
/*
 * Folding with carry-less multiplication, 64 bytes per 512-bit register. Bit i
 * of a 128-bit lane loaded from the data is the coefficient of x^(127-i) (a
 * reflected CRC takes each byte's low bit first). Moving a lane D bits further
 * along the message multiplies it by x^D; modulo P that is
 *   lo(A) * (x^(D+64) mod P) + hi(A) * (x^D mod P),
 * each product at most 95 bits, so it fits a lane. A carry-less product of a
 * 64-bit and a 32-bit reflected value comes out multiplied by x^33 in lane
 * terms, hence the constants x^(D+31) and x^(D-33) (fold_constant). What is
 * left at the end, one lane congruent to the message so far, is turned into
 * the register by the crc32 instruction over its 16 bytes from zero.
 */
typedef struct {
    uint64_t lo, hi;
} fold_pair;

static fold_pair fold_2048, fold_512, fold_384, fold_256, fold_128;

/* x^n mod P as a reflected 32-bit value (bit j: coefficient of x^(31-j)). */
static uint32_t
xpow_mod(unsigned n)
{
    uint32_t r = 0x80000000u;
    while (n--)
        r = (r >> 1) ^ ((r & 1) ? POLY : 0);
    return r;
}

static fold_pair
fold_constant(unsigned distance)
{
    fold_pair k = {xpow_mod(distance + 31), xpow_mod(distance - 33)};
    return k;
}

#define AVX512_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

AVX512_TARGET static inline __m512i
fold512(__m512i x, __m512i k, __m512i data)
{
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
                                     _mm512_clmulepi64_epi128(x, k, 0x11), data, 0x96);
}

AVX512_TARGET static inline __m128i
fold128(__m128i x, fold_pair k)
{
    __m128i kk = _mm_set_epi64x((long long)k.hi, (long long)k.lo);
    return _mm_xor_si128(_mm_clmulepi64_si128(x, kk, 0x00), _mm_clmulepi64_si128(x, kk, 0x11));
}

AVX512_TARGET static inline __m512i
broadcast(fold_pair k)
{
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)k.hi, (long long)k.lo));
}

AVX512_TARGET static uint32_t
crc_avx512(uint32_t crc, const unsigned char *p, size_t n)
{
    if (n < 256)
        return crc_sse42(crc, p, n);
    /* The register going in is the same as XORing it into the first four bytes. */
    __m512i x0 = _mm512_xor_si512(
        _mm512_loadu_si512(p),
        _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128((int)crc), 0));
    __m512i x1 = _mm512_loadu_si512(p + 64);
    __m512i x2 = _mm512_loadu_si512(p + 128);
    __m512i x3 = _mm512_loadu_si512(p + 192);
    p += 256;
    n -= 256;
    __m512i k = broadcast(fold_2048);
    for (; n >= 256; p += 256, n -= 256) {
        x0 = fold512(x0, k, _mm512_loadu_si512(p));
        x1 = fold512(x1, k, _mm512_loadu_si512(p + 64));
        x2 = fold512(x2, k, _mm512_loadu_si512(p + 128));
        x3 = fold512(x3, k, _mm512_loadu_si512(p + 192));
    }
    k = broadcast(fold_512);
    x1 = fold512(x0, k, x1);
    x2 = fold512(x1, k, x2);
    x3 = fold512(x2, k, x3);
    for (; n >= 64; p += 64, n -= 64)
        x3 = fold512(x3, k, _mm512_loadu_si512(p));
    __m128i a = _mm512_extracti32x4_epi32(x3, 3);
    a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(x3, 0), fold_384));
    a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(x3, 1), fold_256));
    a = _mm_xor_si128(a, fold128(_mm512_extracti32x4_epi32(x3, 2), fold_128));
    for (; n >= 16; p += 16, n -= 16)
        a = _mm_xor_si128(fold128(a, fold_128), _mm_loadu_si128((const __m128i *)p));
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(a));
    c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(a, 1));
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

static uint32_t (*crc_update)(uint32_t, const unsigned char *, size_t) = crc_table;

/* CRC-32C of `n` bytes at `p`, continuing from the CRC `value`. */
static inline uint32_t
crc32c_value(uint32_t value, const unsigned char *p, size_t n)
{
    return ~crc_update(~value, p, n);
}

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

/* Whether the fast path takes the one batch in `buf` (what SegmentedLog.append checks). */
static int
accepted(const unsigned char *buf, Py_ssize_t size, int check_crc)
{
    if (size < RECORD_BATCH_OVERHEAD || be32(buf + 8) != size - LOG_OVERHEAD || buf[16] != 2)
        return 0;
    if (be32(buf + 23) < 0 || be32(buf + 57) < 0 || (be16(buf + 21) & CONTROL_MASK))
        return 0;
    return !check_crc ||
           crc32c_value(0, buf + ATTRIBUTES_OFFSET, (size_t)(size - ATTRIBUTES_OFFSET)) ==
               be32u(buf + 17);
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
    return accepted(buf, size, check_crc) ? header_fields(buf) : NULL;
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

static PyObject *
crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32c(data, value=0) takes 1 or 2 arguments");
        return NULL;
    }
    unsigned long value = 0;
    if (nargs == 2) {
        value = PyLong_AsUnsignedLong(args[1]);
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (value > 0xFFFFFFFFul) {
            PyErr_SetString(PyExc_OverflowError, "a CRC-32C value has 32 bits");
            return NULL;
        }
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc = crc32c_value((uint32_t)value, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* The CRC-32C implementations this CPU can run, by name (for tests). */
typedef struct {
    const char *name;
    uint32_t (*update)(uint32_t, const unsigned char *, size_t);
} crc_implementation;

static crc_implementation implementations[3];
static int implementation_count;

static PyObject *
crc32c_with(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "crc32c_with(name, data) takes 2 arguments");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(args[0]);
    if (name == NULL)
        return NULL;
    for (int i = 0; i < implementation_count; i++) {
        if (strcmp(name, implementations[i].name) == 0) {
            Py_buffer view;
            if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
                return NULL;
            uint32_t crc = ~implementations[i].update(~0u, view.buf, (size_t)view.len);
            PyBuffer_Release(&view);
            return PyLong_FromUnsignedLong(crc);
        }
    }
    PyErr_Format(PyExc_ValueError, "no CRC-32C implementation %R on this machine", args[0]);
    return NULL;
}

static PyMethodDef append_methods[] = {
    {"check_batch", (PyCFunction)(void (*)(void))check_batch, METH_FASTCALL,
     "check_batch(data, check_crc) -> the 13 header fields of the one batch in data, or None\n"
     "when the append fast path must leave it to the general path."},
#ifdef HAVE_WRITEV /* without it (Windows) the segment writes with os.writev */
    {"write_batch", (PyCFunction)(void (*)(void))write_batch, METH_FASTCALL,
     "write_batch(fd, data, base_offset, leader_epoch) -> None: write the batch in data\n"
     "to fd with its first 16 bytes rewritten (base offset, length, leader epoch)."},
#endif
    {"crc32c", (PyCFunction)(void (*)(void))crc32c, METH_FASTCALL,
     "crc32c(data, value=0) -> the CRC-32C of data continuing from value."},
    {"crc32c_with", (PyCFunction)(void (*)(void))crc32c_with, METH_FASTCALL,
     "crc32c_with(name, data) -> the CRC-32C of data by the named implementation (one of\n"
     "CRC_IMPLEMENTATIONS; for tests)."},
    {NULL, NULL, 0, NULL},
};

static void
add_implementation(const char *name, uint32_t (*update)(uint32_t, const unsigned char *, size_t))
{
    implementations[implementation_count].name = name;
    implementations[implementation_count].update = update;
    implementation_count++;
    crc_update = update; /* the last one added is the fastest */
}

static int
append_exec(PyObject *module)
{
    build_tables();
    implementation_count = 0;
    add_implementation("table", crc_table);
#ifdef HAVE_SSE42_PATH
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        add_implementation("sse4.2", crc_sse42);
#endif
#ifdef HAVE_AVX512_PATH
    if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("pclmul") &&
        __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq")) {
        fold_2048 = fold_constant(2048);
        fold_512 = fold_constant(512);
        fold_384 = fold_constant(384);
        fold_256 = fold_constant(256);
        fold_128 = fold_constant(128);
        add_implementation("avx512-vpclmulqdq", crc_avx512);
    }
#endif
    PyObject *names = PyTuple_New(implementation_count);
    if (names == NULL)
        return -1;
    for (int i = 0; i < implementation_count; i++) {
        PyObject *name = PyUnicode_FromString(implementations[i].name);
        if (name == NULL) {
            Py_DECREF(names);
            return -1;
        }
        PyTuple_SET_ITEM(names, i, name);
    }
    if (PyModule_AddObject(module, "CRC_IMPLEMENTATIONS", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    return PyModule_AddStringConstant(module, "CRC_IMPLEMENTATION",
                                      implementations[implementation_count - 1].name);
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
