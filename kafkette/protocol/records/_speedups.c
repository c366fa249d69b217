/*
 * Optional C accelerator for kafkette's record parsing and encoding.
 *
 * parse_records() does what record_parser._parse does record by record, for
 * the records section of a (decompressed) magic 2 batch, and makes the Record
 * objects directly. Given a prefix and a suffix (tuples), it makes each record
 * as record_type(*prefix, offset, timestamp, key, value, headers, *suffix)
 * instead: the consumer's records (topic and partition before, the batch's
 * timestamp type and leader epoch after) in one allocation, not three.
 *
 * Errors. This code never raises for bad data: whenever the input is not a
 * well-formed records section it can represent (a length or varint out of
 * bounds, a negative length, a varint wider than 64 bits, a header key that
 * is not UTF-8, an offset or timestamp that overflows 64 bits, bytes left
 * over...), it returns None and the Python wrapper parses the same data with
 * the pure-Python parser, which raises the exact exception and message.
 * Hostile input therefore costs two parses, valid input one, and the two
 * implementations cannot disagree on errors. The only exceptions raised here
 * are MemoryError and TypeError for bad arguments.
 *
 * encode_record() writes one record without headers as RecordBatchBuilder
 * does, byte for byte; what it does not handle (non-bytes keys or values,
 * deltas beyond 64 bits) it leaves to the Python encoder by returning None.
 *
 * Bounds. Every read is checked against the end of the record being parsed
 * (itself checked against the end of the data), so nothing is read past the
 * buffer whatever the lengths and varints say.
 *
 * Garbage collection. Records, header tuples and (name, value) pairs hold
 * only ints, bytes, str, None and such tuples: they can never be part of a
 * reference cycle, so they are untracked by the cyclic collector once built
 * (as CPython itself does for tuples of atomic objects); records are never
 * tracked at all (see new_record), nor is the list holding them. A batch's
 * thousand records then cost the collector nothing.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Result of the readers below: OK, or NOT_HANDLED (leave it to Python). */
#define OK 0
#define NOT_HANDLED 1

/*
 * Read the zig-zag varint at *pos (all of it before `end`) into *out.
 * Up to ten bytes, as Kafka's varlong; a value beyond 64 bits (which the
 * Python parser turns into a big int) is NOT_HANDLED.
 */
static inline int
read_varint(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    Py_ssize_t p = *pos;
    if (p < end && buf[p] < 0x80) { /* one byte: most lengths and deltas */
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
            return NOT_HANDLED; /* bits beyond the 64th, or an 11th byte */
        z |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
    }
    *pos = p;
    /* zig-zag, written without signed overflow */
    *out = (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
    return OK;
}

/*
 * Read a length-prefixed nullable byte field ending before `end` into *out
 * (a new reference: bytes, or None for length -1).
 */
static inline int
read_bytes(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, PyObject **out)
{
    int64_t length;
    if (read_varint(buf, pos, end, &length) != OK)
        return NOT_HANDLED;
    if (length == -1) {
        Py_INCREF(Py_None);
        *out = Py_None;
        return OK;
    }
    if (length < 0 || length > end - *pos)
        return NOT_HANDLED;
    *out = PyBytes_FromStringAndSize((const char *)buf + *pos, (Py_ssize_t)length);
    if (*out == NULL)
        return -1;
    *pos += (Py_ssize_t)length;
    return OK;
}

/* Untrack a tuple whose items can never form a cycle (see the top comment). */
static PyObject *
untracked(PyObject *tuple)
{
    PyObject_GC_UnTrack(tuple);
    return tuple;
}

/*
 * Read the headers at *pos, ending at `end`, into *out (a new reference to
 * a tuple of (str, bytes | None) pairs). Returns OK, NOT_HANDLED or -1.
 */
static int
read_headers(const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end, PyObject **out)
{
    int64_t count;
    if (read_varint(buf, pos, end, &count) != OK)
        return NOT_HANDLED;
    if (count < 0 || count > end - *pos) /* each header takes at least two bytes */
        return NOT_HANDLED;
    PyObject *headers = PyTuple_New((Py_ssize_t)count);
    if (headers == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)count; i++) {
        int64_t key_length;
        int status = NOT_HANDLED;
        if (read_varint(buf, pos, end, &key_length) != OK || key_length < 0
            || key_length > end - *pos)
            goto fail;
        PyObject *name = PyUnicode_DecodeUTF8((const char *)buf + *pos,
                                              (Py_ssize_t)key_length, NULL);
        if (name == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                status = -1;
                goto fail;
            }
            PyErr_Clear(); /* Python raises InvalidStringError for it */
            goto fail;
        }
        *pos += (Py_ssize_t)key_length;
        PyObject *value;
        status = read_bytes(buf, pos, end, &value);
        if (status != OK) {
            Py_DECREF(name);
            goto fail;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(name);
            Py_DECREF(value);
            status = -1;
            goto fail;
        }
        PyTuple_SET_ITEM(pair, 0, name);
        PyTuple_SET_ITEM(pair, 1, value);
        PyTuple_SET_ITEM(headers, i, untracked(pair));
        continue;
    fail:
        Py_DECREF(headers); /* unset items are NULL, which tuple dealloc skips */
        return status;
    }
    *out = count ? untracked(headers) : headers;
    return OK;
}

/*
 * Whether instances of record_type (a tuple subclass) are laid out exactly as
 * tuples: no instance dict or weakref slot, no custom allocator. Named tuples
 * are (their __slots__ is empty).
 */
static int
has_tuple_layout(PyTypeObject *record_type)
{
    if (record_type->tp_basicsize != PyTuple_Type.tp_basicsize
        || record_type->tp_itemsize != PyTuple_Type.tp_itemsize
        || record_type->tp_alloc != PyType_GenericAlloc
        || record_type->tp_dictoffset != 0 || record_type->tp_weaklistoffset != 0)
        return 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
    if (PyType_HasFeature(record_type, Py_TPFLAGS_MANAGED_DICT))
        return 0;
#endif
#ifdef Py_TPFLAGS_MANAGED_WEAKREF
    if (PyType_HasFeature(record_type, Py_TPFLAGS_MANAGED_WEAKREF))
        return 0;
#endif
    return 1;
}

/*
 * A new, untracked record_type instance of `size` items, all still to be set
 * by the caller before anything else runs. With a plain tuple layout it is
 * allocated directly: tp_alloc would zero the items and track the object,
 * only for us to untrack it (see the top comment), which costs about a
 * tenth of the parse.
 */
static PyObject *
new_record(PyTypeObject *record_type, int plain_layout, Py_ssize_t size)
{
    if (plain_layout)
        return (PyObject *)PyObject_GC_NewVar(PyTupleObject, record_type, size);
    PyObject *record = record_type->tp_alloc(record_type, size);
    return record == NULL ? NULL : untracked(record);
}

/* What every record of one records section shares. */
typedef struct {
    PyTypeObject *record_type;
    int plain_layout;       /* has_tuple_layout(record_type) */
    int64_t base_offset;
    int64_t base_ts;
    PyObject *fixed_ts;     /* the LogAppendTime, or None */
    PyObject *empty;        /* (), the headers of most records */
    PyObject *last_ts;      /* the previous record's timestamp int, or NULL */
    int64_t last_ts_value;
    PyObject *prefix;       /* items before the record's five: a tuple, maybe empty */
    PyObject *suffix;       /* items after them: a tuple, maybe empty */
} Section;

/*
 * Parse one record of `length` bytes at buf[pos:end] into a new Record.
 * Returns OK, NOT_HANDLED or -1 (an exception is set).
 */
static int
read_record(const unsigned char *buf, Py_ssize_t pos, Py_ssize_t end, Section *section,
            PyObject **out)
{
    int64_t ts_delta, offset_delta, offset, ts = 0;
    PyObject *key = NULL, *value = NULL, *headers = NULL, *offset_obj = NULL;
    PyObject *ts_obj;
    int status;

    pos++; /* the attributes byte, unused by Kafka */
    if (read_varint(buf, &pos, end, &ts_delta) != OK
        || read_varint(buf, &pos, end, &offset_delta) != OK)
        return NOT_HANDLED;
    if (__builtin_add_overflow(section->base_offset, offset_delta, &offset))
        return NOT_HANDLED; /* Python would make a big int */
    if (section->fixed_ts == Py_None
        && __builtin_add_overflow(section->base_ts, ts_delta, &ts))
        return NOT_HANDLED;
    status = read_bytes(buf, &pos, end, &key);
    if (status != OK)
        return status;
    status = read_bytes(buf, &pos, end, &value);
    if (status != OK)
        goto fail;
    if (pos < end && buf[pos] == 0) { /* no headers, the usual case */
        pos++;
        headers = Py_NewRef(section->empty);
    }
    else {
        status = read_headers(buf, &pos, end, &headers);
        if (status != OK)
            goto fail;
    }
    if (pos != end) {
        status = NOT_HANDLED;
        goto fail;
    }
    offset_obj = PyLong_FromLongLong(offset);
    if (offset_obj == NULL) {
        status = -1;
        goto fail;
    }
    if (section->fixed_ts != Py_None) {
        ts_obj = section->fixed_ts;
    }
    else {
        /* records share timestamps in runs: reuse the previous record's int */
        if (section->last_ts == NULL || section->last_ts_value != ts) {
            PyObject *made = PyLong_FromLongLong(ts);
            if (made == NULL) {
                status = -1;
                goto fail;
            }
            Py_XSETREF(section->last_ts, made);
            section->last_ts_value = ts;
        }
        ts_obj = section->last_ts;
    }
    Py_ssize_t before = PyTuple_GET_SIZE(section->prefix);
    Py_ssize_t after = PyTuple_GET_SIZE(section->suffix);
    PyObject *record = new_record(section->record_type, section->plain_layout,
                                  before + 5 + after);
    if (record == NULL) {
        status = -1;
        goto fail;
    }
    for (Py_ssize_t i = 0; i < before; i++)
        PyTuple_SET_ITEM(record, i, Py_NewRef(PyTuple_GET_ITEM(section->prefix, i)));
    Py_INCREF(ts_obj);
    PyTuple_SET_ITEM(record, before, offset_obj);
    PyTuple_SET_ITEM(record, before + 1, ts_obj);
    PyTuple_SET_ITEM(record, before + 2, key);
    PyTuple_SET_ITEM(record, before + 3, value);
    PyTuple_SET_ITEM(record, before + 4, headers);
    for (Py_ssize_t i = 0; i < after; i++)
        PyTuple_SET_ITEM(record, before + 5 + i,
                         Py_NewRef(PyTuple_GET_ITEM(section->suffix, i)));
    *out = record;
    return OK;

fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(offset_obj);
    return status;
}

/*
 * Parse the records section buf[0:n] into `records`, a new list of as many
 * items as the section declares records, each set here. Returns OK,
 * NOT_HANDLED (items may be left unset: NULL, which list dealloc skips) or -1.
 */
static int
read_section(const unsigned char *buf, Py_ssize_t n, Section *section, PyObject *records)
{
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(records); i++) {
        int64_t length;
        if (read_varint(buf, &pos, n, &length) != OK || length < 0 || length > n - pos)
            return NOT_HANDLED;
        PyObject *record = NULL;
        int status = read_record(buf, pos, pos + (Py_ssize_t)length, section, &record);
        if (status != OK)
            return status;
        PyList_SET_ITEM(records, i, record);
        pos += (Py_ssize_t)length;
    }
    return pos == n ? OK : NOT_HANDLED;
}

/* Whether every item of `items` (a tuple) is str, int or None: what records may hold. */
static int
atomic_items(PyObject *items)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        PyObject *item = PyTuple_GET_ITEM(items, i);
        if (item != Py_None && !PyLong_CheckExact(item) && !PyUnicode_CheckExact(item)) {
            PyErr_SetString(PyExc_TypeError, "prefix and suffix items must be str, int or None");
            return 0;
        }
    }
    return 1;
}

static int
check_record_type(PyObject *record_type)
{
    if (PyType_Check(record_type)
        && PyType_IsSubtype((PyTypeObject *)record_type, &PyTuple_Type))
        return 1;
    PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass");
    return 0;
}

static PyObject *
parse_records(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long base_offset, base_ts;
    PyObject *fixed_ts, *record_type, *prefix = NULL, *suffix = NULL;
    PyObject *records = NULL;
    Section section = {.last_ts = NULL, .empty = NULL};

    if (!PyArg_ParseTuple(args, "y*nLLOO|O!O!:parse_records", &view, &count, &base_offset,
                          &base_ts, &fixed_ts, &record_type, &PyTuple_Type, &prefix,
                          &PyTuple_Type, &suffix))
        return NULL;
    if (!check_record_type(record_type))
        goto error;
    /* The records are untracked (see the top comment), so what they hold must never
       be part of a cycle: the prefix and suffix may hold str, int and None only. */
    if ((prefix != NULL && !atomic_items(prefix)) || (suffix != NULL && !atomic_items(suffix)))
        goto error;
    if (fixed_ts != Py_None && !PyLong_Check(fixed_ts)) {
        PyErr_SetString(PyExc_TypeError, "fixed_timestamp must be an int or None");
        goto error;
    }
    const unsigned char *buf = view.buf;
    Py_ssize_t n = view.len;
    /* every record takes at least one byte: more records than bytes is bad data */
    if (count < 0 || count > n)
        goto not_handled;
    section.empty = PyTuple_New(0);
    if (section.empty == NULL)
        goto error;
    section.prefix = prefix != NULL ? prefix : section.empty;
    section.suffix = suffix != NULL ? suffix : section.empty;
    section.record_type = (PyTypeObject *)record_type;
    section.plain_layout = has_tuple_layout(section.record_type);
    section.base_offset = base_offset;
    section.base_ts = base_ts;
    section.fixed_ts = fixed_ts;
    section.last_ts_value = 0;
    records = PyList_New(count);
    if (records == NULL)
        goto error;
    /* The list is ours until returned and never mutated after: with only
       untracked records in it, it cannot be in a cycle either, and the
       collections our allocations trigger need not walk it. */
    PyObject_GC_UnTrack(records);
    int status = read_section(buf, n, &section, records);
    if (status < 0)
        goto error;
    if (status == NOT_HANDLED)
        goto not_handled;
    Py_XDECREF(section.last_ts);
    Py_DECREF(section.empty);
    PyBuffer_Release(&view);
    return records;

not_handled:
    Py_XDECREF(records); /* unset items are NULL, which list dealloc skips */
    Py_XDECREF(section.last_ts);
    Py_XDECREF(section.empty);
    PyBuffer_Release(&view);
    Py_RETURN_NONE;

error:
    Py_XDECREF(records);
    Py_XDECREF(section.last_ts);
    Py_XDECREF(section.empty);
    PyBuffer_Release(&view);
    return NULL;
}

/*
 * Walking a fetch's batches (the consumer's take_records and fetch_end_offset).
 *
 * The layout of a magic 2 batch's header, big-endian: base offset (int64) at 0,
 * batch length (int32) at 8, partition leader epoch (int32) at 12, magic (int8)
 * at 16, CRC-32C (uint32) at 17 over everything from the attributes (int16) at
 * 21 on, last offset delta (int32) at 23, base timestamp (int64) at 27, max
 * timestamp (int64) at 35, then the producer's fields, and the record count
 * (int32) at 57; the records follow at 61.
 */
#define LOG_OVERHEAD 12
#define RECORD_BATCH_OVERHEAD 61
#define COMPRESSION_MASK 0x07
#define TIMESTAMP_TYPE_MASK 0x08
#define TRANSACTIONAL_MASK 0x10
#define CONTROL_MASK 0x20
#define NO_PARTITION_LEADER_EPOCH (-1)

static inline uint64_t
read_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline uint32_t
read_u32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Whether the batch at h (of `size` bytes) has the CRC its header says; -1 on error. */
static int
crc_matches(PyObject *crc32c, const unsigned char *h, Py_ssize_t size)
{
    PyObject *view = PyMemoryView_FromMemory((char *)h + 21, size - 21, PyBUF_READ);
    if (view == NULL)
        return -1;
    PyObject *actual = PyObject_CallOneArg(crc32c, view);
    Py_DECREF(view);
    if (actual == NULL)
        return -1;
    unsigned long value = PyLong_AsUnsignedLong(actual);
    Py_DECREF(actual);
    if (value == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return value == read_u32(h + 17);
}

/*
 * take_records(data, cursor, position, limit, record_type, prefix, timestamp_types,
 *              crc32c, transactional_below, skip_control) -> (records, cursor, position)
 *
 * What CompletedFetch.take does batch by batch, for the batches it handles
 * without Python: from byte `cursor` of a fetch's records, whole uncompressed
 * magic 2 batches at or past `position` whose records fit `limit`, each record
 * made as record_type(*prefix, offset, timestamp, key, value, headers,
 * timestamp_type, leader_epoch). Batches below the position are passed over;
 * with `skip_control`, control batches are passed over and move the position
 * past them (read_committed reads their markers: Python's business).
 * Transactional batches are handled only while their last offset is below
 * `transactional_below` (the caller's read_committed filter has nothing to
 * say about them there). Each batch's CRC is checked first unless crc32c is
 * None.
 *
 * The walk stops, with cursor and position at the batch, at the first batch it
 * leaves to Python: too short or cut off, another magic, compressed, partly
 * consumed, more records than the limit left, a transactional batch at or
 * past transactional_below, a control batch without skip_control, a CRC that
 * does not match, records not well
 * formed. Python then reads that batch and raises the exact error if there is
 * one. Returns the records made (a list), the cursor and the position.
 */
static PyObject *
take_records(PyObject *Py_UNUSED(module), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t cursor, limit;
    long long position, transactional_below;
    int skip_control;
    PyObject *record_type, *prefix, *types, *crc32c;
    PyObject *taken = NULL, *suffix = NULL, *result = NULL;
    Section section = {.last_ts = NULL, .empty = NULL};

    if (!PyArg_ParseTuple(args, "y*nLnOO!O!OLp:take_records", &view, &cursor, &position,
                          &limit, &record_type, &PyTuple_Type, &prefix, &PyTuple_Type, &types,
                          &crc32c, &transactional_below, &skip_control))
        return NULL;
    if (!check_record_type(record_type) || !atomic_items(prefix))
        goto done;
    if (PyTuple_GET_SIZE(types) != 2 || !atomic_items(types)) {
        PyErr_SetString(PyExc_TypeError, "timestamp_types must be two ints");
        goto done;
    }
    if (crc32c != Py_None && !PyCallable_Check(crc32c)) {
        PyErr_SetString(PyExc_TypeError, "crc32c must be callable or None");
        goto done;
    }
    if (cursor < 0 || cursor > view.len) {
        PyErr_SetString(PyExc_ValueError, "cursor out of the data");
        goto done;
    }
    taken = PyList_New(0);
    section.empty = PyTuple_New(0);
    if (taken == NULL || section.empty == NULL)
        goto done;
    PyObject_GC_UnTrack(taken); /* untracked records only: see the top comment */
    section.record_type = (PyTypeObject *)record_type;
    section.plain_layout = has_tuple_layout(section.record_type);
    section.prefix = prefix;
    int last_log_append = -1;
    int64_t last_epoch = 0;

    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len;
    while (limit > 0 && end - cursor >= RECORD_BATCH_OVERHEAD) {
        const unsigned char *h = buf + cursor;
        int32_t length = (int32_t)read_u32(h + 8);
        if (length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD || length > end - cursor - LOG_OVERHEAD
            || h[16] != 2)
            break;
        Py_ssize_t size = LOG_OVERHEAD + (Py_ssize_t)length;
        int64_t base_offset = (int64_t)read_u64(h);
        int32_t count = (int32_t)read_u32(h + 57);
        int64_t next_offset;
        if (count < 0
            || __builtin_add_overflow(base_offset, (int64_t)(int32_t)read_u32(h + 23) + 1,
                                      &next_offset))
            break;
        /* A batch left to Python is not checked here: Python checks its CRC. */
        int attributes = (h[21] << 8) | h[22];
        int consumed = next_offset <= position;
        if (!consumed
            && ((attributes & CONTROL_MASK && !skip_control)
                || (attributes & TRANSACTIONAL_MASK && next_offset - 1 >= transactional_below)
                || attributes & COMPRESSION_MASK || base_offset < position || count > limit))
            break;
        if (crc32c != Py_None) {
            int matches = crc_matches(crc32c, h, size);
            if (matches < 0)
                goto done;
            if (!matches)
                break;
        }
        if (consumed || attributes & CONTROL_MASK) { /* passed over */
            if (!consumed)
                position = next_offset;
            cursor += size;
            continue;
        }

        int log_append = (attributes & TIMESTAMP_TYPE_MASK) != 0;
        int64_t epoch = (int32_t)read_u32(h + 12);
        if (suffix == NULL || log_append != last_log_append || epoch != last_epoch) {
            PyObject *made = PyTuple_New(2);
            PyObject *epoch_obj = epoch == NO_PARTITION_LEADER_EPOCH
                                      ? Py_NewRef(Py_None)
                                      : PyLong_FromLongLong(epoch);
            if (made == NULL || epoch_obj == NULL) {
                Py_XDECREF(made);
                Py_XDECREF(epoch_obj);
                goto done;
            }
            PyTuple_SET_ITEM(made, 0, Py_NewRef(PyTuple_GET_ITEM(types, log_append)));
            PyTuple_SET_ITEM(made, 1, epoch_obj);
            Py_XSETREF(suffix, made);
            last_log_append = log_append;
            last_epoch = epoch;
        }
        section.suffix = suffix;
        section.base_offset = base_offset;
        section.base_ts = (int64_t)read_u64(h + 27);
        section.fixed_ts = log_append ? PyLong_FromLongLong((int64_t)read_u64(h + 35))
                                      : Py_NewRef(Py_None);
        PyObject *records = section.fixed_ts == NULL ? NULL : PyList_New(count);
        if (records == NULL) {
            Py_CLEAR(section.fixed_ts);
            goto done;
        }
        int status = read_section(h + RECORD_BATCH_OVERHEAD, size - RECORD_BATCH_OVERHEAD,
                                  &section, records);
        Py_CLEAR(section.fixed_ts);
        if (status == OK)
            status = PyList_SetSlice(taken, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, records);
        Py_DECREF(records);
        if (status < 0)
            goto done;
        if (status == NOT_HANDLED)
            break;
        limit -= count;
        position = next_offset;
        cursor += size;
    }
    result = Py_BuildValue("(OnL)", taken, cursor, position);

done:
    Py_XDECREF(taken);
    Py_XDECREF(suffix);
    Py_XDECREF(section.last_ts);
    Py_XDECREF(section.empty);
    PyBuffer_Release(&view);
    return result;
}

/*
 * fetch_end_offset(data) -> int | None
 *
 * The offset after the last complete entry of a fetch's records, reading the
 * log overhead only (fetch_buffer.end_offset's walk): a magic 2 batch ends at
 * its base offset plus its last offset delta plus one, a legacy entry at its
 * offset plus one. The walk ends at a partial entry or a negative length;
 * a magic 2 batch too short to hold its last offset delta ends it too.
 */
static PyObject *
fetch_end_offset(PyObject *Py_UNUSED(module), PyObject *data)
{
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const unsigned char *buf = view.buf;
    Py_ssize_t end = view.len, pos = 0;
    int found = 0;
    int64_t last_base = 0, last_add = 0; /* the end is last_base + last_add */
    while (end - pos >= LOG_OVERHEAD) {
        int32_t length = (int32_t)read_u32(buf + pos + 8);
        if (length < 0 || length > end - pos - LOG_OVERHEAD)
            break;
        Py_ssize_t size = LOG_OVERHEAD + (Py_ssize_t)length;
        if (size > 16 && buf[pos + 16] == 2) {
            if (size < 27)
                break;
            last_add = (int64_t)(int32_t)read_u32(buf + pos + 23) + 1;
        }
        else {
            last_add = 1;
        }
        last_base = (int64_t)read_u64(buf + pos);
        found = 1;
        pos += size;
    }
    PyBuffer_Release(&view);
    if (!found)
        Py_RETURN_NONE;
    int64_t sum;
    if (!__builtin_add_overflow(last_base, last_add, &sum))
        return PyLong_FromLongLong(sum);
    PyObject *base = PyLong_FromLongLong(last_base), *add = PyLong_FromLongLong(last_add);
    PyObject *total = base != NULL && add != NULL ? PyNumber_Add(base, add) : NULL;
    Py_XDECREF(base);
    Py_XDECREF(add);
    return total;
}

/* Write the zig-zag varint of v at out; return the number of bytes (1 to 10). */
static Py_ssize_t
write_varint(unsigned char *out, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0);
    Py_ssize_t n = 0;
    while (z >= 0x80) {
        out[n++] = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    out[n++] = (unsigned char)z;
    return n;
}

/* Bytes of a key or value argument: bytes -> OK with data and length set, None -> length -1. */
static int
field_bytes(PyObject *field, const char **data, int64_t *length)
{
    if (field == Py_None) {
        *data = NULL;
        *length = -1;
        return OK;
    }
    if (!PyBytes_CheckExact(field))
        return NOT_HANDLED; /* other buffers: the Python encoder's business */
    *data = PyBytes_AS_STRING(field);
    *length = PyBytes_GET_SIZE(field);
    return OK;
}

static PyObject *
encode_record(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    /* fast call: the producer's C append calls this once per record */
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "encode_record() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *ts_obj = args[0], *od_obj = args[1], *key = args[2], *value = args[3];
    int overflow_ts = 0, overflow_od = 0;
    long long ts_delta = PyLong_AsLongLongAndOverflow(ts_obj, &overflow_ts);
    if (ts_delta == -1 && PyErr_Occurred())
        return NULL;
    long long offset_delta = PyLong_AsLongLongAndOverflow(od_obj, &overflow_od);
    if (offset_delta == -1 && PyErr_Occurred())
        return NULL;
    const char *key_data, *value_data;
    int64_t key_length, value_length;
    if (overflow_ts || overflow_od || field_bytes(key, &key_data, &key_length) != OK
        || field_bytes(value, &value_data, &value_length) != OK)
        Py_RETURN_NONE; /* the Python encoder raises or copes */

    /* the body: attributes, deltas, key, value, no headers */
    unsigned char head[1 + 4 * 10], *p = head;
    *p++ = 0;
    p += write_varint(p, ts_delta);
    p += write_varint(p, offset_delta);
    p += write_varint(p, key_length);
    Py_ssize_t key_size = key_length < 0 ? 0 : (Py_ssize_t)key_length;
    Py_ssize_t value_size = value_length < 0 ? 0 : (Py_ssize_t)value_length;
    unsigned char value_varint[10];
    Py_ssize_t value_varint_size = write_varint(value_varint, value_length);
    Py_ssize_t head_size = p - head;
    if (key_size > PY_SSIZE_T_MAX / 2 - value_size - 64) {
        PyErr_SetString(PyExc_OverflowError, "record too large");
        return NULL;
    }
    Py_ssize_t body_size = head_size + key_size + value_varint_size + value_size + 1;
    unsigned char length_varint[10];
    Py_ssize_t length_size = write_varint(length_varint, body_size);

    PyObject *out = PyBytes_FromStringAndSize(NULL, length_size + body_size);
    if (out == NULL)
        return NULL;
    char *o = PyBytes_AS_STRING(out);
    memcpy(o, length_varint, length_size);
    o += length_size;
    memcpy(o, head, head_size);
    o += head_size;
    if (key_size) {
        memcpy(o, key_data, key_size);
        o += key_size;
    }
    memcpy(o, value_varint, value_varint_size);
    o += value_varint_size;
    if (value_size) {
        memcpy(o, value_data, value_size);
        o += value_size;
    }
    *o = 0; /* header count */
    return out;
}

static PyMethodDef speedups_methods[] = {
    {"encode_record", (PyCFunction)(void (*)(void))encode_record, METH_FASTCALL,
     "encode_record(timestamp_delta, offset_delta, key, value)\n"
     "--\n\n"
     "The bytes of a record without headers (length prefix included), or None\n"
     "when a delta does not fit 64 bits or the key or value is not bytes or None."},
    {"take_records", take_records, METH_VARARGS,
     "take_records(data, cursor, position, limit, record_type, prefix, timestamp_types,\n"
     "             crc32c, transactional_below, skip_control)\n"
     "--\n\n"
     "The consumer's records from byte cursor of a fetch's records on, batch by batch,\n"
     "until a batch Python must read: (records, cursor, position)."},
    {"fetch_end_offset", fetch_end_offset, METH_O,
     "fetch_end_offset(data)\n"
     "--\n\n"
     "The offset after the last complete entry of a fetch's records, or None."},
    {"parse_records", parse_records, METH_VARARGS,
     "parse_records(data, count, base_offset, base_timestamp, fixed_timestamp, record_type,\n"
     "              prefix=(), suffix=())\n"
     "--\n\n"
     "The records of a magic 2 records section as a list of record_type, each\n"
     "(*prefix, offset, timestamp, key, value, headers, *suffix), or None when the\n"
     "data is not well formed (the pure-Python parser then raises). The items of\n"
     "prefix and suffix must be str, int or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kafkette.protocol.records._speedups",
    .m_doc = "C accelerator for record batch decoding (optional).",
    .m_size = 0,
    .m_methods = speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
