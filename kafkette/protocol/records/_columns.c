/*
 * Optional C accelerator: the records section of a magic 2 batch appended to
 * column buffers (see kafkette/protocol/records/columns.py, whose
 * pure-Python ColumnsBuilder gives the same bytes).
 *
 * append_columns(data, count, base_offset, base_timestamp, fixed_timestamp,
 *                first, end, with_headers, buffers)
 *
 * `buffers` is a list of bytearrays, in the order of the *_BUF constants
 * below; every record of the section whose offset is in [first, end) is
 * appended to them (offsets and timestamps as native int64, binary columns as
 * int32 end offsets, data bytes and an LSB-first validity bitmap, as Arrow
 * lays them out). Returns (records, null keys, null values, null header
 * values) appended.
 *
 * Errors. As _speedups.parse_records: for data that is not a well-formed
 * records section this representation holds (a bad length or varint, a header
 * key that is not UTF-8, an offset or timestamp beyond 64 bits, bytes left
 * over, columns growing past 2 GiB) it returns None with the buffers
 * untouched, and the Python code decodes the same data and raises the exact
 * error. The whole section is checked before anything is appended (two
 * passes: check and size, then copy).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define OK 0
#define NOT_HANDLED 1

enum {
    OFFSETS_BUF,
    TIMESTAMPS_BUF,
    KEY_OFFSETS_BUF,
    KEY_DATA_BUF,
    KEY_VALIDITY_BUF,
    VALUE_OFFSETS_BUF,
    VALUE_DATA_BUF,
    VALUE_VALIDITY_BUF,
    HEADER_OFFSETS_BUF,
    NAME_OFFSETS_BUF,
    NAME_DATA_BUF,
    HVALUE_OFFSETS_BUF,
    HVALUE_DATA_BUF,
    HVALUE_VALIDITY_BUF,
    BUFFER_COUNT
};

/* The zig-zag varint at *pos (before `end`), up to 64 bits, as _speedups.c reads it. */
static inline int
read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) {
        *out = (buf[p] & 1) ? -(int64_t)(buf[p] >> 1) - 1 : (int64_t)(buf[p] >> 1);
        *pos = p + 1;
        return OK;
    }
    uint64_t z = 0;
    int shift = 0;
    for (;;) {
        if (p >= end)
            return NOT_HANDLED;
        unsigned char b = buf[p++];
        if (shift == 63 && b > 1)
            return NOT_HANDLED;
        z |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
    }
    *pos = p;
    *out = (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
    return OK;
}

/* A nullable length-prefixed field: *start and *length (-1 for null). */
static inline int
read_field(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, Py_ssize_t *start,
           int64_t *length)
{
    if (read_varint(buf, pos, end, length) != OK)
        return NOT_HANDLED;
    if (*length == -1) {
        *start = *pos;
        return OK;
    }
    if (*length < 0 || *length > end - *pos)
        return NOT_HANDLED;
    *start = *pos;
    *pos += (Py_ssize_t)*length;
    return OK;
}

static int
is_utf8(const unsigned char *s, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] >= 0x80) { /* not ASCII: Python's strict decoder decides */
            PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
            if (text == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                    return -1;
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(text);
            return 1;
        }
    }
    return 1;
}

/*
 * Where pass 2 writes (pointers to the buffers' starts, indexes absolute), or
 * with offsets NULL (pass 1) what the section adds, counted from zero.
 */
typedef struct {
    int64_t *offsets, *timestamps;
    int32_t *key_offsets, *value_offsets, *header_offsets, *name_offsets, *hvalue_offsets;
    char *key_data, *value_data, *name_data, *hvalue_data;
    unsigned char *key_validity, *value_validity, *hvalue_validity;
    Py_ssize_t rows, headers;                         /* rows and header values */
    int64_t key_end, value_end, name_end, hvalue_end; /* data bytes */
    Py_ssize_t key_nulls, value_nulls, hvalue_nulls;  /* pass 1 only */
} Out;

typedef struct {
    int64_t base_offset, base_ts, fixed_ts, first, end;
    int has_fixed_ts, with_headers;
} Section;

static inline void
set_valid(unsigned char *bitmap, Py_ssize_t i)
{
    bitmap[i >> 3] |= (unsigned char)(1u << (i & 7));
}

/*
 * Parse the record in buf[pos:end]: in pass 1 check it and count what it
 * adds, in pass 2 (known valid) write it. Returns OK, NOT_HANDLED or -1.
 */
static int
read_record(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, const Section *s, Out *out)
{
    int64_t ts_delta, offset_delta, offset, ts, key_length, value_length, header_count;
    Py_ssize_t key_at, value_at;
    int writing = out->offsets != NULL;

    pos++; /* attributes */
    if (read_varint(buf, &pos, end, &ts_delta) != OK
        || read_varint(buf, &pos, end, &offset_delta) != OK)
        return NOT_HANDLED;
    if (__builtin_add_overflow(s->base_offset, offset_delta, &offset))
        return NOT_HANDLED;
    if (s->has_fixed_ts)
        ts = s->fixed_ts;
    else if (__builtin_add_overflow(s->base_ts, ts_delta, &ts))
        return NOT_HANDLED;
    if (read_field(buf, &pos, end, &key_at, &key_length) != OK
        || read_field(buf, &pos, end, &value_at, &value_length) != OK
        || read_varint(buf, &pos, end, &header_count) != OK)
        return NOT_HANDLED;
    if (header_count < 0 || header_count > end - pos) /* a header takes two bytes or more */
        return NOT_HANDLED;
    int keep = offset >= s->first && offset < s->end;
    Py_ssize_t row = out->rows;
    if (keep && writing) {
        out->offsets[row] = offset;
        out->timestamps[row] = ts;
        if (key_length >= 0) {
            memcpy(out->key_data + out->key_end, buf + key_at, (size_t)key_length);
            out->key_end += key_length;
            set_valid(out->key_validity, row);
        }
        out->key_offsets[row + 1] = (int32_t)out->key_end;
        if (value_length >= 0) {
            memcpy(out->value_data + out->value_end, buf + value_at, (size_t)value_length);
            out->value_end += value_length;
            set_valid(out->value_validity, row);
        }
        out->value_offsets[row + 1] = (int32_t)out->value_end;
    }
    else if (keep) {
        if (key_length >= 0)
            out->key_end += key_length;
        else
            out->key_nulls++;
        if (value_length >= 0)
            out->value_end += value_length;
        else
            out->value_nulls++;
    }
    for (int64_t i = 0; i < header_count; i++) {
        int64_t name_length, hvalue_length;
        Py_ssize_t name_at, hvalue_at;
        if (read_varint(buf, &pos, end, &name_length) != OK || name_length < 0
            || name_length > end - pos)
            return NOT_HANDLED;
        name_at = pos;
        pos += (Py_ssize_t)name_length;
        if (read_field(buf, &pos, end, &hvalue_at, &hvalue_length) != OK)
            return NOT_HANDLED;
        if (!writing) {
            int valid = is_utf8(buf + name_at, (Py_ssize_t)name_length);
            if (valid <= 0)
                return valid < 0 ? -1 : NOT_HANDLED;
        }
        if (!keep || !s->with_headers)
            continue;
        Py_ssize_t h = out->headers;
        if (writing) {
            memcpy(out->name_data + out->name_end, buf + name_at, (size_t)name_length);
            out->name_end += name_length;
            out->name_offsets[h + 1] = (int32_t)out->name_end;
            if (hvalue_length >= 0) {
                memcpy(out->hvalue_data + out->hvalue_end, buf + hvalue_at,
                       (size_t)hvalue_length);
                out->hvalue_end += hvalue_length;
                set_valid(out->hvalue_validity, h);
            }
            out->hvalue_offsets[h + 1] = (int32_t)out->hvalue_end;
        }
        else {
            out->name_end += name_length;
            if (hvalue_length >= 0)
                out->hvalue_end += hvalue_length;
            else
                out->hvalue_nulls++;
        }
        out->headers = h + 1;
    }
    if (pos != end)
        return NOT_HANDLED;
    if (keep) {
        if (writing && s->with_headers)
            out->header_offsets[row + 1] = (int32_t)out->headers;
        out->rows = row + 1;
    }
    return OK;
}

/* One pass over the section's `count` records; OK, NOT_HANDLED or -1. */
static int
read_section(const unsigned char *buf, Py_ssize_t n, Py_ssize_t count, const Section *s, Out *out)
{
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length;
        if (read_varint(buf, &pos, n, &length) != OK || length < 0 || length > n - pos)
            return NOT_HANDLED;
        int status = read_record(buf, pos, pos + (Py_ssize_t)length, s, out);
        if (status != OK)
            return status;
        pos += (Py_ssize_t)length;
    }
    return pos == n ? OK : NOT_HANDLED;
}

/* The last int32 of an offsets buffer: its data's end so far. */
static int64_t
last_int32(PyObject *array)
{
    int32_t value;
    memcpy(&value, PyByteArray_AS_STRING(array) + PyByteArray_GET_SIZE(array) - 4, 4);
    return value;
}

static Py_ssize_t
bitmap_size(Py_ssize_t bits)
{
    return (bits + 7) / 8;
}

static PyObject *
append_columns(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts, first, end;
    PyObject *fixed_obj, *buffers;
    int with_headers;
    PyObject *arrays[BUFFER_COUNT];
    Py_ssize_t sizes[BUFFER_COUNT];
    char *starts[BUFFER_COUNT];

    if (!PyArg_ParseTuple(args, "y*nLLOLLpO!:append_columns", &view, &count, &base_offset,
                          &base_ts, &fixed_obj, &first, &end, &with_headers, &PyList_Type,
                          &buffers))
        return NULL;
    Section s = {.base_offset = base_offset, .base_ts = base_ts, .first = first, .end = end,
                 .with_headers = with_headers, .has_fixed_ts = fixed_obj != Py_None};
    if (PyList_GET_SIZE(buffers) != BUFFER_COUNT)
        goto bad_buffers;
    for (int i = 0; i < BUFFER_COUNT; i++) {
        arrays[i] = PyList_GET_ITEM(buffers, i);
        if (!PyByteArray_CheckExact(arrays[i]))
            goto bad_buffers;
        sizes[i] = PyByteArray_GET_SIZE(arrays[i]);
    }
    Py_ssize_t rows0 = sizes[OFFSETS_BUF] / 8;
    Py_ssize_t headers0 = sizes[HVALUE_OFFSETS_BUF] / 4 - 1;
    if (sizes[OFFSETS_BUF] % 8 || sizes[TIMESTAMPS_BUF] != sizes[OFFSETS_BUF]
        || sizes[KEY_OFFSETS_BUF] != 4 * (rows0 + 1)
        || sizes[VALUE_OFFSETS_BUF] != 4 * (rows0 + 1)
        || sizes[KEY_VALIDITY_BUF] != bitmap_size(rows0)
        || sizes[VALUE_VALIDITY_BUF] != bitmap_size(rows0)
        || sizes[HEADER_OFFSETS_BUF] != (with_headers ? 4 * (rows0 + 1) : 4)
        || sizes[HVALUE_OFFSETS_BUF] % 4 || headers0 < 0
        || sizes[NAME_OFFSETS_BUF] != 4 * (headers0 + 1)
        || sizes[HVALUE_VALIDITY_BUF] != bitmap_size(headers0))
        goto bad_buffers;
    if (s.has_fixed_ts) {
        int overflow = 0;
        s.fixed_ts = PyLong_AsLongLongAndOverflow(fixed_obj, &overflow);
        if (s.fixed_ts == -1 && PyErr_Occurred())
            goto error;
        if (overflow)
            goto not_handled;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t n = view.len;
    if (count < 0 || count > n) /* every record takes a byte at least */
        goto not_handled;

    /* pass 1: check every record, count what is appended */
    Out add;
    memset(&add, 0, sizeof add);
    int status = read_section(buf, n, count, &s, &add);
    if (status < 0)
        goto error;
    if (status == NOT_HANDLED)
        goto not_handled;
    Out out;
    memset(&out, 0, sizeof out);
    out.rows = rows0;
    out.headers = headers0;
    out.key_end = last_int32(arrays[KEY_OFFSETS_BUF]);
    out.value_end = last_int32(arrays[VALUE_OFFSETS_BUF]);
    out.name_end = last_int32(arrays[NAME_OFFSETS_BUF]);
    out.hvalue_end = last_int32(arrays[HVALUE_OFFSETS_BUF]);
    if (out.key_end + add.key_end > INT32_MAX || out.value_end + add.value_end > INT32_MAX
        || out.name_end + add.name_end > INT32_MAX
        || out.hvalue_end + add.hvalue_end > INT32_MAX
        || (int64_t)headers0 + add.headers > INT32_MAX)
        goto not_handled; /* the Python code raises the overflow */

    /* pass 2: grow every buffer (new bytes zeroed), then write */
    Py_ssize_t rows = add.rows, headers = add.headers;
    Py_ssize_t grown[BUFFER_COUNT] = {
        [OFFSETS_BUF] = 8 * (rows0 + rows),
        [TIMESTAMPS_BUF] = 8 * (rows0 + rows),
        [KEY_OFFSETS_BUF] = 4 * (rows0 + rows + 1),
        [KEY_DATA_BUF] = sizes[KEY_DATA_BUF] + (Py_ssize_t)add.key_end,
        [KEY_VALIDITY_BUF] = bitmap_size(rows0 + rows),
        [VALUE_OFFSETS_BUF] = 4 * (rows0 + rows + 1),
        [VALUE_DATA_BUF] = sizes[VALUE_DATA_BUF] + (Py_ssize_t)add.value_end,
        [VALUE_VALIDITY_BUF] = bitmap_size(rows0 + rows),
        [HEADER_OFFSETS_BUF] = with_headers ? 4 * (rows0 + rows + 1) : 4,
        [NAME_OFFSETS_BUF] = 4 * (headers0 + headers + 1),
        [NAME_DATA_BUF] = sizes[NAME_DATA_BUF] + (Py_ssize_t)add.name_end,
        [HVALUE_OFFSETS_BUF] = 4 * (headers0 + headers + 1),
        [HVALUE_DATA_BUF] = sizes[HVALUE_DATA_BUF] + (Py_ssize_t)add.hvalue_end,
        [HVALUE_VALIDITY_BUF] = bitmap_size(headers0 + headers),
    };
    for (int i = 0; i < BUFFER_COUNT; i++) {
        if (PyByteArray_Resize(arrays[i], grown[i]) < 0) {
            for (int j = 0; j < i; j++)
                PyByteArray_Resize(arrays[j], sizes[j]); /* shrinking does not fail */
            goto error;
        }
        starts[i] = PyByteArray_AS_STRING(arrays[i]);
        memset(starts[i] + sizes[i], 0, (size_t)(grown[i] - sizes[i]));
    }
    out.offsets = (int64_t *)starts[OFFSETS_BUF];
    out.timestamps = (int64_t *)starts[TIMESTAMPS_BUF];
    out.key_offsets = (int32_t *)starts[KEY_OFFSETS_BUF];
    out.key_data = starts[KEY_DATA_BUF];
    out.key_validity = (unsigned char *)starts[KEY_VALIDITY_BUF];
    out.value_offsets = (int32_t *)starts[VALUE_OFFSETS_BUF];
    out.value_data = starts[VALUE_DATA_BUF];
    out.value_validity = (unsigned char *)starts[VALUE_VALIDITY_BUF];
    out.header_offsets = (int32_t *)starts[HEADER_OFFSETS_BUF];
    out.name_offsets = (int32_t *)starts[NAME_OFFSETS_BUF];
    out.name_data = starts[NAME_DATA_BUF];
    out.hvalue_offsets = (int32_t *)starts[HVALUE_OFFSETS_BUF];
    out.hvalue_data = starts[HVALUE_DATA_BUF];
    out.hvalue_validity = (unsigned char *)starts[HVALUE_VALIDITY_BUF];
    read_section(buf, n, count, &s, &out); /* cannot fail: pass 1 checked it all */
    PyBuffer_Release(&view);
    return Py_BuildValue("nnnn", rows, add.key_nulls, add.value_nulls, add.hvalue_nulls);

bad_buffers:
    PyErr_SetString(PyExc_TypeError,
                    "append_columns needs the 14 column bytearrays of a ColumnsBuilder");
    goto error;

not_handled:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;

error:
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef columns_methods[] = {
    {"append_columns", append_columns, METH_VARARGS,
     "append_columns(data, count, base_offset, base_timestamp, fixed_timestamp, first, end,\n"
     "               with_headers, buffers)\n"
     "--\n\n"
     "Append the records of a magic 2 records section whose offsets are in\n"
     "[first, end) to the column buffers; (records, null keys, null values,\n"
     "null header values) appended, or None when the data is not well formed\n"
     "(the buffers are then untouched and the Python code raises)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef columns_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkette.protocol.records._columns",
    .m_doc = "C accelerator for decoding records into column buffers (optional).",
    .m_size = 0,
    .m_methods = columns_methods,
};

PyMODINIT_FUNC
PyInit__columns(void)
{
    return PyModuleDef_Init(&columns_module);
}
