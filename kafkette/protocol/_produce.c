/*
 * Optional C accelerator for Produce. The broker's side: decoding a
 * ProduceRequest frame (header and body, versions 3 to 11) and encoding a
 * ProduceResponse body (versions 3 to 11). The client's side: encoding a
 * ProduceRequest body and decoding a ProduceResponse body (the same versions).
 *
 * It only ever takes the common, well-formed case. Whatever it does not take
 * (another version, a byte out of place, a truncated or oversized field,
 * invalid UTF-8, tagged fields, record errors, a current leader or node
 * endpoints, a value of an unexpected type or range) it leaves to the
 * generated Python codec, which then decodes or encodes it or raises its
 * exact error: the two paths cannot disagree.
 *
 * decode_produce_request(frame) -> (RequestHeader, ProduceRequest) | None
 *     The objects are made as the generated decoders make them: object.__new__
 *     of the bound classes, fields set by name; records are memoryview slices
 *     of memoryview(frame).
 *
 * encode_produce_response(version, fallback, out, response) -> None
 *     Appends the body to the bytearray `out` (all of it at once, nothing when
 *     it declines); declining, it returns fallback(out, response).
 *
 * encode_produce_request(version, fallback, out, request) -> None
 *     The client's mirror of encode_produce_response (records: any contiguous
 *     buffer or None).
 *
 * encode_produce_request_parts(version, correlation_id, client_id, request)
 *         -> list | None
 *     The whole frame in pieces, to be written one after another (one writev):
 *     a bytearray with the size, the request header (`client_id` is the
 *     header's encoded client id: int16 length and UTF-8, or -1) and the body up
 *     to the first large record set; each record set of BY_REFERENCE_MIN bytes
 *     or more (a bytes or bytearray) is a piece of its own, the object itself,
 *     not copied; bytes objects hold what lies between. None when declined.
 *
 * decode_produce_response(version, fallback, buf, pos) -> (ProduceResponse, end)
 *     The body at `pos`, as the generated decoder makes it; declining, it
 *     returns fallback(buf, pos).
 *
 * bind(request_header, produce_request, topic_data, partition_data,
 *      leader_id_and_epoch) and bind_client(produce_response, topic_response,
 *      partition_response) name the classes.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MIN_VERSION 3
#define MAX_VERSION 11
#define FIRST_FLEXIBLE 9

static PyObject *RequestHeaderType, *ProduceRequestType, *TopicDataType, *PartitionDataType;
static PyObject *LeaderIdAndEpochType;
static PyObject *ProduceResponseType, *TopicResponseType, *PartitionResponseType;
static PyObject *s_request_api_key, *s_request_api_version, *s_correlation_id, *s_client_id;
static PyObject *s_transactional_id, *s_acks, *s_timeout_ms, *s_topic_data;
static PyObject *s_name, *s_partition_data, *s_index, *s_records;
static PyObject *s_responses, *s_throttle_time_ms, *s_node_endpoints, *s_partition_responses;
static PyObject *s_error_code, *s_base_offset, *s_log_append_time_ms, *s_log_start_offset;
static PyObject *s_record_errors, *s_error_message, *s_current_leader, *s_leader_id;
static PyObject *s_leader_epoch;

/* ------------------------------------------------------------------------ */
/* decoding                                                                 */

typedef struct {
    const unsigned char *buf;
    Py_ssize_t pos, end;
} Reader;

/* Each reader returns 0 when the bytes are not what the fast path takes. */

static inline int
read_i16(Reader *r, int *out)
{
    if (r->end - r->pos < 2)
        return 0;
    const unsigned char *p = r->buf + r->pos;
    *out = (int16_t)(uint16_t)((p[0] << 8) | p[1]);
    r->pos += 2;
    return 1;
}

static inline int
read_i32(Reader *r, long *out)
{
    if (r->end - r->pos < 4)
        return 0;
    const unsigned char *p = r->buf + r->pos;
    *out = (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) |
                     (uint32_t)p[3]);
    r->pos += 4;
    return 1;
}

static inline int
read_i64(Reader *r, long long *out)
{
    if (r->end - r->pos < 8)
        return 0;
    const unsigned char *p = r->buf + r->pos;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    *out = (long long)(int64_t)v;
    r->pos += 8;
    return 1;
}

/* An unsigned varint of at most 31 bits. */
static inline int
read_uv(Reader *r, Py_ssize_t *out)
{
    uint64_t value = 0;
    for (int i = 0; i < 5; i++) {
        if (r->pos >= r->end)
            return 0;
        unsigned char b = r->buf[r->pos++];
        value |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            if (value > INT32_MAX)
                return 0;
            *out = (Py_ssize_t)value;
            return 1;
        }
    }
    return 0;
}

/* No tagged fields: a zero count. */
static inline int
read_no_tags(Reader *r)
{
    if (r->pos >= r->end || r->buf[r->pos] != 0)
        return 0;
    r->pos++;
    return 1;
}

/* A string of `len` bytes at the reader's position (NULL: declined, maybe with an
   exception set that the caller clears). */
static PyObject *
take_str(Reader *r, Py_ssize_t len)
{
    if (len < 0 || r->end - r->pos < len)
        return NULL;
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->buf + r->pos, len, NULL);
    r->pos += len;
    return s;
}

/* A nullable string; *out is a new reference (Py_None for null). */
static int
read_nullable_str(Reader *r, int flexible, PyObject **out)
{
    Py_ssize_t len;
    if (flexible) {
        if (!read_uv(r, &len))
            return 0;
        len -= 1;
    }
    else {
        int n;
        if (!read_i16(r, &n))
            return 0;
        len = n;
    }
    if (len == -1) {
        *out = Py_NewRef(Py_None);
        return 1;
    }
    *out = take_str(r, len);
    return *out != NULL;
}

static int
read_str(Reader *r, int flexible, PyObject **out)
{
    if (!read_nullable_str(r, flexible, out))
        return 0;
    if (*out == Py_None) {
        Py_DECREF(*out);
        return 0;
    }
    return 1;
}

/* An array count, at most what `min_size`-byte elements could fill. */
static int
read_count(Reader *r, int flexible, Py_ssize_t min_size, Py_ssize_t *out)
{
    Py_ssize_t n;
    if (flexible) {
        if (!read_uv(r, &n) || n == 0)
            return 0;
        n -= 1;
    }
    else {
        long v;
        if (!read_i32(r, &v) || v < 0)
            return 0;
        n = v;
    }
    if (n * min_size > r->end - r->pos)
        return 0;
    *out = n;
    return 1;
}

static PyObject *
new_object(PyObject *type)
{
    PyTypeObject *t = (PyTypeObject *)type;
    return t->tp_alloc(t, 0);
}

/* Set attributes on a new instance of `type`; NULL (declined or error) when one fails. */
static PyObject *
make(PyObject *type, int count, PyObject **names, PyObject **values)
{
    PyObject *o = new_object(type);
    if (o == NULL)
        return NULL;
    for (int i = 0; i < count; i++) {
        if (PyObject_SetAttr(o, names[i], values[i]) < 0) {
            Py_DECREF(o);
            return NULL;
        }
    }
    return o;
}

static PyObject *
decode_partition(Reader *r, int version, PyObject *view)
{
    int flexible = version >= FIRST_FLEXIBLE;
    long index;
    if (!read_i32(r, &index))
        return NULL;
    Py_ssize_t len;
    if (flexible) {
        if (!read_uv(r, &len))
            return NULL;
        len -= 1;
    }
    else {
        long v;
        if (!read_i32(r, &v))
            return NULL;
        len = v;
    }
    PyObject *records;
    if (len == -1)
        records = Py_NewRef(Py_None);
    else if (len < 0 || r->end - r->pos < len)
        return NULL;
    else {
        records = PySequence_GetSlice(view, r->pos, r->pos + len);
        if (records == NULL)
            return NULL;
        r->pos += len;
    }
    if (flexible && !read_no_tags(r)) {
        Py_DECREF(records);
        return NULL;
    }
    PyObject *index_obj = PyLong_FromLong(index);
    if (index_obj == NULL) {
        Py_DECREF(records);
        return NULL;
    }
    PyObject *names[2] = {s_index, s_records};
    PyObject *values[2] = {index_obj, records};
    PyObject *o = make(PartitionDataType, 2, names, values);
    Py_DECREF(index_obj);
    Py_DECREF(records);
    return o;
}

typedef PyObject *(*ElementDecoder)(Reader *r, int version, PyObject *view);

/* A topic of a request or response: its name, then an array of what `element`
   decodes (at least `min_size` bytes each), made into a `type` with `field`. */
static PyObject *
decode_topic(Reader *r, int version, PyObject *view, Py_ssize_t min_size,
             ElementDecoder element, PyObject *type, PyObject *field)
{
    int flexible = version >= FIRST_FLEXIBLE;
    PyObject *name = NULL, *partitions = NULL, *o = NULL;
    Py_ssize_t count;
    if (!read_str(r, flexible, &name))
        return NULL;
    if (!read_count(r, flexible, min_size, &count))
        goto done;
    partitions = PyList_New(count);
    if (partitions == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *p = element(r, version, view);
        if (p == NULL)
            goto done;
        PyList_SET_ITEM(partitions, i, p);
    }
    if (flexible && !read_no_tags(r))
        goto done;
    PyObject *names[2] = {s_name, field};
    PyObject *values[2] = {name, partitions};
    o = make(type, 2, names, values);
done:
    Py_XDECREF(name);
    Py_XDECREF(partitions);
    return o;
}

static PyObject *
decode_body(Reader *r, int version, PyObject *view)
{
    int flexible = version >= FIRST_FLEXIBLE;
    PyObject *txn = NULL, *topics = NULL, *acks_obj = NULL, *timeout_obj = NULL, *o = NULL;
    int acks;
    long timeout;
    Py_ssize_t count;
    if (!read_nullable_str(r, flexible, &txn))
        return NULL;
    if (!read_i16(r, &acks) || !read_i32(r, &timeout))
        goto done;
    /* name (1 or 2 bytes) + partition count (1 or 4) (+ tags) */
    if (!read_count(r, flexible, flexible ? 3 : 6, &count))
        goto done;
    topics = PyList_New(count);
    if (topics == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* a partition: index int32 + records length (1 byte compact, 4 otherwise) (+ tags) */
        PyObject *t = decode_topic(r, version, view, flexible ? 6 : 8, decode_partition,
                                   TopicDataType, s_partition_data);
        if (t == NULL)
            goto done;
        PyList_SET_ITEM(topics, i, t);
    }
    if (flexible && !read_no_tags(r))
        goto done;
    acks_obj = PyLong_FromLong(acks);
    timeout_obj = PyLong_FromLong(timeout);
    if (acks_obj == NULL || timeout_obj == NULL)
        goto done;
    PyObject *names[4] = {s_transactional_id, s_acks, s_timeout_ms, s_topic_data};
    PyObject *values[4] = {txn, acks_obj, timeout_obj, topics};
    o = make(ProduceRequestType, 4, names, values);
done:
    Py_XDECREF(txn);
    Py_XDECREF(topics);
    Py_XDECREF(acks_obj);
    Py_XDECREF(timeout_obj);
    return o;
}

static PyObject *
decode_produce_request(PyObject *self, PyObject *frame)
{
    if (RequestHeaderType == NULL)
        Py_RETURN_NONE;
    Py_buffer buffer;
    if (PyObject_GetBuffer(frame, &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *header = NULL, *body = NULL, *view = NULL;
    PyObject *key = NULL, *version_obj = NULL, *correlation = NULL, *client_id = NULL;
    Reader r = {buffer.buf, 0, buffer.len};
    int api_key, version;
    long correlation_id;
    if (!read_i16(&r, &api_key) || !read_i16(&r, &version) || !read_i32(&r, &correlation_id))
        goto done;
    if (api_key != 0 || version < MIN_VERSION || version > MAX_VERSION)
        goto done;
    int flexible = version >= FIRST_FLEXIBLE;
    /* the client id is an int16-length string in both header versions */
    if (!read_nullable_str(&r, 0, &client_id))
        goto done;
    if (flexible && !read_no_tags(&r))
        goto done;
    view = PyMemoryView_FromObject(frame);
    if (view == NULL)
        goto done;
    body = decode_body(&r, version, view);
    if (body == NULL)
        goto done;
    key = PyLong_FromLong(api_key);
    version_obj = PyLong_FromLong(version);
    correlation = PyLong_FromLong(correlation_id);
    if (key == NULL || version_obj == NULL || correlation == NULL)
        goto done;
    PyObject *names[4] = {s_request_api_key, s_request_api_version, s_correlation_id, s_client_id};
    PyObject *values[4] = {key, version_obj, correlation, client_id};
    header = make(RequestHeaderType, 4, names, values);
    if (header == NULL)
        goto done;
    result = PyTuple_Pack(2, header, body);
done:
    Py_XDECREF(header);
    Py_XDECREF(body);
    Py_XDECREF(view);
    Py_XDECREF(key);
    Py_XDECREF(version_obj);
    Py_XDECREF(correlation);
    Py_XDECREF(client_id);
    PyBuffer_Release(&buffer);
    if (result == NULL) {
        /* declined: the Python decoder decodes it or says what is wrong */
        if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_MemoryError))
            PyErr_Clear();
        if (!PyErr_Occurred())
            Py_RETURN_NONE;
    }
    return result;
}

/* ------------------------------------------------------------------------ */
/* encoding                                                                 */

typedef struct {
    unsigned char *buf;
    Py_ssize_t len, cap;
    /* By reference (encode_produce_request_parts): a list of (position in buf, records)
       for the record sets left out of buf, to be written after buf[:position]; NULL
       when every record set is copied into buf. */
    PyObject *cuts;
} Writer;

static int
reserve(Writer *w, Py_ssize_t n)
{
    if (w->len + n <= w->cap)
        return 1;
    Py_ssize_t cap = w->cap * 2;
    if (cap < w->len + n)
        cap = w->len + n + 64;
    unsigned char *buf = PyMem_Realloc(w->buf, (size_t)cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return 0;
    }
    w->buf = buf;
    w->cap = cap;
    return 1;
}

static inline int
put_be(Writer *w, uint64_t v, int size)
{
    if (!reserve(w, size))
        return 0;
    for (int i = size - 1; i >= 0; i--, v >>= 8)
        w->buf[w->len + i] = (unsigned char)v;
    w->len += size;
    return 1;
}

static int
put_uv(Writer *w, uint32_t v)
{
    if (!reserve(w, 5))
        return 0;
    while (v >= 0x80) {
        w->buf[w->len++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    w->buf[w->len++] = (unsigned char)v;
    return 1;
}

static int
put_bytes(Writer *w, const char *data, Py_ssize_t n)
{
    if (!reserve(w, n))
        return 0;
    memcpy(w->buf + w->len, data, (size_t)n);
    w->len += n;
    return 1;
}

/* Each encoder returns 1 when done, 0 to decline (maybe with an exception set,
   cleared by the caller unless it is MemoryError). */

static int
get_int(PyObject *o, PyObject *name, long long low, long long high, long long *out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL)
        return 0;
    if (!PyLong_CheckExact(v)) {
        Py_DECREF(v);
        return 0;
    }
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (overflow || (x == -1 && PyErr_Occurred()) || x < low || x > high)
        return 0;
    *out = x;
    return 1;
}

static int
put_str(Writer *w, PyObject *s, int flexible, int nullable)
{
    if (s == Py_None) {
        if (!nullable)
            return 0;
        return flexible ? put_uv(w, 0) : put_be(w, 0xFFFF, 2);
    }
    if (!PyUnicode_CheckExact(s))
        return 0;
    Py_ssize_t n;
    const char *data = PyUnicode_AsUTF8AndSize(s, &n);
    if (data == NULL)
        return 0;
    if (flexible) {
        if (n >= INT32_MAX || !put_uv(w, (uint32_t)(n + 1)))
            return 0;
    }
    else if (n > 0x7FFF || !put_be(w, (uint64_t)n, 2))
        return 0;
    return put_bytes(w, data, n);
}

/* A list attribute of `o`; a new reference or NULL. */
static PyObject *
get_list(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (v != NULL && !PyList_CheckExact(v))
        Py_CLEAR(v);
    return v;
}

static int
put_count(Writer *w, Py_ssize_t n, int flexible)
{
    if (n >= INT32_MAX)
        return 0;
    return flexible ? put_uv(w, (uint32_t)(n + 1)) : put_be(w, (uint64_t)n, 4);
}

/* Whether `leader` is a LeaderIdAndEpoch at its defaults (what the encoder omits). */
static int
default_leader(PyObject *leader)
{
    if ((PyObject *)Py_TYPE(leader) != LeaderIdAndEpochType)
        return 0;
    long long id, epoch;
    return get_int(leader, s_leader_id, -1, -1, &id) &&
           get_int(leader, s_leader_epoch, -1, -1, &epoch);
}

static int
put_partition(Writer *w, PyObject *p, int version)
{
    int flexible = version >= FIRST_FLEXIBLE;
    long long index, error_code, base_offset, append_time, log_start;
    if (!get_int(p, s_index, INT32_MIN, INT32_MAX, &index) ||
        !get_int(p, s_error_code, INT16_MIN, INT16_MAX, &error_code) ||
        !get_int(p, s_base_offset, INT64_MIN, INT64_MAX, &base_offset) ||
        !get_int(p, s_log_append_time_ms, INT64_MIN, INT64_MAX, &append_time) ||
        !get_int(p, s_log_start_offset, INT64_MIN, INT64_MAX, &log_start))
        return 0;
    if (!put_be(w, (uint64_t)index, 4) || !put_be(w, (uint64_t)error_code, 2) ||
        !put_be(w, (uint64_t)base_offset, 8) || !put_be(w, (uint64_t)append_time, 8))
        return 0;
    if (version >= 5 && !put_be(w, (uint64_t)log_start, 8))
        return 0;
    if (version >= 8) {
        PyObject *errors = get_list(p, s_record_errors);
        if (errors == NULL)
            return 0;
        Py_ssize_t n = PyList_GET_SIZE(errors);
        Py_DECREF(errors);
        if (n != 0 || !put_count(w, 0, flexible))
            return 0;
        PyObject *message = PyObject_GetAttr(p, s_error_message);
        if (message == NULL)
            return 0;
        int ok = put_str(w, message, flexible, 1);
        Py_DECREF(message);
        if (!ok)
            return 0;
    }
    /* a current leader is never written here (at versions without it, the
       generated encoder refuses one that is not the default) */
    PyObject *leader = PyObject_GetAttr(p, s_current_leader);
    if (leader == NULL)
        return 0;
    int ok = default_leader(leader);
    Py_DECREF(leader);
    if (!ok)
        return 0;
    return !flexible || put_uv(w, 0);
}

typedef int (*ElementEncoder)(Writer *w, PyObject *element, int version);

/* A topic of a request or response: its name, then the list `field` of `o`, each
   element written by `element`. */
static int
put_topic(Writer *w, PyObject *t, int version, PyObject *field, ElementEncoder element)
{
    int flexible = version >= FIRST_FLEXIBLE;
    PyObject *name = PyObject_GetAttr(t, s_name);
    if (name == NULL)
        return 0;
    int ok = put_str(w, name, flexible, 0);
    Py_DECREF(name);
    if (!ok)
        return 0;
    PyObject *partitions = get_list(t, field);
    if (partitions == NULL)
        return 0;
    ok = put_count(w, PyList_GET_SIZE(partitions), flexible);
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(partitions); i++)
        ok = element(w, PyList_GET_ITEM(partitions, i), version);
    Py_DECREF(partitions);
    if (ok && flexible)
        ok = put_uv(w, 0);
    return ok;
}

static int
put_response(Writer *w, PyObject *response, int version)
{
    int flexible = version >= FIRST_FLEXIBLE;
    PyObject *topics = get_list(response, s_responses);
    if (topics == NULL)
        return 0;
    int ok = put_count(w, PyList_GET_SIZE(topics), flexible);
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(topics); i++)
        ok = put_topic(w, PyList_GET_ITEM(topics, i), version, s_partition_responses,
                       put_partition);
    Py_DECREF(topics);
    long long throttle;
    if (!ok || !get_int(response, s_throttle_time_ms, INT32_MIN, INT32_MAX, &throttle) ||
        !put_be(w, (uint64_t)throttle, 4))
        return 0;
    /* no node endpoints either (the same refusal at versions without them) */
    PyObject *endpoints = get_list(response, s_node_endpoints);
    if (endpoints == NULL)
        return 0;
    Py_ssize_t n = PyList_GET_SIZE(endpoints);
    Py_DECREF(endpoints);
    if (n != 0)
        return 0;
    return !flexible || put_uv(w, 0);
}

typedef int (*BodyEncoder)(Writer *w, PyObject *o, int version);

/* encode_produce_response and encode_produce_request: `put` the body of args[3] at
   version args[0] into the bytearray args[2], or return args[1](args[2], args[3]). */
static PyObject *
encode_with(BodyEncoder put, const char *usage, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    int version = PyLong_Check(args[0]) ? (int)PyLong_AsLong(args[0]) : -1;
    PyObject *fallback = args[1], *out = args[2], *message = args[3];
    if (version == -1 && PyErr_Occurred())
        PyErr_Clear();
    if (version >= MIN_VERSION && version <= MAX_VERSION && PyByteArray_Check(out)) {
        Writer w = {PyMem_Malloc(256), 0, 256, NULL};
        if (w.buf == NULL)
            return PyErr_NoMemory();
        int ok = put(&w, message, version);
        if (ok) {
            Py_ssize_t start = PyByteArray_GET_SIZE(out);
            ok = PyByteArray_Resize(out, start + w.len) == 0;
            if (ok)
                memcpy(PyByteArray_AS_STRING(out) + start, w.buf, (size_t)w.len);
        }
        PyMem_Free(w.buf);
        if (ok)
            Py_RETURN_NONE;
        if (PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_MemoryError))
                return NULL;
            PyErr_Clear();
        }
    }
    PyObject *fargs[2] = {out, message};
    return PyObject_Vectorcall(fallback, fargs, 2, NULL);
}

static PyObject *
encode_produce_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return encode_with(put_response,
                       "encode_produce_response(version, fallback, out, response) takes 4 arguments",
                       args, nargs);
}

/* ------------------------------------------------------------------------ */
/* the client's side: ProduceResponse decoding                              */

/* A LeaderIdAndEpoch at its defaults, as the generated decoder makes one. */
static PyObject *
default_leader_object(void)
{
    PyObject *minus_one = PyLong_FromLong(-1);
    if (minus_one == NULL)
        return NULL;
    PyObject *names[2] = {s_leader_id, s_leader_epoch};
    PyObject *values[2] = {minus_one, minus_one};
    PyObject *o = make(LeaderIdAndEpochType, 2, names, values);
    Py_DECREF(minus_one);
    return o;
}

static PyObject *
decode_partition_response(Reader *r, int version, PyObject *unused)
{
    int flexible = version >= FIRST_FLEXIBLE;
    long index;
    int error_code;
    long long base_offset, append_time, log_start = -1;
    if (!read_i32(r, &index) || !read_i16(r, &error_code) || !read_i64(r, &base_offset) ||
        !read_i64(r, &append_time))
        return NULL;
    if (version >= 5 && !read_i64(r, &log_start))
        return NULL;
    PyObject *message = NULL;
    if (version >= 8) {
        Py_ssize_t errors;
        /* record errors: declined (an empty array only) */
        if (flexible) {
            if (!read_uv(r, &errors) || errors != 1)
                return NULL;
        }
        else {
            long n;
            if (!read_i32(r, &n) || n != 0)
                return NULL;
        }
        if (!read_nullable_str(r, flexible, &message))
            return NULL;
    }
    else
        message = Py_NewRef(Py_None);
    if (flexible && !read_no_tags(r)) { /* a current leader: left to Python */
        Py_DECREF(message);
        return NULL;
    }
    PyObject *o = NULL;
    PyObject *leader = default_leader_object();
    PyObject *errors = PyList_New(0);
    PyObject *ints[5] = {PyLong_FromLong(index), PyLong_FromLong(error_code),
                         PyLong_FromLongLong(base_offset), PyLong_FromLongLong(append_time),
                         PyLong_FromLongLong(log_start)};
    if (leader != NULL && errors != NULL && ints[0] != NULL && ints[1] != NULL &&
        ints[2] != NULL && ints[3] != NULL && ints[4] != NULL) {
        PyObject *names[8] = {s_index,          s_error_code,    s_base_offset,
                              s_log_append_time_ms, s_log_start_offset, s_record_errors,
                              s_error_message,  s_current_leader};
        PyObject *values[8] = {ints[0], ints[1], ints[2], ints[3],
                               ints[4], errors,  message, leader};
        o = make(PartitionResponseType, 8, names, values);
    }
    for (int i = 0; i < 5; i++)
        Py_XDECREF(ints[i]);
    Py_XDECREF(leader);
    Py_XDECREF(errors);
    Py_DECREF(message);
    return o;
}

static PyObject *
decode_response_body(Reader *r, int version)
{
    int flexible = version >= FIRST_FLEXIBLE;
    PyObject *topics = NULL, *throttle_obj = NULL, *endpoints = NULL, *o = NULL;
    Py_ssize_t count;
    long throttle;
    /* name (1 or 2 bytes) + partition count (1 or 4) (+ tags) */
    if (!read_count(r, flexible, flexible ? 3 : 6, &count))
        return NULL;
    topics = PyList_New(count);
    if (topics == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        /* a partition: index, error code, base offset, append time: 22 bytes at least */
        PyObject *t = decode_topic(r, version, NULL, 22, decode_partition_response,
                                   TopicResponseType, s_partition_responses);
        if (t == NULL)
            goto done;
        PyList_SET_ITEM(topics, i, t);
    }
    if (!read_i32(r, &throttle))
        goto done;
    if (flexible && !read_no_tags(r)) /* node endpoints: left to Python */
        goto done;
    throttle_obj = PyLong_FromLong(throttle);
    endpoints = PyList_New(0);
    if (throttle_obj == NULL || endpoints == NULL)
        goto done;
    PyObject *names[3] = {s_responses, s_throttle_time_ms, s_node_endpoints};
    PyObject *values[3] = {topics, throttle_obj, endpoints};
    o = make(ProduceResponseType, 3, names, values);
done:
    Py_XDECREF(topics);
    Py_XDECREF(throttle_obj);
    Py_XDECREF(endpoints);
    return o;
}

static PyObject *
decode_produce_response(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError,
                        "decode_produce_response(version, fallback, buf, pos) takes 4 arguments");
        return NULL;
    }
    int version = PyLong_Check(args[0]) ? (int)PyLong_AsLong(args[0]) : -1;
    if (version == -1 && PyErr_Occurred())
        PyErr_Clear();
    Py_ssize_t pos = PyLong_Check(args[3]) ? PyLong_AsSsize_t(args[3]) : -1;
    if (pos == -1 && PyErr_Occurred())
        PyErr_Clear();
    PyObject *result = NULL;
    if (ProduceResponseType != NULL && version >= MIN_VERSION && version <= MAX_VERSION &&
        pos >= 0) {
        Py_buffer buffer;
        if (PyObject_GetBuffer(args[2], &buffer, PyBUF_SIMPLE) == 0) {
            if (pos <= buffer.len) {
                Reader r = {buffer.buf, pos, buffer.len};
                PyObject *response = decode_response_body(&r, version);
                if (response != NULL) {
                    result = Py_BuildValue("(Nn)", response, r.pos);
                }
            }
            PyBuffer_Release(&buffer);
        }
        if (result != NULL)
            return result;
        if (PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_MemoryError))
                return NULL;
            PyErr_Clear();
        }
    }
    PyObject *fargs[2] = {args[2], args[3]};
    return PyObject_Vectorcall(args[1], fargs, 2, NULL);
}

/* ------------------------------------------------------------------------ */
/* the client's side: ProduceRequest encoding                               */

/* Record sets from this size on are written by reference by
   encode_produce_request_parts; smaller ones cost less copied than as a piece of
   their own. */
#define BY_REFERENCE_MIN 4096

/* Leave `records` (`len` bytes) out of w's buffer: a cut at the current position. */
static int
cut_records(Writer *w, PyObject *records, Py_ssize_t len)
{
    PyObject *position = PyLong_FromSsize_t(w->len);
    if (position == NULL)
        return 0;
    PyObject *cut = PyTuple_Pack(2, position, records);
    Py_DECREF(position);
    if (cut == NULL)
        return 0;
    int ok = PyList_Append(w->cuts, cut) == 0;
    Py_DECREF(cut);
    return ok;
}

static int
put_records(Writer *w, PyObject *records, int flexible)
{
    if (records == Py_None)
        return flexible ? put_uv(w, 0) : put_be(w, 0xFFFFFFFFu, 4);
    Py_buffer buffer;
    if (PyObject_GetBuffer(records, &buffer, PyBUF_SIMPLE) < 0)
        return 0;
    int ok = buffer.len < INT32_MAX && (flexible ? put_uv(w, (uint32_t)(buffer.len + 1))
                                                 : put_be(w, (uint64_t)buffer.len, 4));
    if (ok) {
        /* by reference only the buffers nobody resizes while the request is written */
        if (w->cuts != NULL && buffer.len >= BY_REFERENCE_MIN &&
            (PyByteArray_CheckExact(records) || PyBytes_CheckExact(records)))
            ok = cut_records(w, records, buffer.len);
        else
            ok = put_bytes(w, buffer.buf, buffer.len);
    }
    PyBuffer_Release(&buffer);
    return ok;
}

static int
put_partition_data(Writer *w, PyObject *p, int version)
{
    int flexible = version >= FIRST_FLEXIBLE;
    long long index;
    if (!get_int(p, s_index, INT32_MIN, INT32_MAX, &index) || !put_be(w, (uint64_t)index, 4))
        return 0;
    PyObject *records = PyObject_GetAttr(p, s_records);
    if (records == NULL)
        return 0;
    int ok = put_records(w, records, flexible);
    Py_DECREF(records);
    return ok && (!flexible || put_uv(w, 0));
}

static int
put_request(Writer *w, PyObject *request, int version)
{
    int flexible = version >= FIRST_FLEXIBLE;
    PyObject *txn = PyObject_GetAttr(request, s_transactional_id);
    if (txn == NULL)
        return 0;
    int ok = put_str(w, txn, flexible, 1);
    Py_DECREF(txn);
    long long acks, timeout;
    if (!ok || !get_int(request, s_acks, INT16_MIN, INT16_MAX, &acks) ||
        !get_int(request, s_timeout_ms, INT32_MIN, INT32_MAX, &timeout) ||
        !put_be(w, (uint64_t)acks, 2) || !put_be(w, (uint64_t)timeout, 4))
        return 0;
    PyObject *topics = get_list(request, s_topic_data);
    if (topics == NULL)
        return 0;
    ok = put_count(w, PyList_GET_SIZE(topics), flexible);
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(topics); i++)
        ok = put_topic(w, PyList_GET_ITEM(topics, i), version, s_partition_data,
                       put_partition_data);
    Py_DECREF(topics);
    return ok && (!flexible || put_uv(w, 0));
}

static PyObject *
encode_produce_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return encode_with(put_request,
                       "encode_produce_request(version, fallback, out, request) takes 4 arguments",
                       args, nargs);
}

/* The pieces of a frame whose head is `out` (a bytearray: 4 bytes for the size, then
   the request header) and whose body w's buffer and cuts hold: `out`
   with w's bytes up to the first cut, then each cut's records and the bytes up to the
   next. The size is written into out[0:4]. NULL on an error (nothing declined here). */
static PyObject *
frame_parts(PyObject *out, Writer *w)
{
    Py_ssize_t ncuts = PyList_GET_SIZE(w->cuts), total = PyByteArray_GET_SIZE(out) + w->len;
    PyObject *parts = PyList_New(0);
    if (parts == NULL)
        return NULL;
    Py_ssize_t from = 0;
    for (Py_ssize_t i = 0; i <= ncuts; i++) {
        PyObject *records = NULL;
        Py_ssize_t upto = w->len;
        if (i < ncuts) {
            PyObject *cut = PyList_GET_ITEM(w->cuts, i);
            upto = PyLong_AsSsize_t(PyTuple_GET_ITEM(cut, 0));
            records = PyTuple_GET_ITEM(cut, 1);
            total += Py_SIZE(records);
        }
        int ok;
        if (i == 0) {
            Py_ssize_t start = PyByteArray_GET_SIZE(out);
            ok = PyByteArray_Resize(out, start + upto) == 0;
            if (ok) {
                memcpy(PyByteArray_AS_STRING(out) + start, w->buf, (size_t)upto);
                ok = PyList_Append(parts, out) == 0;
            }
        }
        else if (upto > from) {
            PyObject *piece = PyBytes_FromStringAndSize((const char *)w->buf + from, upto - from);
            ok = piece != NULL && PyList_Append(parts, piece) == 0;
            Py_XDECREF(piece);
        }
        else
            ok = 1;
        if (ok && records != NULL)
            ok = PyList_Append(parts, records) == 0;
        if (!ok) {
            Py_DECREF(parts);
            return NULL;
        }
        from = upto;
    }
    if (total - 4 > INT32_MAX) {
        Py_DECREF(parts);
        PyErr_SetString(PyExc_OverflowError, "a Produce frame over 2 GiB");
        return NULL;
    }
    uint32_t size = (uint32_t)(total - 4);
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(out);
    p[0] = (unsigned char)(size >> 24);
    p[1] = (unsigned char)(size >> 16);
    p[2] = (unsigned char)(size >> 8);
    p[3] = (unsigned char)size;
    return parts;
}

static PyObject *
encode_produce_request_parts(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "encode_produce_request_parts(version, correlation_id, "
                                         "client_id, request) takes 4 arguments");
        return NULL;
    }
    int version = PyLong_Check(args[0]) ? (int)PyLong_AsLong(args[0]) : -1;
    if (version == -1 && PyErr_Occurred())
        PyErr_Clear();
    long long correlation_id = 0;
    if (PyLong_Check(args[1])) {
        int overflow;
        correlation_id = PyLong_AsLongLongAndOverflow(args[1], &overflow);
        if (overflow || correlation_id < INT32_MIN || correlation_id > INT32_MAX)
            version = -1;
        if (correlation_id == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            version = -1;
        }
    }
    else
        version = -1;
    PyObject *client_id = args[2], *request = args[3];
    if (version < MIN_VERSION || version > MAX_VERSION || !PyBytes_CheckExact(client_id))
        Py_RETURN_NONE;
    /* the frame's head: the size (written last), then the request header (v1, or v2
       from the first flexible version: an empty tagged section after the client id) */
    Py_ssize_t id_size = PyBytes_GET_SIZE(client_id), head_size = 12 + id_size;
    if (version >= FIRST_FLEXIBLE)
        head_size += 1;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, head_size);
    Writer w = {PyMem_Malloc(256), 0, 256, PyList_New(0)};
    PyObject *parts = NULL;
    if (out == NULL || w.buf == NULL || w.cuts == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    unsigned char *p = (unsigned char *)PyByteArray_AS_STRING(out);
    uint32_t id = (uint32_t)correlation_id;
    unsigned char fixed[8] = {0, 0, 0, (unsigned char)version, (unsigned char)(id >> 24),
                              (unsigned char)(id >> 16), (unsigned char)(id >> 8),
                              (unsigned char)id};
    memcpy(p + 4, fixed, 8);
    memcpy(p + 12, PyBytes_AS_STRING(client_id), (size_t)id_size);
    if (version >= FIRST_FLEXIBLE)
        p[12 + id_size] = 0;
    if (put_request(&w, request, version))
        parts = frame_parts(out, &w);
    if (parts == NULL && PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_MemoryError))
        PyErr_Clear(); /* declined: the Python encoder encodes it or says what is wrong */
done:
    Py_XDECREF(out);
    PyMem_Free(w.buf);
    Py_XDECREF(w.cuts);
    if (parts == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return parts;
}

/* ------------------------------------------------------------------------ */

static PyObject *
bind(PyObject *self, PyObject *args)
{
    PyObject *types[5];
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!", &PyType_Type, &types[0], &PyType_Type, &types[1],
                          &PyType_Type, &types[2], &PyType_Type, &types[3], &PyType_Type,
                          &types[4]))
        return NULL;
    PyObject **slots[5] = {&RequestHeaderType, &ProduceRequestType, &TopicDataType,
                           &PartitionDataType, &LeaderIdAndEpochType};
    for (int i = 0; i < 5; i++)
        Py_XSETREF(*slots[i], Py_NewRef(types[i]));
    Py_RETURN_NONE;
}

static PyObject *
bind_client(PyObject *self, PyObject *args)
{
    PyObject *types[3];
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyType_Type, &types[0], &PyType_Type, &types[1],
                          &PyType_Type, &types[2]))
        return NULL;
    PyObject **slots[3] = {&ProduceResponseType, &TopicResponseType, &PartitionResponseType};
    for (int i = 0; i < 3; i++)
        Py_XSETREF(*slots[i], Py_NewRef(types[i]));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_produce_request", decode_produce_request, METH_O,
     "decode_produce_request(frame): (RequestHeader, ProduceRequest) for a v3-11 Produce\n"
     "frame the fast path takes, else None (the Python decoder then handles it)."},
    {"encode_produce_response", (PyCFunction)(void (*)(void))encode_produce_response,
     METH_FASTCALL,
     "encode_produce_response(version, fallback, out, response): append the body to out;\n"
     "returns fallback(out, response) for what only the Python encoder handles."},
    {"encode_produce_request", (PyCFunction)(void (*)(void))encode_produce_request,
     METH_FASTCALL,
     "encode_produce_request(version, fallback, out, request): append the body to out;\n"
     "returns fallback(out, request) for what only the Python encoder handles."},
    {"encode_produce_request_parts",
     (PyCFunction)(void (*)(void))encode_produce_request_parts, METH_FASTCALL,
     "encode_produce_request_parts(version, correlation_id, client_id, request): the\n"
     "frame's pieces, the large record sets by reference; None when declined."},
    {"decode_produce_response", (PyCFunction)(void (*)(void))decode_produce_response,
     METH_FASTCALL,
     "decode_produce_response(version, fallback, buf, pos): (ProduceResponse, end) for a\n"
     "v3-11 body the fast path takes, else fallback(buf, pos)."},
    {"bind_client", bind_client, METH_VARARGS,
     "bind_client(produce_response, topic_produce_response, partition_produce_response)"},
    {"bind", bind, METH_VARARGS,
     "bind(request_header, produce_request, topic_data, partition_data, leader_id_and_epoch)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_produce", "C accelerator for Produce (both sides).", -1,
    methods, NULL, NULL, NULL, NULL,
};

#define INTERN(var, text)                                                                      \
    do {                                                                                       \
        var = PyUnicode_InternFromString(text);                                                \
        if (var == NULL)                                                                       \
            return NULL;                                                                       \
    } while (0)

PyMODINIT_FUNC
PyInit__produce(void)
{
    INTERN(s_request_api_key, "request_api_key");
    INTERN(s_request_api_version, "request_api_version");
    INTERN(s_correlation_id, "correlation_id");
    INTERN(s_client_id, "client_id");
    INTERN(s_transactional_id, "transactional_id");
    INTERN(s_acks, "acks");
    INTERN(s_timeout_ms, "timeout_ms");
    INTERN(s_topic_data, "topic_data");
    INTERN(s_name, "name");
    INTERN(s_partition_data, "partition_data");
    INTERN(s_index, "index");
    INTERN(s_records, "records");
    INTERN(s_responses, "responses");
    INTERN(s_throttle_time_ms, "throttle_time_ms");
    INTERN(s_node_endpoints, "node_endpoints");
    INTERN(s_partition_responses, "partition_responses");
    INTERN(s_error_code, "error_code");
    INTERN(s_base_offset, "base_offset");
    INTERN(s_log_append_time_ms, "log_append_time_ms");
    INTERN(s_log_start_offset, "log_start_offset");
    INTERN(s_record_errors, "record_errors");
    INTERN(s_error_message, "error_message");
    INTERN(s_current_leader, "current_leader");
    INTERN(s_leader_id, "leader_id");
    INTERN(s_leader_epoch, "leader_epoch");
    return PyModule_Create(&module);
}
