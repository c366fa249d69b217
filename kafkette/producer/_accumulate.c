/*
 * The state of the producer's append, owned by C types, and its most common
 * append: a record added to its partition's open batch.
 *
 * FutureState is the base of RecordFuture: the record's batch (its BatchResult), its offset
 * delta in the batch and its timestamp. BatchState is the base of ProducerBatch: the buffer
 * an open batch's records are encoded into (one bytearray, the batch header's bytes reserved
 * at its front, so that closing the batch writes the header and one CRC over it and nothing
 * per record is left to free or join), the count of its records, its first and highest
 * timestamps, its size, the buffer memory it holds and whether it is full (a ProducerBatch
 * is its own BatchResult, whose fields are the Python subclass's). AccumulatorState is the base of
 * RecordAccumulator: its lock, the queues of batches per partition, the bytes of
 * buffer.memory in use, the limits, whether it is closed and whether the sender
 * has a wake-up pending. Both keep these fields in their C structs, typed (an
 * int field refuses a float, a flag anything but a bool), and the Python
 * subclasses read and write them through the types' member descriptors, under
 * the same lock as here. kafkette.producer.append_state has the same classes in
 * Python for when the extension is not used.
 *
 * AccumulatorState.append_open(topic, partition, timestamp, key, value) does
 * what RecordAccumulator.append_plain does for a partition that has a queue: under the
 * lock (or, for a partition of the topic it appended to last whose queue it remembers
 * and an open batch with room, with the lock free and the GIL held throughout) it checks
 * buffer.memory, closes the last batch and opens the next when the record does not fit
 * (under the lock, RecordAccumulator._open_batch's work, the sender woken or its linger
 * alarm told as RecordAccumulator._reserve does), encodes the record at the end of the
 * batch's buffer (as kafkette.protocol.records' encode_record writes a record without
 * headers, byte for byte), updates the batch's size and timestamps and the accounting,
 * and returns the record's RecordFuture. In every other case (a partition's first
 * record, an empty batch given a record larger than batch.size, a record too large, no
 * room in buffer.memory, the producer closed, a key or value that is not bytes) it
 * changes nothing and returns None, for the Python method to do the same work or to
 * send the record the general way. Given a delivery callback too, it always takes
 * the lock and registers the callback on the batch (its result) before it lets go.
 *
 * RouteState is what that send needs of its producer, owned here and held by
 * ProducerCore (its `routes`): the metadata cache, the snapshot the cached
 * partition counts were read from and those counts, the partitioners, the
 * accumulator, and whether the producer sends plainly (no transactions,
 * serializers or user partitioner) and ignores keys. RouteState.send(topic,
 * value, key, timestamp, partition=None, on_delivery=None, headers=None) is that send,
 * to a partition it chooses or the one given; its headers (a list or tuple of (str,
 * bytes | str | None) pairs, or a dict) are encoded here, before the append, as the
 * record's headers section (encode_section). send_plain(core, ...) is
 * core.routes.send(...), the producers' call. RouteState.send_prepared(...) is the
 * same send for a producer with serializers or transactions (RouteState.prepared), once
 * ProducerCore.prepare_record serialized the record and checked the transaction: a
 * transactional record only to a partition in RouteState.transaction (the partitions
 * noted for the open transaction). kafkette.producer.append_state has the same class
 * in Python.
 *
 * write_header(buffer, count, ...) writes a drained batch's header and CRC (the crc32c
 * package's) into its buffer's reserved front when it is not compressed, the bytes
 * kafkette.protocol.records.default_records.build_reserved writes, without that function's
 * Python calls per batch; a field out of range is left to build_reserved, which refuses it.
 *
 * keyed_partition(key, count) is kafkette.producer.partitioner.keyed_partition (Kafka's
 * murmur2 of the key, masked to 31 bits, modulo count), the partition of every keyed send.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <time.h>

#define RECORD_OVERHEAD 21
#define BATCH_OVERHEAD 61
#define FIRST_ALLOCATION 16384

/* ---- int fields: a getter and setter over the long long at offset `closure` (the
 * setter checks the value before it writes, which T_LONGLONG members do not) */

static PyObject *
get_ll(PyObject *self, void *closure)
{
    return PyLong_FromLongLong(*(long long *)((char *)self + (Py_ssize_t)closure));
}

static int
set_ll(PyObject *self, PyObject *value, void *closure)
{
    if (value == NULL || !PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "the field must be an int, not %s",
                     value == NULL ? "deleted" : Py_TYPE(value)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    *(long long *)((char *)self + (Py_ssize_t)closure) = v;
    return 0;
}

#define INT_FIELD(name, type, field, doc)                                                         \
    {name, get_ll, set_ll, doc, (void *)offsetof(type, field)}

/* ---- BatchState */

typedef struct {
    PyObject_HEAD
    PyObject *buffer; /* bytearray: the header's bytes reserved, then the records; None once built */
    /* the fields through which a batch can be in a reference cycle (see batch_new): its
     * errors (an exception's traceback reaches frames), its waiters' events, its callbacks
     * (which hold its records' futures, which hold the batch), its parts and its parent */
    PyObject *error;
    PyObject *last_error;
    PyObject *event;
    PyObject *async_event;
    PyObject *callbacks;
    PyObject *parts;
    PyObject *parent;
    /* what the sender and the outcome need: atomic values only (see batch_new) */
    PyObject *topic;     /* str */
    PyObject *partition; /* int */
    PyObject *tp;        /* (topic, partition), shared by the partition's batches */
    PyObject *data;      /* the built batch (bytearray or bytes), or None */
    long long count;  /* records in the buffer */
    long long base_timestamp;
    long long max_timestamp;
    long long size;     /* bytes of the batch if built now, before compression */
    long long reserved; /* buffer.memory held by the batch's records */
    long long compression;
    long long attempts;
    long long base_sequence;
    long long producer_id;
    long long producer_epoch;
    long long base_offset;
    long long log_append_time;
    long long pending_parts;
    double created_ms;
    double retry_at_ms;
    char full;
    char transactional;
    char done;
} BatchState;

static int
batch_traverse(BatchState *self, visitproc visit, void *arg)
{
    Py_VISIT(self->buffer);
    Py_VISIT(self->error);
    Py_VISIT(self->last_error);
    Py_VISIT(self->event);
    Py_VISIT(self->async_event);
    Py_VISIT(self->callbacks);
    Py_VISIT(self->parts);
    Py_VISIT(self->parent);
    Py_VISIT(self->topic);
    Py_VISIT(self->partition);
    Py_VISIT(self->tp);
    Py_VISIT(self->data);
    return 0;
}

static int
batch_clear(BatchState *self)
{
    Py_CLEAR(self->buffer);
    Py_CLEAR(self->error);
    Py_CLEAR(self->last_error);
    Py_CLEAR(self->event);
    Py_CLEAR(self->async_event);
    Py_CLEAR(self->callbacks);
    Py_CLEAR(self->parts);
    Py_CLEAR(self->parent);
    Py_CLEAR(self->topic);
    Py_CLEAR(self->partition);
    Py_CLEAR(self->tp);
    Py_CLEAR(self->data);
    return 0;
}

/* A batch starts untracked by the garbage collector, as CPython's dicts of atomic
 * values do: a producer sending to many partitions keeps tens of thousands of batches in
 * flight, and each one tracked is one more for every collection to walk. It can be in no
 * reference cycle then: what it refers to is its bytes, ints, floats, strings and its
 * (topic, partition) key, which refer to nothing of it. It is tracked again, for good,
 * once one of the fields above (through which a cycle can pass) is given anything but
 * None. The Python subclass's own slots hold such atomic values only (ProducerBatch). */
static PyObject *
batch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *self = type->tp_alloc(type, 0);
    if (self != NULL)
        PyObject_GC_UnTrack(self);
    return self;
}

static PyObject *
get_cyclic(PyObject *self, void *closure)
{
    PyObject *value = *(PyObject **)((char *)self + (Py_ssize_t)closure);
    return Py_NewRef(value != NULL ? value : Py_None);
}

static int
set_cyclic(PyObject *self, PyObject *value, void *closure)
{
    if (value == NULL)
        value = Py_None; /* del: back to None, as the fallback's slots cannot */
    if (value != Py_None && !PyObject_GC_IsTracked(self))
        PyObject_GC_Track(self);
    Py_XSETREF(*(PyObject **)((char *)self + (Py_ssize_t)closure), Py_NewRef(value));
    return 0;
}

#define CYCLIC_FIELD(name, field, doc)                                                            \
    {name, get_cyclic, set_cyclic, doc, (void *)offsetof(BatchState, field)}

/* A new batch's fields, as ProducerBatch(topic, partition, compression, now_ms,
 * first_timestamp, tp) sets them (`tp` made when NULL); 0, or -1 on an error. */
static int
batch_fill(BatchState *self, PyObject *topic, PyObject *partition, PyObject *tp,
           long long compression, double now_ms, long long first_timestamp)
{
    PyObject *buffer = PyByteArray_FromStringAndSize(NULL, BATCH_OVERHEAD);
    if (buffer == NULL)
        return -1;
    memset(PyByteArray_AS_STRING(buffer), 0, BATCH_OVERHEAD);
    if (tp == NULL) {
        tp = PyTuple_Pack(2, topic, partition);
        if (tp == NULL) {
            Py_DECREF(buffer);
            return -1;
        }
    }
    else
        Py_INCREF(tp);
    Py_XSETREF(self->buffer, buffer);
    Py_XSETREF(self->tp, tp);
    Py_XSETREF(self->topic, Py_NewRef(topic));
    Py_XSETREF(self->partition, Py_NewRef(partition));
    Py_CLEAR(self->data);
    self->compression = compression;
    self->count = 0;
    self->base_timestamp = self->max_timestamp = first_timestamp;
    self->created_ms = now_ms;
    self->reserved = 0;
    self->size = BATCH_OVERHEAD;
    self->full = 0;
    self->attempts = 0;
    self->retry_at_ms = 0.0;
    self->base_sequence = self->producer_id = self->producer_epoch = -1;
    self->transactional = 0;
    self->base_offset = self->log_append_time = -1;
    self->done = 0;
    self->pending_parts = 0;
    return 0;
}

static int
batch_init(BatchState *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"topic",           "partition", "compression", "now_ms",
                            "first_timestamp", "tp",        NULL};
    PyObject *topic, *partition, *tp = Py_None;
    long long compression, first_timestamp;
    double now_ms;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOLdL|O:ProducerBatch", names, &topic,
                                     &partition, &compression, &now_ms, &first_timestamp, &tp))
        return -1;
    return batch_fill(self, topic, partition, tp == Py_None ? NULL : tp, compression, now_ms,
                      first_timestamp);
}

static void
batch_dealloc(BatchState *self)
{
    PyObject_GC_UnTrack(self);
    batch_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef batch_members[] = {
    {"buffer", T_OBJECT, offsetof(BatchState, buffer), 0,
     "The batch's bytes as a bytearray: BATCH_OVERHEAD bytes reserved for the header, then\n"
     "the encoded records (offset deltas 0, 1, ...); None once built."},
    {"full", T_BOOL, offsetof(BatchState, full), 0, "Whether no record may be added."},
    {"topic", T_OBJECT, offsetof(BatchState, topic), 0, "The batch's topic."},
    {"partition", T_OBJECT, offsetof(BatchState, partition), 0, "The batch's partition."},
    {"tp", T_OBJECT, offsetof(BatchState, tp), 0,
     "(topic, partition), shared by the partition's batches."},
    {"data", T_OBJECT, offsetof(BatchState, data), 0,
     "The built batch (compressed), or None until built and once settled."},
    {"created_ms", T_DOUBLE, offsetof(BatchState, created_ms), 0,
     "When the batch was opened (ms, the accumulator's clock)."},
    {"retry_at_ms", T_DOUBLE, offsetof(BatchState, retry_at_ms), 0,
     "When its retry's backoff ends (ms), 0 before a retry."},
    {"transactional", T_BOOL, offsetof(BatchState, transactional), 0,
     "Whether it is sent in a transaction."},
    {"done", T_BOOL, offsetof(BatchState, done), 0, "Whether it was acknowledged or failed."},
    {NULL},
};

static PyGetSetDef batch_getset[] = {
    CYCLIC_FIELD("error", error, "Why the batch failed (None unless it did)."),
    CYCLIC_FIELD("last_error", last_error, "The error of the batch's last attempt, or None."),
    CYCLIC_FIELD("_event", event, "The threading.Event of threads waiting, or None."),
    CYCLIC_FIELD("_async_event", async_event, "The anyio.Event of tasks waiting, or None."),
    CYCLIC_FIELD("_callbacks", callbacks, "The records' callbacks not yet run, or None."),
    CYCLIC_FIELD("_parts", parts, "(first index, part) of a batch cut in parts, or None."),
    CYCLIC_FIELD("_parent", parent, "The batch this one is a part of, or None."),
    INT_FIELD("count", BatchState, count, "Records in the batch."),
    INT_FIELD("base_timestamp", BatchState, base_timestamp,
              "The first record's timestamp (the records' deltas are from it)."),
    INT_FIELD("max_timestamp", BatchState, max_timestamp, "The highest timestamp of the records."),
    INT_FIELD("size", BatchState, size, "Bytes of the batch if built now, before compression."),
    INT_FIELD("reserved", BatchState, reserved, "Bytes of buffer.memory the batch's records hold."),
    INT_FIELD("compression", BatchState, compression, "Its compression codec's id."),
    INT_FIELD("attempts", BatchState, attempts, "Retries made."),
    INT_FIELD("base_sequence", BatchState, base_sequence, "Its first sequence number, or -1."),
    INT_FIELD("producer_id", BatchState, producer_id, "The producer id it was sent with, or -1."),
    INT_FIELD("producer_epoch", BatchState, producer_epoch, "That id's epoch, or -1."),
    INT_FIELD("base_offset", BatchState, base_offset, "Where it was stored (-1: unknown)."),
    INT_FIELD("log_append_time", BatchState, log_append_time,
              "The broker's append time, or -1."),
    INT_FIELD("_pending_parts", BatchState, pending_parts, "Its parts not yet settled."),
    {NULL},
};

static PyTypeObject BatchStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kafkette.producer._accumulate.BatchState",
    .tp_doc = "The open-batch state of a ProducerBatch (its base class).",
    .tp_basicsize = sizeof(BatchState),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = batch_new,
    .tp_init = (initproc)batch_init,
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_traverse = (traverseproc)batch_traverse,
    .tp_clear = (inquiry)batch_clear,
    .tp_members = batch_members,
    .tp_getset = batch_getset,
};

/* ---- FutureState */

typedef struct {
    PyObject_HEAD
    PyObject *batch;     /* BatchResult */
    PyObject *index;     /* int: the record's offset delta in its batch */
    PyObject *timestamp; /* int: the record's timestamp */
} FutureState;

static int
future_traverse(FutureState *self, visitproc visit, void *arg)
{
    Py_VISIT(self->batch);
    Py_VISIT(self->index);
    Py_VISIT(self->timestamp);
    return 0;
}

static int
future_clear(FutureState *self)
{
    Py_CLEAR(self->batch);
    Py_CLEAR(self->index);
    Py_CLEAR(self->timestamp);
    return 0;
}

static void
future_dealloc(FutureState *self)
{
    PyObject_GC_UnTrack(self);
    future_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
future_init(FutureState *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"batch", "index", "timestamp", NULL};
    PyObject *batch, *index, *timestamp;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:RecordFuture", names, &batch, &index,
                                     &timestamp))
        return -1;
    Py_XSETREF(self->batch, Py_NewRef(batch));
    Py_XSETREF(self->index, Py_NewRef(index));
    Py_XSETREF(self->timestamp, Py_NewRef(timestamp));
    return 0;
}

static PyMemberDef future_members[] = {
    {"_batch", T_OBJECT_EX, offsetof(FutureState, batch), 0, "The record's BatchResult."},
    {"_index", T_OBJECT_EX, offsetof(FutureState, index), 0,
     "The record's offset delta in its batch."},
    {"_timestamp", T_OBJECT_EX, offsetof(FutureState, timestamp), 0, "The record's timestamp."},
    {NULL},
};

static PyTypeObject FutureStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kafkette.producer._accumulate.FutureState",
    .tp_doc = "FutureState(batch, index, timestamp): what a RecordFuture knows (its base class).",
    .tp_basicsize = sizeof(FutureState),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)future_init,
    .tp_dealloc = (destructor)future_dealloc,
    .tp_traverse = (traverseproc)future_traverse,
    .tp_clear = (inquiry)future_clear,
    .tp_members = future_members,
};

/* ---- AccumulatorState */

typedef struct {
    PyObject_HEAD
    PyObject *lock;   /* threading.Lock */
    PyObject *queues; /* dict: (topic, partition) -> deque of ProducerBatch */
    PyObject *wakeup; /* callable or None */
    long long used;
    long long buffer_memory;
    long long batch_size;
    char closed;
    char wake_pending;
    /* what opening a batch needs (open_batch) */
    PyObject *clock;      /* () -> ms */
    PyObject *keys;       /* dict: (topic, partition) -> itself, the key its batches share */
    PyObject *incomplete; /* set of the batches not yet settled */
    PyObject *wake_at;    /* callable or None, see RecordAccumulator.wake_at */
    PyObject *batch_type; /* ProducerBatch */
    long long compression;
    long long flushes;
    long long max_record;
    double linger_ms;
    /* the queues of the last topic appended to, found in `cached_queues`: a list indexed
     * by partition, a queue or None -- a queue of _queues is never replaced or removed,
     * so while _queues is that dict the deque is still the partition's */
    PyObject *cached_queues;
    PyObject *cached_topic;
    PyObject *cached_list;
} AccumulatorState;

static PyObject *future_type;
static PyObject *str_acquire, *str_release, *str_locked, *str_snapshot, *str_partition,
    *str_append_plain, *str_routes, *str_add_callback, *str_append, *str_pop;
static PyTypeObject *deque_type; /* collections.deque, for PyDeque_CheckExact_ */
#define PyDeque_CheckExact_(op) (deque_type != NULL && Py_IS_TYPE((op), deque_type))

static int
accumulator_traverse(AccumulatorState *self, visitproc visit, void *arg)
{
    Py_VISIT(self->lock);
    Py_VISIT(self->queues);
    Py_VISIT(self->wakeup);
    Py_VISIT(self->cached_queues);
    Py_VISIT(self->cached_topic);
    Py_VISIT(self->cached_list);
    Py_VISIT(self->clock);
    Py_VISIT(self->keys);
    Py_VISIT(self->incomplete);
    Py_VISIT(self->wake_at);
    Py_VISIT(self->batch_type);
    return 0;
}

static int
accumulator_clear(AccumulatorState *self)
{
    Py_CLEAR(self->lock);
    Py_CLEAR(self->queues);
    Py_CLEAR(self->wakeup);
    Py_CLEAR(self->cached_queues);
    Py_CLEAR(self->cached_topic);
    Py_CLEAR(self->cached_list);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->incomplete);
    Py_CLEAR(self->wake_at);
    Py_CLEAR(self->batch_type);
    return 0;
}

static void
accumulator_dealloc(AccumulatorState *self)
{
    PyObject_GC_UnTrack(self);
    accumulator_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
call_method0(PyObject *obj, PyObject *name)
{
    PyObject *result = PyObject_CallMethodNoArgs(obj, name);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

/* bytes or None; -1 for anything else (the Python path's business) */
static Py_ssize_t
field_length(PyObject *field)
{
    if (field == Py_None)
        return 0;
    if (PyBytes_CheckExact(field))
        return PyBytes_GET_SIZE(field);
    return -1;
}

/* A zig-zag varint, as Kafka's varlong; its length (at most 10). */
static inline Py_ssize_t
write_varint(unsigned char *out, long long value)
{
    uint64_t z = ((uint64_t)value << 1) ^ (value < 0 ? UINT64_MAX : 0);
    Py_ssize_t n = 0;
    while (z >= 0x80) {
        out[n++] = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    out[n++] = (unsigned char)z;
    return n;
}

/* Make `buffer` (a bytearray) `size` bytes long, keeping its bytes. Its allocation
 * grows to 16 KiB at first (the default batch.size) and at least doubles after that,
 * up to `cap` (the batch's bound), so that a batch of n records is reallocated
 * O(log n) times, not bytearray's 1/8 at a time. Within the allocation only the
 * length moves (PyByteArray_Resize would give back an allocation less than half used). */
static int
grow_buffer(PyObject *buffer, Py_ssize_t size, Py_ssize_t cap)
{
    PyByteArrayObject *array = (PyByteArrayObject *)buffer;
    if (array->ob_exports > 0 || size < Py_SIZE(buffer))
        return PyByteArray_Resize(buffer, size); /* raises BufferError, or shrinks */
    Py_ssize_t room = array->ob_alloc - (array->ob_start - array->ob_bytes);
    if (size + 1 > room) {
        Py_ssize_t target = room < PY_SSIZE_T_MAX / 2 ? 2 * room : size;
        if (target < FIRST_ALLOCATION)
            target = FIRST_ALLOCATION; /* a batch's first records: one allocation */
        if (target > cap)
            target = cap;
        if (target < size)
            target = size;
        if (PyByteArray_Resize(buffer, target) < 0)
            return -1;
    }
    Py_SET_SIZE(buffer, size);
    PyByteArray_AS_STRING(buffer)[size] = '\0'; /* bytearray's trailing NUL */
    return 0;
}

#define MAX_REMEMBERED 65536 /* partitions of a topic whose queues are remembered */

/* The remembered queue of (topic, partition) in `queues` (borrowed), or NULL (no error
 * set): pointers compared and a list indexed, no key made, hashed or compared, no
 * Python code run. */
static PyObject *
remembered_queue(AccumulatorState *acc, PyObject *queues, PyObject *topic, PyObject *partition)
{
    if (acc->cached_queues != queues || acc->cached_topic != topic || acc->cached_list == NULL
        || !PyLong_CheckExact(partition))
        return NULL;
    int overflow;
    long index = PyLong_AsLongAndOverflow(partition, &overflow);
    if (overflow || index < 0 || index >= PyList_GET_SIZE(acc->cached_list))
        return NULL;
    PyObject *queue = PyList_GET_ITEM(acc->cached_list, index);
    return queue == Py_None ? NULL : queue;
}

/* The deque of (topic, partition) in `queues` (borrowed), NULL when there is none (or
 * on an error); the queues of the last topic found are remembered by partition, which
 * saves a common send making, hashing and comparing a key. Under the lock. */
static PyObject *
find_queue(AccumulatorState *acc, PyObject *queues, PyObject *topic, PyObject *partition)
{
    PyObject *queue = remembered_queue(acc, queues, topic, partition);
    if (queue != NULL)
        return queue;
    PyObject *tp = PyTuple_Pack(2, topic, partition);
    if (tp == NULL)
        return NULL;
    queue = PyDict_GetItemWithError(queues, tp); /* borrowed */
    Py_DECREF(tp);
    if (queue == NULL || !PyLong_CheckExact(partition))
        return queue;
    Py_ssize_t index = PyLong_AsSsize_t(partition);
    if (index < 0 || index >= MAX_REMEMBERED) {
        PyErr_Clear();
        return queue;
    }
    if (acc->cached_queues != queues || acc->cached_topic != topic || acc->cached_list == NULL) {
        PyObject *list = PyList_New(0);
        if (list == NULL)
            return NULL;
        Py_XSETREF(acc->cached_list, list);
        Py_XSETREF(acc->cached_queues, Py_NewRef(queues));
        Py_XSETREF(acc->cached_topic, Py_NewRef(topic));
    }
    PyObject *list = acc->cached_list;
    while (PyList_GET_SIZE(list) <= index)
        if (PyList_Append(list, Py_None) < 0)
            return NULL;
    PyList_SetItem(list, index, Py_NewRef(queue)); /* replaces a None */
    return queue;
}

/* Whether open_batch has what it needs (a RecordAccumulator's, not another subclass's). */
static int
can_open(AccumulatorState *acc)
{
    return acc->clock != NULL && acc->keys != NULL && PyDict_CheckExact(acc->keys)
           && acc->incomplete != NULL && PySet_CheckExact(acc->incomplete)
           && acc->batch_type != NULL && PyType_Check(acc->batch_type)
           && PyType_IsSubtype((PyTypeObject *)acc->batch_type, &BatchStateType);
}

/* RecordAccumulator._open_batch's new batch, under the lock: `prev` (the queue's last
 * batch, or NULL) closed, a batch for the record of timestamp `ts` opened at the clock's
 * time at the end of `queue` and counted as incomplete. A new reference, NULL on an
 * error. Runs Python code (the clock), which the lock-free append must not. */
static PyObject *
open_batch(AccumulatorState *acc, PyObject *queue, PyObject *topic, PyObject *partition,
           BatchState *prev, long long ts)
{
    PyObject *tp;
    if (prev != NULL && prev->tp != NULL)
        tp = Py_NewRef(prev->tp); /* the key its partition's batches share, from _keys */
    else {
        PyObject *key = PyTuple_Pack(2, topic, partition);
        if (key == NULL)
            return NULL;
        tp = PyDict_SetDefault(acc->keys, key, key); /* borrowed */
        Py_XINCREF(tp);
        Py_DECREF(key);
        if (tp == NULL)
            return NULL;
    }
    if (prev != NULL)
        prev->full = 1;
    PyObject *now = PyObject_CallNoArgs(acc->clock);
    double now_ms = now == NULL ? -1.0 : PyFloat_AsDouble(now);
    Py_XDECREF(now);
    if (now == NULL || (now_ms == -1.0 && PyErr_Occurred())) {
        Py_DECREF(tp);
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)acc->batch_type;
    PyObject *batch = type->tp_alloc(type, 0);
    if (batch == NULL) {
        Py_DECREF(tp);
        return NULL;
    }
    PyObject_GC_UnTrack(batch); /* as batch_new */
    int filled = batch_fill((BatchState *)batch, topic, partition, tp, acc->compression, now_ms, ts);
    Py_DECREF(tp);
    if (filled < 0) {
        Py_DECREF(batch);
        return NULL;
    }
    PyObject *r = PyObject_CallMethodOneArg(queue, str_append, batch);
    if (r == NULL) {
        Py_DECREF(batch);
        return NULL;
    }
    Py_DECREF(r);
    if (PySet_Add(acc->incomplete, batch) < 0) {
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        Py_XDECREF(PyObject_CallMethodNoArgs(queue, str_pop));
        PyErr_Restore(exc_type, exc_value, exc_tb);
        Py_DECREF(batch);
        return NULL;
    }
    return batch;
}

/* RecordAccumulator._drop_if_empty of a batch just opened for a record that could not be
 * added (an error is set, and kept). */
static void
drop_opened(AccumulatorState *acc, PyObject *queue, PyObject *batch)
{
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    PyObject *popped = PyObject_CallMethodNoArgs(queue, str_pop);
    if (popped == NULL)
        PyErr_Clear();
    Py_XDECREF(popped);
    if (PySet_Discard(acc->incomplete, batch) < 0)
        PyErr_Clear();
    PyErr_Restore(exc_type, exc_value, exc_tb);
}

/* ---- a record's headers, encoded before the append */

#define SECTION_SMALL 256

/* The headers section of a record as Kafka's record format v2 has it (and
 * kafkette.protocol.records.default_records' encoder writes it): a varint count, then
 * per header a varint key length, the key in UTF-8, a varint value length (-1: null)
 * and the value. `reserve` is what accumulator.record_size counts for the headers
 * (10 + 3 * len(key) + len(value) each), so that both paths account and cut batches
 * alike. A record without headers has the section "\0" and reserves nothing. */
typedef struct {
    const unsigned char *data;
    Py_ssize_t size;
    long long reserve;
    unsigned char *heap; /* PyMem block when the section is larger than `small` */
    unsigned char small[SECTION_SMALL];
} Section;

static void
section_release(Section *section)
{
    if (section->heap != NULL) {
        PyMem_Free(section->heap);
        section->heap = NULL;
    }
}

/* A header's key and value as the general path takes them: an exact str key; bytes, a
 * str (its UTF-8) or None as the value (*value_size -1). 1 when taken, 0 for what only
 * the general path handles (its own checks raise the right error), -1 on an error. */
static int
header_fields(PyObject *hkey, PyObject *hvalue, const char **key, Py_ssize_t *key_size,
              Py_ssize_t *key_chars, const char **value, Py_ssize_t *value_size)
{
    if (!PyUnicode_CheckExact(hkey))
        return 0;
    *key = PyUnicode_AsUTF8AndSize(hkey, key_size);
    if (*key == NULL) {
        PyErr_Clear(); /* e.g. a lone surrogate: encode() raises it on the general path */
        return 0;
    }
    *key_chars = PyUnicode_GET_LENGTH(hkey);
    if (hvalue == Py_None) {
        *value = NULL;
        *value_size = -1;
    }
    else if (PyBytes_CheckExact(hvalue)) {
        *value = PyBytes_AS_STRING(hvalue);
        *value_size = PyBytes_GET_SIZE(hvalue);
    }
    else if (PyUnicode_CheckExact(hvalue)) {
        *value = PyUnicode_AsUTF8AndSize(hvalue, value_size);
        if (*value == NULL) {
            PyErr_Clear();
            return 0;
        }
    }
    else
        return 0;
    return 1;
}

/* The i-th header of `headers` (a list or tuple of 2-tuples, or a dict), borrowed; 0 at
 * the end or for an item that is not a 2-tuple. `pos` is the dict's cursor. */
static int
next_header(PyObject *headers, Py_ssize_t i, Py_ssize_t *pos, PyObject **hkey,
            PyObject **hvalue)
{
    if (PyDict_CheckExact(headers))
        return PyDict_Next(headers, pos, hkey, hvalue);
    PyObject *item = PySequence_Fast_ITEMS(headers)[i];
    if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2)
        return 0;
    *hkey = PyTuple_GET_ITEM(item, 0);
    *hvalue = PyTuple_GET_ITEM(item, 1);
    return 1;
}

/* Encode `headers` (None, or what the producers' send was given) into `section`: 1 when
 * done, 0 when the general path must take the record (another shape or type: it accepts
 * or refuses it as before), -1 on an error. Runs no Python code: the headers cannot
 * change between the two passes. */
static int
encode_section(PyObject *headers, Section *section)
{
    section->heap = NULL;
    section->reserve = 0;
    section->small[0] = 0;
    section->data = section->small;
    section->size = 1;
    if (headers == Py_None)
        return 1;
    Py_ssize_t count;
    if (PyList_CheckExact(headers) || PyTuple_CheckExact(headers))
        count = PySequence_Fast_GET_SIZE(headers);
    else if (PyDict_CheckExact(headers))
        count = PyDict_GET_SIZE(headers);
    else
        return 0;
    if (count == 0)
        return 1; /* the general path's `if not headers` */
    unsigned char scratch[10];
    Py_ssize_t total = write_varint(scratch, count);
    long long reserve = 0;
    PyObject *hkey, *hvalue;
    const char *key, *value;
    Py_ssize_t key_size, key_chars, value_size, pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!next_header(headers, i, &pos, &hkey, &hvalue))
            return 0;
        int taken =
            header_fields(hkey, hvalue, &key, &key_size, &key_chars, &value, &value_size);
        if (taken <= 0)
            return taken;
        total += write_varint(scratch, key_size) + key_size;
        total += value_size < 0 ? 1 : write_varint(scratch, value_size) + value_size;
        reserve += 10 + 3 * (long long)key_chars + (value_size > 0 ? value_size : 0);
    }
    unsigned char *out = section->small;
    if (total > SECTION_SMALL) {
        out = section->heap = PyMem_Malloc(total);
        if (out == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    section->data = out;
    section->size = total;
    section->reserve = reserve;
    out += write_varint(out, count);
    pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        next_header(headers, i, &pos, &hkey, &hvalue);
        header_fields(hkey, hvalue, &key, &key_size, &key_chars, &value, &value_size);
        out += write_varint(out, key_size);
        memcpy(out, key, key_size);
        out += key_size;
        out += write_varint(out, value_size);
        if (value_size > 0) {
            memcpy(out, value, value_size);
            out += value_size;
        }
    }
    return 1;
}

/* Under the lock (or with the lock free and the GIL held, see add_to_open_batch): add
 * the record to the open batch, as `future` (allocated by the caller, its fields unset).
 * 1 when added (with *batch_out set and `future` filled), 0 when the Python path must
 * take it, -1 on an error. Without `may_open` (the lock-free append) it runs no Python
 * code and allocates nothing the garbage collector tracks, so that nothing here lets
 * another thread run; with it (under the lock), a partition with a queue whose last batch
 * is closed, full, or has no room for the record gets its next batch here
 * (RecordAccumulator._open_batch's work) and the sender's wake-up is decided as
 * RecordAccumulator._reserve decides it (which may call wake_at). */
static int
append_locked(AccumulatorState *acc, PyObject *topic, PyObject *partition, PyObject *timestamp,
              long long ts, PyObject *key, PyObject *value, const Section *headers,
              long long size, int may_open, FutureState *future, PyObject **batch_out,
              int *wake_out)
{
    if (acc->closed || acc->used + size > acc->buffer_memory)
        return 0;
    PyObject *queues = acc->queues;
    if (queues == NULL || !PyDict_CheckExact(queues))
        return 0;
    PyObject *queue = find_queue(acc, queues, topic, partition); /* borrowed */
    if (queue == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t queued = PySequence_Size(queue);
    if (queued < 0)
        return -1;
    PyObject *last = NULL; /* new reference */
    BatchState *batch = NULL;
    if (queued > 0) {
        last = PySequence_GetItem(queue, queued - 1);
        if (last == NULL)
            return -1;
        if (!PyObject_TypeCheck(last, &BatchStateType)) {
            Py_DECREF(last);
            return 0;
        }
        batch = (BatchState *)last;
    }
    int opened = 0;
    if (batch == NULL || batch->full || batch->buffer == NULL
        || !PyByteArray_CheckExact(batch->buffer) || batch->size + size > acc->batch_size
        || batch->count >= INT32_MAX) {
        /* the next batch, opened here when the Python path would open one (it takes the
         * rest: an empty batch takes any record, a record larger than max_record) */
        int closes = batch == NULL || batch->full
                     || (batch->size + size > acc->batch_size && batch->size != BATCH_OVERHEAD);
        if (!may_open || !closes || size + BATCH_OVERHEAD > acc->max_record || !can_open(acc)) {
            Py_XDECREF(last);
            return 0;
        }
        PyObject *next = open_batch(acc, queue, topic, partition, batch, ts);
        Py_XDECREF(last);
        if (next == NULL)
            return -1;
        last = next;
        batch = (BatchState *)last;
        opened = 1;
    }
    PyObject *buffer = batch->buffer;
    long long delta = batch->count, ts_delta;
    if (__builtin_sub_overflow(ts, batch->base_timestamp, &ts_delta)) {
        Py_DECREF(last); /* a timestamp delta past 64 bits: the Python path's business */
        return 0;     /* (never in a batch opened here: its base is this timestamp) */
    }
    /* the record as encode_record writes it: length, attributes, timestamp and offset
     * deltas, key, value, headers (a count of 0 when there are none) */
    Py_ssize_t key_size = key == Py_None ? 0 : PyBytes_GET_SIZE(key);
    Py_ssize_t value_size = value == Py_None ? 0 : PyBytes_GET_SIZE(value);
    unsigned char head[1 + 3 * 10], value_length[10], length[10];
    Py_ssize_t head_size = 1;
    head[0] = 0;
    head_size += write_varint(head + head_size, ts_delta);
    head_size += write_varint(head + head_size, delta);
    head_size += write_varint(head + head_size, key == Py_None ? -1 : (long long)key_size);
    Py_ssize_t value_length_size =
        write_varint(value_length, value == Py_None ? -1 : (long long)value_size);
    Py_ssize_t headers_size = headers == NULL ? 1 : headers->size;
    Py_ssize_t body_size = head_size + key_size + value_length_size + value_size + headers_size;
    Py_ssize_t length_size = write_varint(length, body_size);
    Py_ssize_t raw_size = length_size + body_size;
    Py_ssize_t end = PyByteArray_GET_SIZE(buffer);
    if (grow_buffer(buffer, end + raw_size, (Py_ssize_t)acc->batch_size) < 0) {
        if (opened)
            drop_opened(acc, queue, last);
        Py_DECREF(last);
        return -1;
    }
    PyObject *index = PyLong_FromLongLong(delta);
    if (index == NULL) {
        Py_SET_SIZE(buffer, end); /* the bytes added are not used */
        PyByteArray_AS_STRING(buffer)[end] = '\0';
        if (opened)
            drop_opened(acc, queue, last);
        Py_DECREF(last);
        return -1;
    }
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(buffer) + end;
    memcpy(out, length, length_size);
    out += length_size;
    memcpy(out, head, head_size);
    out += head_size;
    if (key_size > 0) {
        memcpy(out, PyBytes_AS_STRING(key), key_size);
        out += key_size;
    }
    memcpy(out, value_length, value_length_size);
    out += value_length_size;
    if (value_size > 0) {
        memcpy(out, PyBytes_AS_STRING(value), value_size);
        out += value_size;
    }
    if (headers == NULL)
        *out = 0; /* no headers */
    else
        memcpy(out, headers->data, headers_size);
    future->batch = Py_NewRef(last); /* a batch is its own BatchResult */
    future->index = index;
    future->timestamp = Py_NewRef(timestamp);
    /* from here on the record is in the batch: only the accounting follows */
    batch->count = delta + 1;
    batch->size += raw_size;
    if (ts > batch->max_timestamp)
        batch->max_timestamp = ts;
    batch->reserved += size;
    acc->used += size;
    /* RecordAccumulator._reserve's wake-up: a batch full, or one opened, unless wake_at
     * will have the sender look by its linger's end */
    int wake = 0;
    if (batch->size >= acc->batch_size) {
        batch->full = 1;
        wake = 1;
    }
    else if (opened) {
        wake = 1;
        if (!acc->wake_pending && acc->wake_at != NULL && acc->wake_at != Py_None
            && acc->linger_ms > 0 && acc->flushes == 0 && !acc->closed
            && PySequence_Size(queue) == 1) { /* else the one before it is full */
            PyObject *at = PyFloat_FromDouble(batch->created_ms + acc->linger_ms);
            PyObject *told = at == NULL ? NULL : PyObject_CallOneArg(acc->wake_at, at);
            Py_XDECREF(at);
            int later = told == NULL ? -1 : PyObject_IsTrue(told);
            Py_XDECREF(told);
            if (later < 0) { /* the record is in its batch, as in the Python path */
                Py_DECREF(last);
                return -1;
            }
            if (later)
                wake = 0;
        }
    }
    if (wake) {
        wake = !acc->wake_pending;
        acc->wake_pending = 1;
    }
    *wake_out = wake;
    *batch_out = last;
    return 1;
}

/* Whether `lock` (a threading.Lock) is free and this append may do without it: the GIL,
 * held from here to the end of append_locked (which lets no other thread run), then
 * keeps out every other thread, and one in a critical section would hold the lock. Only
 * for a partition whose queue is remembered (its look-up compares pointers and indexes a
 * list, no key's __eq__ runs). 1 when free, 0 when held (or another build), -1 on an error. */
static int
lock_is_free(AccumulatorState *acc, PyObject *lock, PyObject *topic, PyObject *partition)
{
#ifdef Py_GIL_DISABLED
    return 0;
#else
    PyObject *queue = remembered_queue(acc, acc->queues, topic, partition);
    if (queue == NULL || !PyDeque_CheckExact_(queue))
        return 0;
    PyObject *held = PyObject_CallMethodNoArgs(lock, str_locked);
    if (held == NULL)
        return -1;
    int free = held == Py_False;
    Py_DECREF(held);
    return free;
#endif
}

/* append_open's work: the future (a new reference), None when the Python path must
 * take the record, NULL on an error. A delivery callback (`on_delivery`, or None) is
 * registered on the batch's result under the lock, as RecordAccumulator.append does: the
 * batch cannot be drained, so not completed, before its record's callback is there. */
static PyObject *
add_to_open_batch(AccumulatorState *acc, PyObject *topic, PyObject *partition,
                  PyObject *timestamp, PyObject *key, PyObject *value, const Section *headers,
                  PyObject *on_delivery)
{
    if (future_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "append_open: bind() was not called");
        return NULL;
    }
    Py_ssize_t key_size = field_length(key), value_size = field_length(value);
    if (key_size < 0 || value_size < 0 || !PyLong_CheckExact(timestamp))
        Py_RETURN_NONE;
    long long ts = PyLong_AsLongLong(timestamp);
    if (ts == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE; /* past 64 bits: the Python path refuses it */
    }
    long long size = RECORD_OVERHEAD + (long long)key_size + (long long)value_size
                     + (headers == NULL ? 0 : headers->reserve);

    PyObject *lock = acc->lock;
    if (lock == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the accumulator has no lock");
        return NULL;
    }
    /* made first: allocating it may run the garbage collector, and with it finalizers
     * that let other threads run */
    PyTypeObject *type = (PyTypeObject *)future_type;
    PyObject *future = type->tp_alloc(type, 0);
    if (future == NULL)
        return NULL;
    Py_INCREF(lock);
    PyObject *batch = NULL;
    int wake = 0, status;
    /* registering a callback runs Python code, which the lock-free append must not */
    int free = on_delivery == Py_None ? lock_is_free(acc, lock, topic, partition) : 0;
    if (free < 0) {
        Py_DECREF(lock);
        Py_DECREF(future);
        return NULL;
    }
    status = 0;
    if (free) {
        status = append_locked(acc, topic, partition, timestamp, ts, key, value, headers, size,
                               0, (FutureState *)future, &batch, &wake);
    }
    if (status == 0) { /* under the lock, where the next batch may be opened */
        if (call_method0(lock, str_acquire) < 0) {
            Py_DECREF(lock);
            Py_DECREF(future);
            return NULL;
        }
        status = append_locked(acc, topic, partition, timestamp, ts, key, value, headers, size,
                               1, (FutureState *)future, &batch, &wake);
        if (status > 0 && on_delivery != Py_None) {
            /* as append's add_callback after batch.add: should it fail (no memory), the
             * record stays in its batch and the caller gets the error */
            PyObject *cargs[4] = {batch, future, on_delivery, Py_True};
            PyObject *r = PyObject_VectorcallMethod(str_add_callback, cargs,
                                                    4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            if (r == NULL)
                status = -1;
            Py_XDECREF(r);
        }
        PyObject *exc_type, *exc_value, *exc_tb;
        PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
        int released = call_method0(lock, str_release);
        if (exc_type != NULL) {
            if (released < 0)
                PyErr_Clear();
            PyErr_Restore(exc_type, exc_value, exc_tb);
        }
        else if (released < 0)
            status = -1;
    }
    Py_DECREF(lock);
    if (status <= 0) {
        Py_XDECREF(batch);
        Py_DECREF(future); /* unused: its fields are unset */
        if (status < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    Py_DECREF(batch);
    PyObject *wakeup = acc->wakeup;
    if (wake && wakeup != NULL && wakeup != Py_None) {
        Py_INCREF(wakeup);
        PyObject *r = PyObject_CallNoArgs(wakeup);
        Py_DECREF(wakeup);
        if (r == NULL) {
            Py_DECREF(future);
            return NULL;
        }
        Py_DECREF(r);
    }
    return future;
}

static PyObject *
accumulator_append_open(AccumulatorState *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 && nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "append_open(topic, partition, timestamp, key, value, "
                                         "on_delivery=None) takes 5 or 6 arguments");
        return NULL;
    }
    return add_to_open_batch(self, args[0], args[1], args[2], args[3], args[4], NULL,
                             nargs == 6 ? args[5] : Py_None);
}

static PyMethodDef accumulator_methods[] = {
    {"append_open", (PyCFunction)(void (*)(void))accumulator_append_open, METH_FASTCALL,
     "append_open(topic, partition, timestamp, key, value, on_delivery=None)\n"
     "--\n\n"
     "Add a record without headers to its partition's open batch: its RecordFuture,\n"
     "or None (nothing changed) when RecordAccumulator.append_plain must take it\n"
     "(or, with a delivery callback, RecordAccumulator.append)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef accumulator_members[] = {
    {"_lock", T_OBJECT_EX, offsetof(AccumulatorState, lock), 0,
     "The lock of the queues and the accounting."},
    {"_queues", T_OBJECT_EX, offsetof(AccumulatorState, queues), 0,
     "(topic, partition) -> deque of ProducerBatch."},
    {"wakeup", T_OBJECT, offsetof(AccumulatorState, wakeup), 0,
     "Called (outside the lock) when the sender has something new to look at."},
    {"_closed", T_BOOL, offsetof(AccumulatorState, closed), 0, "Whether records are refused."},
    {"_wake_pending", T_BOOL, offsetof(AccumulatorState, wake_pending), 0,
     "Whether the sender was woken and has not looked yet."},
    {"clock", T_OBJECT, offsetof(AccumulatorState, clock), 0, "() -> now, in ms."},
    {"_keys", T_OBJECT, offsetof(AccumulatorState, keys), 0,
     "(topic, partition) -> itself: the key a partition's batches share."},
    {"_incomplete", T_OBJECT, offsetof(AccumulatorState, incomplete), 0,
     "The batches not yet acknowledged or failed."},
    {"wake_at", T_OBJECT, offsetof(AccumulatorState, wake_at), 0,
     "Told the end of a new batch's linger (see RecordAccumulator), or None."},
    {"_batch_type", T_OBJECT, offsetof(AccumulatorState, batch_type), 0,
     "The class of the batches opened (ProducerBatch)."},
    {"linger_ms", T_DOUBLE, offsetof(AccumulatorState, linger_ms), 0, "linger.ms."},
    {NULL},
};

static PyGetSetDef accumulator_getset[] = {
    INT_FIELD("_used", AccumulatorState, used,
              "Bytes of records accepted and not yet acknowledged or failed."),
    INT_FIELD("buffer_memory", AccumulatorState, buffer_memory, "buffer.memory: the bound of _used."),
    INT_FIELD("batch_size", AccumulatorState, batch_size, "batch.size: a batch this large is full."),
    INT_FIELD("compression", AccumulatorState, compression, "The batches' compression codec id."),
    INT_FIELD("_flushes", AccumulatorState, flushes, "Flushes in progress."),
    INT_FIELD("_max_record", AccumulatorState, max_record,
              "The largest record (in its batch): min(buffer.memory, max.request.size)."),
    {NULL},
};

static PyTypeObject AccumulatorStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kafkette.producer._accumulate.AccumulatorState",
    .tp_doc = "The append state of a RecordAccumulator (its base class).",
    .tp_basicsize = sizeof(AccumulatorState),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)accumulator_dealloc,
    .tp_traverse = (traverseproc)accumulator_traverse,
    .tp_clear = (inquiry)accumulator_clear,
    .tp_members = accumulator_members,
    .tp_methods = accumulator_methods,
    .tp_getset = accumulator_getset,
};

/* ---- RouteState: what the common send needs of its producer */

typedef struct {
    PyObject_HEAD
    PyObject *metadata;    /* the client's metadata cache (its .snapshot) */
    PyObject *accumulator; /* AccumulatorState */
    PyObject *sticky;      /* StickyPartitioner */
    PyObject *keyed;       /* keyed_partition(key, count) */
    PyObject *snapshot;    /* the snapshot `counts` was read from, or None */
    PyObject *counts;      /* dict: topic -> partition count */
    PyObject *transaction; /* the partitions noted for the open transaction, or None */
    char plain;
    char prepared;
    char ignore_keys;
} RouteState;

static int
route_traverse(RouteState *self, visitproc visit, void *arg)
{
    Py_VISIT(self->metadata);
    Py_VISIT(self->accumulator);
    Py_VISIT(self->sticky);
    Py_VISIT(self->keyed);
    Py_VISIT(self->snapshot);
    Py_VISIT(self->counts);
    Py_VISIT(self->transaction);
    return 0;
}

static int
route_clear(RouteState *self)
{
    Py_CLEAR(self->metadata);
    Py_CLEAR(self->accumulator);
    Py_CLEAR(self->sticky);
    Py_CLEAR(self->keyed);
    Py_CLEAR(self->snapshot);
    Py_CLEAR(self->counts);
    Py_CLEAR(self->transaction);
    return 0;
}

static void
route_dealloc(RouteState *self)
{
    PyObject_GC_UnTrack(self);
    route_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
route_init(RouteState *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"metadata", "accumulator", "sticky", "keyed_partition",
                            "plain", "ignore_keys", NULL};
    PyObject *metadata, *accumulator, *sticky, *keyed, *plain, *ignore_keys;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!OOO!O!:RouteState", names, &metadata,
                                     &AccumulatorStateType, &accumulator, &sticky, &keyed,
                                     &PyBool_Type, &plain, &PyBool_Type, &ignore_keys))
        return -1;
    PyObject *counts = PyDict_New();
    if (counts == NULL)
        return -1;
    Py_XSETREF(self->metadata, Py_NewRef(metadata));
    Py_XSETREF(self->accumulator, Py_NewRef(accumulator));
    Py_XSETREF(self->sticky, Py_NewRef(sticky));
    Py_XSETREF(self->keyed, Py_NewRef(keyed));
    Py_XSETREF(self->snapshot, Py_NewRef(Py_None));
    Py_XSETREF(self->counts, counts);
    self->plain = plain == Py_True;
    self->ignore_keys = ignore_keys == Py_True;
    return 0;
}

/* int(time.time() * 1000), computed as Python computes it */
static PyObject *
now_ms(void)
{
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    long long ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    return PyLong_FromLongLong((long long)((double)ns / 1e9 * 1000.0));
}

/* The partition of a plain record once its topic's partition count is known;
 * a new reference, NULL on an error. */
static PyObject *
choose_partition(RouteState *self, PyObject *topic, PyObject *key, PyObject *count_obj,
                 Py_ssize_t value_size)
{
    long count = PyLong_AsLong(count_obj);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count == 1)
        return PyLong_FromLong(0);
    if (key != Py_None && !self->ignore_keys) {
        PyObject *args[2] = {key, count_obj};
        return PyObject_Vectorcall(self->keyed, args, 2, NULL);
    }
    PyObject *size = PyLong_FromSsize_t(RECORD_OVERHEAD + value_size);
    if (size == NULL)
        return NULL;
    PyObject *args[4] = {self->sticky, topic, count_obj, size};
    PyObject *partition = PyObject_VectorcallMethod(
        str_partition, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(size);
    return partition;
}

/* ---- keyed records: Kafka's murmur2 (32-bit MurmurHash2, seeded 0x9747b28c, the
 * 4-byte blocks read little-endian), as kafkette.producer.partitioner computes it */

static uint32_t
kafka_murmur2(const unsigned char *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t blocks = length / 4;
    for (Py_ssize_t i = 0; i < blocks; i++) {
        const unsigned char *b = data + 4 * i;
        uint32_t k = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16
                     | (uint32_t)b[3] << 24;
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * blocks;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* keyed_partition(key, count): (murmur2(key) & 0x7fffffff) % count */
static PyObject *
keyed_partition(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "keyed_partition(key, count) takes 2 arguments");
        return NULL;
    }
    long count = PyLong_AsLong(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count <= 0) {
        PyErr_Format(PyExc_ValueError, "a topic has at least one partition, not %ld", count);
        return NULL;
    }
    uint32_t h;
    if (PyBytes_CheckExact(args[0])) {
        h = kafka_murmur2((const unsigned char *)PyBytes_AS_STRING(args[0]),
                          PyBytes_GET_SIZE(args[0]));
    }
    else {
        Py_buffer view;
        if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
            return NULL;
        h = kafka_murmur2((const unsigned char *)view.buf, view.len);
        PyBuffer_Release(&view);
    }
    return PyLong_FromLong((long)((h & 0x7fffffffu) % (unsigned long)count));
}

/* RouteState.send (`prepared` 0) and send_prepared (1): the future, None for the general
 * path, NULL on an error */
static PyObject *
route_send_record(RouteState *self, PyObject *topic, PyObject *value, PyObject *key,
                  PyObject *timestamp, PyObject *explicit, PyObject *on_delivery,
                  PyObject *headers, int prepared)
{
    if (!(prepared ? self->prepared : self->plain) || self->metadata == NULL
        || self->accumulator == NULL || self->sticky == NULL || self->keyed == NULL
        || self->counts == NULL)
        Py_RETURN_NONE; /* plain is false until __init__ sets the rest */
    Py_ssize_t key_size = field_length(key), value_size = field_length(value);
    if (key_size < 0 || value_size < 0)
        Py_RETURN_NONE;
    Section section;
    int encoded = encode_section(headers, &section);
    if (encoded <= 0) {
        if (encoded < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    const Section *with_headers = section.size > 1 ? &section : NULL;
    PyObject *partition = NULL, *future = NULL;
    if (timestamp == Py_None) {
        timestamp = now_ms();
        if (timestamp == NULL)
            goto released;
    }
    else {
        int overflow = 0;
        if (!PyLong_CheckExact(timestamp)) {
            future = Py_NewRef(Py_None);
            goto released;
        }
        long long ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow);
        if (ts == -1 && PyErr_Occurred())
            goto released;
        if (ts < 0 || overflow < 0) {
            future = Py_NewRef(Py_None);
            goto released;
        }
        Py_INCREF(timestamp);
    }
    PyObject *snapshot = PyObject_GetAttr(self->metadata, str_snapshot);
    if (snapshot == NULL)
        goto done;
    int current = snapshot == self->snapshot;
    Py_DECREF(snapshot);
    if (!current) {
        future = Py_NewRef(Py_None); /* route() refreshes the cached partition counts */
        goto done;
    }
    PyObject *count = PyDict_GetItemWithError(self->counts, topic); /* borrowed */
    if (count == NULL) {
        if (!PyErr_Occurred())
            future = Py_NewRef(Py_None);
        goto done;
    }
    if (explicit != Py_None) {
        /* a partition the topic has; anything else (not an int, a bool, out of range)
         * is for the general path to refuse, or to wait for in the metadata */
        long chosen = PyLong_CheckExact(explicit) ? PyLong_AsLong(explicit) : -1;
        long known = PyLong_AsLong(count);
        if ((chosen == -1 || known == -1) && PyErr_Occurred())
            PyErr_Clear();
        if (chosen < 0 || chosen >= known) {
            future = Py_NewRef(Py_None);
            goto done;
        }
        partition = Py_NewRef(explicit);
    }
    else {
        Py_INCREF(count);
        partition = choose_partition(self, topic, key, count, value_size);
        Py_DECREF(count);
        if (partition == NULL)
            goto done;
    }
    if (prepared && self->transaction != NULL && self->transaction != Py_None) {
        /* a transactional record: only to a partition already noted for the transaction
         * (the general path adds the others, and checks the transaction again) */
        PyObject *tp = PyTuple_Pack(2, topic, partition);
        if (tp == NULL)
            goto done;
        int noted = PySet_Contains(self->transaction, tp);
        Py_DECREF(tp);
        if (noted <= 0) {
            if (noted == 0)
                future = Py_NewRef(Py_None);
            goto done;
        }
    }
    PyObject *acc = self->accumulator;
    future = add_to_open_batch((AccumulatorState *)acc, topic, partition, timestamp, key, value,
                               with_headers, on_delivery);
    if (future == Py_None && on_delivery == Py_None) {
        /* a batch to open, or no room: the accumulator's own method (a record with a
         * callback goes the general way, once a batch), given the headers encoded */
        Py_DECREF(future);
        if (with_headers == NULL) {
            PyObject *margs[6] = {acc, topic, partition, timestamp, key, value};
            future = PyObject_VectorcallMethod(str_append_plain, margs,
                                               6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        }
        else {
            PyObject *raw = PyBytes_FromStringAndSize((const char *)section.data, section.size);
            PyObject *reserve = raw == NULL ? NULL : PyLong_FromLongLong(section.reserve);
            future = NULL;
            if (reserve != NULL) {
                PyObject *margs[8] = {acc, topic, partition, timestamp, key, value, raw, reserve};
                future = PyObject_VectorcallMethod(str_append_plain, margs,
                                                   8 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            }
            Py_XDECREF(raw);
            Py_XDECREF(reserve);
        }
    }
done:
    Py_DECREF(timestamp);
    Py_XDECREF(partition);
released:
    section_release(&section);
    return future;
}

static PyObject *
route_send(RouteState *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 4 || nargs > 7) {
        PyErr_SetString(PyExc_TypeError, "send(topic, value, key, timestamp, partition=None, "
                                         "on_delivery=None, headers=None) takes 4 to 7 arguments");
        return NULL;
    }
    return route_send_record(self, args[0], args[1], args[2], args[3],
                             nargs >= 5 ? args[4] : Py_None, nargs >= 6 ? args[5] : Py_None,
                             nargs == 7 ? args[6] : Py_None, 0);
}

static PyObject *
route_send_prepared(RouteState *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "send_prepared(topic, value, key, timestamp, partition, "
                                         "on_delivery, headers) takes 7 arguments");
        return NULL;
    }
    return route_send_record(self, args[0], args[1], args[2], args[3], args[4], args[5],
                             args[6], 1);
}

static PyObject *
route_get_counts(RouteState *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->counts != NULL ? self->counts : Py_None);
}

static int
route_set_counts(RouteState *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL || !PyDict_CheckExact(value)) {
        PyErr_Format(PyExc_TypeError, "counts must be a dict, not %s",
                     value == NULL ? "deleted" : Py_TYPE(value)->tp_name);
        return -1;
    }
    Py_XSETREF(self->counts, Py_NewRef(value));
    return 0;
}

static PyObject *
route_get_accumulator(RouteState *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->accumulator != NULL ? self->accumulator : Py_None);
}

static int
route_set_accumulator(RouteState *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL || !PyObject_TypeCheck(value, &AccumulatorStateType)) {
        PyErr_Format(PyExc_TypeError, "accumulator must be an AccumulatorState, not %s",
                     value == NULL ? "deleted" : Py_TYPE(value)->tp_name);
        return -1;
    }
    Py_XSETREF(self->accumulator, Py_NewRef(value));
    return 0;
}

static PyMethodDef route_methods[] = {
    {"send", (PyCFunction)(void (*)(void))route_send, METH_FASTCALL,
     "send(topic, value, key, timestamp, partition=None, on_delivery=None, headers=None)\n"
     "--\n\n"
     "Queue a record: its RecordFuture, or None (nothing changed) when the send must go\n"
     "the general way."},
    {"send_prepared", (PyCFunction)(void (*)(void))route_send_prepared, METH_FASTCALL,
     "send_prepared(topic, value, key, timestamp, partition, on_delivery, headers)\n"
     "--\n\n"
     "send for a producer with serializers or transactions, once its caller serialized\n"
     "the record and checked the transaction (prepared must be true): to a partition\n"
     "noted in transaction only, when that is a set."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef route_members[] = {
    {"metadata", T_OBJECT_EX, offsetof(RouteState, metadata), 0,
     "The client's metadata cache (its snapshot says whether counts is current)."},
    {"sticky", T_OBJECT_EX, offsetof(RouteState, sticky), 0,
     "The sticky partitioner of records without a key (or with keys ignored)."},
    {"keyed_partition", T_OBJECT_EX, offsetof(RouteState, keyed), 0,
     "keyed_partition(key, count): the partition of a keyed record."},
    {"snapshot", T_OBJECT, offsetof(RouteState, snapshot), 0,
     "The metadata snapshot counts was read from, or None."},
    {"plain", T_BOOL, offsetof(RouteState, plain), 0,
     "Whether send may take records (no transactions, serializers or user partitioner)."},
    {"prepared", T_BOOL, offsetof(RouteState, prepared), 0,
     "Whether send_prepared may take records (no user partitioner or telemetry)."},
    {"ignore_keys", T_BOOL, offsetof(RouteState, ignore_keys), 0,
     "partitioner.ignore.keys: keyed records go to the sticky partition too."},
    {NULL},
};

static PyObject *
route_get_transaction(RouteState *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->transaction != NULL ? self->transaction : Py_None);
}

static int
route_set_transaction(RouteState *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL || (value != Py_None && !PySet_CheckExact(value))) {
        PyErr_Format(PyExc_TypeError, "transaction must be a set or None, not %s",
                     value == NULL ? "deleted" : Py_TYPE(value)->tp_name);
        return -1;
    }
    Py_XSETREF(self->transaction, Py_NewRef(value));
    return 0;
}

static PyGetSetDef route_getset[] = {
    {"transaction", (getter)route_get_transaction, (setter)route_set_transaction,
     "The partitions noted for the open transaction, which send_prepared may append to\n"
     "(a set), or None.", NULL},
    {"counts", (getter)route_get_counts, (setter)route_set_counts,
     "topic -> partition count, read from snapshot.", NULL},
    {"accumulator", (getter)route_get_accumulator, (setter)route_set_accumulator,
     "The producer's RecordAccumulator.", NULL},
    {NULL},
};

static PyTypeObject RouteStateType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kafkette.producer._accumulate.RouteState",
    .tp_doc = "RouteState(metadata, accumulator, sticky, keyed_partition, plain, ignore_keys):\n"
              "what the common send of a producer needs (held by ProducerCore).",
    .tp_basicsize = sizeof(RouteState),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)route_init,
    .tp_dealloc = (destructor)route_dealloc,
    .tp_traverse = (traverseproc)route_traverse,
    .tp_clear = (inquiry)route_clear,
    .tp_members = route_members,
    .tp_methods = route_methods,
    .tp_getset = route_getset,
};

/* ---- send_plain: the producers' call, core.routes.send(...) */

static PyObject *
send_plain(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "send_plain(core, topic, value, key, timestamp)");
        return NULL;
    }
    PyObject *routes = PyObject_GetAttr(args[0], str_routes);
    if (routes == NULL)
        return NULL;
    if (!Py_IS_TYPE(routes, &RouteStateType)) {
        PyErr_Format(PyExc_TypeError, "send_plain: the producer's routes is a %s, not a RouteState",
                     Py_TYPE(routes)->tp_name);
        Py_DECREF(routes);
        return NULL;
    }
    PyObject *future =
        route_send_record((RouteState *)routes, args[1], args[2], args[3], args[4], Py_None,
                          Py_None, Py_None, 0);
    Py_DECREF(routes);
    return future;
}

static PyObject *
bind(PyObject *Py_UNUSED(module), PyObject *future)
{
    if (!PyType_Check(future) || !PyType_IsSubtype((PyTypeObject *)future, &FutureStateType)) {
        PyErr_SetString(PyExc_TypeError, "bind: the future class must derive from FutureState");
        return NULL;
    }
    Py_XSETREF(future_type, Py_NewRef(future));
    Py_RETURN_NONE;
}

/* ---- the header of a drained batch without compression, written in place */

#define ATTRIBUTES_OFFSET 21
#define CRC_OFFSET 17
#define LOG_OVERHEAD 12

static PyObject *package_crc32c; /* crc32c.crc32c: the one CRC-32C implementation kafkette uses */

static void
put_be(unsigned char *out, unsigned long long value, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        out[i] = (unsigned char)(value & 0xff);
        value >>= 8;
    }
}

/* write_header(buffer, count, base_timestamp, max_timestamp, attributes, producer_id,
 * producer_epoch, base_sequence): True once the header and CRC are written; False, with
 * nothing written, for what the Python builder must take (a field out of range, a buffer
 * that is not a bytearray or has no room for the header), which raises the right error */
/* The header and CRC of a batch without compression written into `buffer`'s reserved
 * front: 1 when written, 0 (nothing written) for a field out of range or a buffer that
 * is not a bytearray or has no room for the header, -1 on an error. */
static int
write_header_fields(PyObject *buffer, long long count, long long base_timestamp,
                    long long max_timestamp, long long attributes, long long producer_id,
                    long long epoch, long long sequence)
{
    if (!PyByteArray_CheckExact(buffer))
        return 0;
    Py_ssize_t size = PyByteArray_GET_SIZE(buffer);
    if (size < BATCH_OVERHEAD || size - LOG_OVERHEAD > INT32_MAX || count < 1
        || count > INT32_MAX || attributes < INT16_MIN || attributes > INT16_MAX
        || epoch < INT16_MIN || epoch > INT16_MAX || sequence < INT32_MIN || sequence > INT32_MAX)
        return 0;
    Py_buffer view;
    if (PyObject_GetBuffer(buffer, &view, PyBUF_SIMPLE) < 0) /* no resize while the CRC runs */
        return -1;
    unsigned char *out = view.buf;
    put_be(out, 0, 8);                                      /* base offset */
    put_be(out + 8, (unsigned long long)(size - LOG_OVERHEAD), 4); /* batch length */
    put_be(out + 12, (unsigned long long)-1, 4);            /* no partition leader epoch */
    out[16] = 2;                                            /* magic */
    put_be(out + 21, (unsigned long long)attributes, 2);
    put_be(out + 23, (unsigned long long)(count - 1), 4);   /* last offset delta */
    put_be(out + 27, (unsigned long long)base_timestamp, 8);
    put_be(out + 35, (unsigned long long)max_timestamp, 8);
    put_be(out + 43, (unsigned long long)producer_id, 8);
    put_be(out + 51, (unsigned long long)epoch, 2);
    put_be(out + 53, (unsigned long long)sequence, 4);
    put_be(out + 57, (unsigned long long)count, 4);
    PyObject *tail = PyMemoryView_FromMemory((char *)out + ATTRIBUTES_OFFSET,
                                             size - ATTRIBUTES_OFFSET, PyBUF_READ);
    PyObject *crc = tail == NULL ? NULL : PyObject_CallOneArg(package_crc32c, tail);
    Py_XDECREF(tail);
    unsigned long value = crc == NULL ? 0 : PyLong_AsUnsignedLong(crc);
    Py_XDECREF(crc);
    if (crc == NULL || (value == (unsigned long)-1 && PyErr_Occurred())) {
        PyBuffer_Release(&view);
        return -1;
    }
    put_be(out + CRC_OFFSET, value & 0xffffffffUL, 4);
    PyBuffer_Release(&view);
    return 1;
}

/* write_header(buffer, count, base_timestamp, max_timestamp, attributes, producer_id,
 * producer_epoch, base_sequence): True once the header and CRC are written; False, with
 * nothing written, for what the Python builder must take (a field out of range, a buffer
 * that is not a bytearray or has no room for the header), which raises the right error */
static PyObject *
write_header(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "write_header(buffer, count, base_timestamp, max_timestamp, attributes, "
                        "producer_id, producer_epoch, base_sequence) takes 8 arguments");
        return NULL;
    }
    long long v[7];
    for (int i = 0; i < 7; i++) {
        if (!PyLong_CheckExact(args[i + 1]))
            Py_RETURN_FALSE;
        v[i] = PyLong_AsLongLong(args[i + 1]);
        if (v[i] == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
    }
    int written = write_header_fields(args[0], v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
    if (written < 0)
        return NULL;
    return PyBool_FromLong(written);
}

#define TRANSACTIONAL_MASK 0x10

/* build_plain(batch): ProducerBatch.build of a batch without compression, from its C
 * fields: its header written into its buffer, which becomes its data (True); False, with
 * nothing changed, for what build() must take (compressed, built already, a field out of
 * range). */
static PyObject *
build_plain(PyObject *Py_UNUSED(module), PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, &BatchStateType))
        Py_RETURN_FALSE;
    BatchState *batch = (BatchState *)arg;
    if (batch->compression != 0 || (batch->data != NULL && batch->data != Py_None)
        || batch->buffer == NULL)
        Py_RETURN_FALSE;
    int written = write_header_fields(
        batch->buffer, batch->count, batch->base_timestamp, batch->max_timestamp,
        batch->transactional ? TRANSACTIONAL_MASK : 0, batch->producer_id,
        batch->producer_epoch, batch->base_sequence);
    if (written < 0)
        return NULL;
    if (!written)
        Py_RETURN_FALSE;
    Py_XSETREF(batch->data, batch->buffer);
    batch->buffer = NULL;
    Py_RETURN_TRUE;
}

static PyMethodDef accumulate_methods[] = {
    {"keyed_partition", (PyCFunction)(void (*)(void))keyed_partition, METH_FASTCALL,
     "keyed_partition(key, count)\n"
     "--\n\n"
     "The partition of a keyed record among count: (murmur2(key) & 0x7fffffff) % count,\n"
     "as kafkette.producer.partitioner.keyed_partition (Java's client, librdkafka's\n"
     "murmur2_random)."},
    {"send_plain", (PyCFunction)(void (*)(void))send_plain, METH_FASTCALL,
     "send_plain(core, topic, value, key, timestamp)\n"
     "--\n\n"
     "core.routes.send(topic, value, key, timestamp): the record's RecordFuture, or None\n"
     "when the send must go the general way."},
    {"write_header", (PyCFunction)(void (*)(void))write_header, METH_FASTCALL,
     "write_header(buffer, count, base_timestamp, max_timestamp, attributes, producer_id,\n"
     "             producer_epoch, base_sequence)\n"
     "--\n\n"
     "Write the header and CRC of a batch without compression into the bytearray's\n"
     "reserved front (base offset 0, no partition leader epoch), as\n"
     "kafkette.protocol.records.default_records.build_reserved does: True; False, with\n"
     "nothing written, for a field out of range (for that function to refuse)."},
    {"build_plain", build_plain, METH_O,
     "build_plain(batch)\n"
     "--\n\n"
     "ProducerBatch.build of a batch without compression, from its fields: its header and\n"
     "CRC written into its buffer, which becomes its data (True); False, with nothing\n"
     "changed, for build() to take (compressed, built already, a field out of range)."},
    {"bind", bind, METH_O,
     "bind(RecordFuture)\n"
     "--\n\n"
     "The future class append_open makes (a subclass of FutureState)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef accumulate_module = {
    PyModuleDef_HEAD_INIT, "_accumulate",
    "The producer's append state and common append in C (see kafkette.producer.accumulator).",
    -1, accumulate_methods,
};

PyMODINIT_FUNC
PyInit__accumulate(void)
{
    str_acquire = PyUnicode_InternFromString("acquire");
    str_release = PyUnicode_InternFromString("release");
    str_locked = PyUnicode_InternFromString("locked");
    str_snapshot = PyUnicode_InternFromString("snapshot");
    str_partition = PyUnicode_InternFromString("partition");
    str_append_plain = PyUnicode_InternFromString("append_plain");
    str_routes = PyUnicode_InternFromString("routes");
    str_add_callback = PyUnicode_InternFromString("add_callback");
    str_append = PyUnicode_InternFromString("append");
    str_pop = PyUnicode_InternFromString("pop");
    if (str_acquire == NULL || str_release == NULL || str_locked == NULL || str_snapshot == NULL
        || str_partition == NULL || str_append_plain == NULL || str_routes == NULL
        || str_add_callback == NULL || str_append == NULL || str_pop == NULL)
        return NULL;
    PyObject *collections = PyImport_ImportModule("collections");
    if (collections == NULL)
        return NULL;
    deque_type = (PyTypeObject *)PyObject_GetAttrString(collections, "deque");
    Py_DECREF(collections);
    if (deque_type == NULL)
        return NULL;
    PyObject *package = PyImport_ImportModule("crc32c");
    if (package == NULL)
        return NULL;
    package_crc32c = PyObject_GetAttrString(package, "crc32c");
    Py_DECREF(package);
    if (package_crc32c == NULL)
        return NULL;
    if (PyType_Ready(&BatchStateType) < 0 || PyType_Ready(&AccumulatorStateType) < 0
        || PyType_Ready(&FutureStateType) < 0 || PyType_Ready(&RouteStateType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&accumulate_module);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "BatchState", (PyObject *)&BatchStateType) < 0
        || PyModule_AddObjectRef(module, "AccumulatorState", (PyObject *)&AccumulatorStateType) < 0
        || PyModule_AddObjectRef(module, "FutureState", (PyObject *)&FutureStateType) < 0
        || PyModule_AddObjectRef(module, "RouteState", (PyObject *)&RouteStateType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
