/*
 * The producer's most common append in C: a record without headers, callback
 * or explicit partition, added to its partition's open batch.
 *
 * append_open(accumulator, topic, partition, timestamp, key, value) does what
 * RecordAccumulator.append_plain does when the partition's last batch is open
 * and has room: under the accumulator's lock it checks buffer.memory, encodes
 * the record into the batch (with the record encoder bound below,
 * kafkette.protocol.records' C encode_record), updates the batch's size and
 * timestamps and the accounting, and returns the record's RecordFuture. In
 * every other case (no open batch, no room, the producer closed, a key or
 * value that is not bytes) it changes nothing and returns None, for the
 * Python method to do the same work (opening the next batch, waking the
 * sender, letting a sync producer's sender catch up) or to send the record
 * the general way.
 *
 * The objects are the Python classes' own instances: bind() is given the
 * classes, looks up the slot of each attribute used here by name and keeps
 * its offset, so this code reads and writes the same slots as the Python
 * code, under the same lock. A renamed slot fails bind() at import (the
 * tests import it), never later.
 */
#include "../_slots.h"

/* Slots of RecordAccumulator */
enum {
    A_LOCK,
    A_CLOSED,
    A_USED,
    A_BUFFER_MEMORY,
    A_QUEUES,
    A_BATCH_SIZE,
    A_WAKE_PENDING,
    A_WAKEUP,
    A_COUNT
};
static const char *accumulator_names[A_COUNT] = {
    "_lock",  "_closed", "_used",        "buffer_memory",    "_queues",
    "batch_size", "_wake_pending", "wakeup",
};

/* Slots of ProducerBatch */
enum { B_RECORDS, B_BASE_TIMESTAMP, B_MAX_TIMESTAMP, B_SIZE, B_RESERVED, B_FULL, B_RESULT, B_COUNT };
static const char *batch_names[B_COUNT] = {
    "records", "base_timestamp", "max_timestamp", "size", "reserved", "full", "result",
};

/* Slots of RecordFuture */
enum { F_BATCH, F_INDEX, F_TIMESTAMP, F_COUNT };
static const char *future_names[F_COUNT] = {"_batch", "_index", "_timestamp"};

/* Slots of ProducerCore */
enum { C_PLAIN, C_METADATA, C_SNAPSHOT, C_COUNTS, C_IGNORE_KEYS, C_STICKY, C_ACCUMULATOR, C_COUNT };
static const char *core_names[C_COUNT] = {
    "plain", "_metadata", "_snapshot", "_counts", "ignore_keys", "sticky", "accumulator",
};

static Py_ssize_t accumulator_slots[A_COUNT], batch_slots[B_COUNT], future_slots[F_COUNT];
static Py_ssize_t core_slots[C_COUNT];
static PyTypeObject *accumulator_type, *batch_type, *future_type, *core_type;
static PyObject *encode_record, *keyed_partition;
static PyObject *str_acquire, *str_release, *str_snapshot, *str_partition, *str_append_plain;

#define RECORD_OVERHEAD 21

/* An int slot's value into *out: 0, or -1 with an exception. */
static int
slot_int(PyObject *obj, Py_ssize_t offset, long long *out)
{
    if (slot_ll(obj, offset, out) == 0)
        return 0;
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "accumulator: an int slot holds something else");
    return -1;
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

/* Under the lock: add the record to the open batch. 1 when added (with *future
 * set), 0 when the Python path must take it, -1 on an error. */
static int
append_locked(PyObject *acc, PyObject *topic, PyObject *partition, PyObject *timestamp,
              long long ts, PyObject *key, PyObject *value, Py_ssize_t size,
              PyObject **batch_out, PyObject **future_out, int *wake_out)
{
    if (SLOT(acc, accumulator_slots[A_CLOSED]) != Py_False)
        return 0;
    long long used, buffer_memory, batch_size;
    if (slot_int(acc, accumulator_slots[A_USED], &used) < 0
        || slot_int(acc, accumulator_slots[A_BUFFER_MEMORY], &buffer_memory) < 0
        || slot_int(acc, accumulator_slots[A_BATCH_SIZE], &batch_size) < 0)
        return -1;
    if (used + size > buffer_memory)
        return 0;
    PyObject *queues = SLOT(acc, accumulator_slots[A_QUEUES]);
    if (queues == NULL || !PyDict_CheckExact(queues))
        return 0;
    PyObject *tp = PyTuple_Pack(2, topic, partition);
    if (tp == NULL)
        return -1;
    PyObject *queue = PyDict_GetItemWithError(queues, tp); /* borrowed */
    Py_DECREF(tp);
    if (queue == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_ssize_t queued = PySequence_Size(queue);
    if (queued <= 0)
        return queued < 0 ? -1 : 0;
    PyObject *batch = PySequence_GetItem(queue, queued - 1); /* new reference */
    if (batch == NULL)
        return -1;
    int status = 0;
    long long batch_bytes, base_ts, max_ts, reserved;
    PyObject *records = SLOT(batch, batch_slots[B_RECORDS]);
    if (Py_TYPE(batch) != batch_type || SLOT(batch, batch_slots[B_FULL]) != Py_False
        || records == NULL || !PyList_CheckExact(records))
        goto done;
    if (slot_int(batch, batch_slots[B_SIZE], &batch_bytes) < 0
        || slot_int(batch, batch_slots[B_BASE_TIMESTAMP], &base_ts) < 0
        || slot_int(batch, batch_slots[B_MAX_TIMESTAMP], &max_ts) < 0
        || slot_int(batch, batch_slots[B_RESERVED], &reserved) < 0) {
        status = -1;
        goto done;
    }
    if (batch_bytes + size > batch_size)
        goto done; /* the Python path closes this batch and opens the next */
    Py_ssize_t delta = PyList_GET_SIZE(records);
    PyObject *args[4];
    args[0] = PyLong_FromLongLong(ts - base_ts);
    args[1] = PyLong_FromSsize_t(delta);
    if (args[0] == NULL || args[1] == NULL) {
        Py_XDECREF(args[0]);
        Py_XDECREF(args[1]);
        status = -1;
        goto done;
    }
    args[2] = key;
    args[3] = value;
    PyObject *raw = PyObject_Vectorcall(encode_record, args, 4, NULL);
    Py_DECREF(args[0]);
    Py_DECREF(args[1]);
    if (raw == NULL) {
        status = -1;
        goto done;
    }
    if (!PyBytes_CheckExact(raw)) { /* None: what only the Python encoder handles */
        Py_DECREF(raw);
        goto done;
    }
    Py_ssize_t raw_size = PyBytes_GET_SIZE(raw);
    PyObject *future = future_type->tp_alloc(future_type, 0);
    PyObject *index = PyLong_FromSsize_t(delta);
    if (future == NULL || index == NULL || PyList_Append(records, raw) < 0) {
        Py_DECREF(raw);
        Py_XDECREF(future);
        Py_XDECREF(index);
        status = -1;
        goto done;
    }
    Py_DECREF(raw);
    /* from here on the record is in the batch: only the accounting follows */
    PyObject *result = SLOT(batch, batch_slots[B_RESULT]);
    Py_XINCREF(result);
    slot_set(future, future_slots[F_BATCH], result);
    slot_set(future, future_slots[F_INDEX], index);
    Py_INCREF(timestamp);
    slot_set(future, future_slots[F_TIMESTAMP], timestamp);
    if (ts > max_ts) {
        Py_INCREF(timestamp);
        slot_set(batch, batch_slots[B_MAX_TIMESTAMP], timestamp);
    }
    batch_bytes += raw_size;
    int wake = 0;
    if (slot_set_ll(batch, batch_slots[B_SIZE], batch_bytes) < 0
        || slot_set_ll(batch, batch_slots[B_RESERVED], reserved + size) < 0
        || slot_set_ll(acc, accumulator_slots[A_USED], used + size) < 0) {
        Py_DECREF(future);
        status = -1;
        goto done;
    }
    if (batch_bytes >= batch_size) {
        Py_INCREF(Py_True);
        slot_set(batch, batch_slots[B_FULL], Py_True);
        wake = SLOT(acc, accumulator_slots[A_WAKE_PENDING]) != Py_True;
        Py_INCREF(Py_True);
        slot_set(acc, accumulator_slots[A_WAKE_PENDING], Py_True);
    }
    *wake_out = wake;
    *future_out = future;
    *batch_out = batch;
    return 1;
done:
    Py_DECREF(batch);
    return status;
}

/* append_open's work: the future (a new reference), None when the Python path must
 * take the record, NULL on an error. `acc` is a RecordAccumulator. */
static PyObject *
add_to_open_batch(PyObject *acc, PyObject *topic, PyObject *partition, PyObject *timestamp,
                  PyObject *key, PyObject *value)
{
    Py_ssize_t key_size = field_length(key), value_size = field_length(value);
    if (key_size < 0 || value_size < 0 || !PyLong_CheckExact(timestamp))
        Py_RETURN_NONE;
    long long ts = PyLong_AsLongLong(timestamp);
    if (ts == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE; /* past 64 bits: the Python path refuses it */
    }
    Py_ssize_t size = RECORD_OVERHEAD + key_size + value_size;

    PyObject *lock = SLOT(acc, accumulator_slots[A_LOCK]);
    if (lock == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the accumulator has no lock");
        return NULL;
    }
    Py_INCREF(lock);
    if (call_method0(lock, str_acquire) < 0) {
        Py_DECREF(lock);
        return NULL;
    }
    PyObject *batch = NULL, *future = NULL;
    int wake = 0;
    int status = append_locked(acc, topic, partition, timestamp, ts, key, value, size, &batch,
                               &future, &wake);
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    int released = call_method0(lock, str_release);
    Py_DECREF(lock);
    if (exc_type != NULL) {
        if (released < 0)
            PyErr_Clear();
        PyErr_Restore(exc_type, exc_value, exc_tb);
    }
    if (status < 0 || released < 0) {
        Py_XDECREF(batch);
        Py_XDECREF(future);
        return NULL;
    }
    if (status == 0)
        Py_RETURN_NONE;

    PyObject *wakeup = SLOT(acc, accumulator_slots[A_WAKEUP]);
    if (wake && wakeup != NULL && wakeup != Py_None) {
        PyObject *r = PyObject_CallNoArgs(wakeup);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    Py_DECREF(batch);
    return future;
fail:
    Py_DECREF(batch);
    Py_DECREF(future);
    return NULL;
}

static PyObject *
append_open(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "append_open(accumulator, topic, partition, timestamp, key, value)");
        return NULL;
    }
    if (accumulator_type == NULL || Py_TYPE(args[0]) != accumulator_type) {
        PyErr_SetString(PyExc_TypeError, "append_open: not a bound RecordAccumulator");
        return NULL;
    }
    return add_to_open_batch(args[0], args[1], args[2], args[3], args[4], args[5]);
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

/* The partition of a plain record once its topic's partition count is known
 * (ProducerCore.append_plain's choice); a new reference, NULL on an error. */
static PyObject *
choose_partition(PyObject *core, PyObject *topic, PyObject *key, PyObject *count_obj,
                 Py_ssize_t value_size)
{
    long count = PyLong_AsLong(count_obj);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (count == 1)
        return PyLong_FromLong(0);
    if (key != Py_None && SLOT(core, core_slots[C_IGNORE_KEYS]) != Py_True) {
        PyObject *args[2] = {key, count_obj};
        return PyObject_Vectorcall(keyed_partition, args, 2, NULL);
    }
    PyObject *sticky = SLOT(core, core_slots[C_STICKY]);
    PyObject *size = PyLong_FromSsize_t(RECORD_OVERHEAD + value_size);
    if (sticky == NULL || size == NULL) {
        Py_XDECREF(size);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "the producer has no sticky partitioner");
        return NULL;
    }
    PyObject *args[4] = {sticky, topic, count_obj, size};
    PyObject *partition = PyObject_VectorcallMethod(
        str_partition, args, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(size);
    return partition;
}

static PyObject *
send_plain(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "send_plain(core, topic, value, key, timestamp)");
        return NULL;
    }
    PyObject *core = args[0], *topic = args[1], *value = args[2], *key = args[3];
    PyObject *timestamp = args[4];
    if (core_type == NULL || Py_TYPE(core) != core_type) {
        PyErr_SetString(PyExc_TypeError, "send_plain: not a bound ProducerCore");
        return NULL;
    }
    if (SLOT(core, core_slots[C_PLAIN]) != Py_True)
        Py_RETURN_NONE;
    Py_ssize_t key_size = field_length(key), value_size = field_length(value);
    if (key_size < 0 || value_size < 0)
        Py_RETURN_NONE;
    if (timestamp == Py_None) {
        timestamp = now_ms();
        if (timestamp == NULL)
            return NULL;
    }
    else {
        int overflow = 0;
        if (!PyLong_CheckExact(timestamp))
            Py_RETURN_NONE;
        long long ts = PyLong_AsLongLongAndOverflow(timestamp, &overflow);
        if (ts == -1 && PyErr_Occurred())
            return NULL;
        if (ts < 0 || overflow < 0)
            Py_RETURN_NONE;
        Py_INCREF(timestamp);
    }
    PyObject *partition = NULL, *future = NULL;
    PyObject *metadata = SLOT(core, core_slots[C_METADATA]);
    PyObject *counts = SLOT(core, core_slots[C_COUNTS]);
    if (metadata == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the producer has no metadata cache");
        goto done;
    }
    PyObject *snapshot = PyObject_GetAttr(metadata, str_snapshot);
    if (snapshot == NULL)
        goto done;
    int current = snapshot == SLOT(core, core_slots[C_SNAPSHOT]);
    Py_DECREF(snapshot);
    if (!current || counts == NULL || !PyDict_CheckExact(counts)) {
        future = Py_NewRef(Py_None); /* route() refreshes the cached partition counts */
        goto done;
    }
    PyObject *count = PyDict_GetItemWithError(counts, topic); /* borrowed */
    if (count == NULL) {
        if (!PyErr_Occurred())
            future = Py_NewRef(Py_None);
        goto done;
    }
    Py_INCREF(count);
    partition = choose_partition(core, topic, key, count, value_size);
    Py_DECREF(count);
    if (partition == NULL)
        goto done;
    PyObject *acc = SLOT(core, core_slots[C_ACCUMULATOR]);
    if (acc == NULL || Py_TYPE(acc) != accumulator_type) {
        PyErr_SetString(PyExc_TypeError, "send_plain: the producer's accumulator is not bound");
        goto done;
    }
    future = add_to_open_batch(acc, topic, partition, timestamp, key, value);
    if (future == Py_None) { /* a batch to open, or no room: the accumulator's own method */
        Py_DECREF(future);
        PyObject *margs[6] = {acc, topic, partition, timestamp, key, value};
        future = PyObject_VectorcallMethod(str_append_plain, margs,
                                           6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    }
done:
    Py_DECREF(timestamp);
    Py_XDECREF(partition);
    return future;
}

static PyObject *
bind(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyTypeObject *acc, *batch, *future;
    PyObject *encoder;
    if (!PyArg_ParseTuple(args, "O!O!O!O:bind", &PyType_Type, &acc, &PyType_Type, &batch,
                          &PyType_Type, &future, &encoder))
        return NULL;
    if (find_slots(acc, accumulator_names, A_COUNT, accumulator_slots) < 0
        || find_slots(batch, batch_names, B_COUNT, batch_slots) < 0
        || find_slots(future, future_names, F_COUNT, future_slots) < 0)
        return NULL;
    Py_INCREF(acc);
    Py_INCREF(batch);
    Py_INCREF(future);
    Py_INCREF(encoder);
    Py_XSETREF(accumulator_type, acc);
    Py_XSETREF(batch_type, batch);
    Py_XSETREF(future_type, future);
    Py_XSETREF(encode_record, encoder);
    Py_RETURN_NONE;
}

static PyObject *
bind_core(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyTypeObject *core;
    PyObject *partitioner;
    if (!PyArg_ParseTuple(args, "O!O:bind_core", &PyType_Type, &core, &partitioner))
        return NULL;
    if (find_slots(core, core_names, C_COUNT, core_slots) < 0)
        return NULL;
    Py_INCREF(core);
    Py_INCREF(partitioner);
    Py_XSETREF(core_type, core);
    Py_XSETREF(keyed_partition, partitioner);
    Py_RETURN_NONE;
}

static PyMethodDef accumulate_methods[] = {
    {"append_open", (PyCFunction)(void (*)(void))append_open, METH_FASTCALL,
     "append_open(accumulator, topic, partition, timestamp, key, value)\n"
     "--\n\n"
     "Add a record without headers to its partition's open batch: its RecordFuture,\n"
     "or None (nothing changed) when the Python path must take it."},
    {"send_plain", (PyCFunction)(void (*)(void))send_plain, METH_FASTCALL,
     "send_plain(core, topic, value, key, timestamp)\n"
     "--\n\n"
     "ProducerCore.append_plain: the record's RecordFuture, or None when the send\n"
     "must go the general way."},
    {"bind_core", bind_core, METH_VARARGS,
     "bind_core(ProducerCore, keyed_partition)\n"
     "--\n\n"
     "Find the slots send_plain uses in ProducerCore; raises if one is missing."},
    {"bind", bind, METH_VARARGS,
     "bind(RecordAccumulator, ProducerBatch, RecordFuture, encode_record)\n"
     "--\n\n"
     "Find the slots append_open uses in these classes; raises if one is missing."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef accumulate_module = {
    PyModuleDef_HEAD_INIT, "_accumulate",
    "The producer's common append in C (see kafkette.producer.accumulator).", -1,
    accumulate_methods,
};

PyMODINIT_FUNC
PyInit__accumulate(void)
{
    str_acquire = PyUnicode_InternFromString("acquire");
    str_release = PyUnicode_InternFromString("release");
    str_snapshot = PyUnicode_InternFromString("snapshot");
    str_partition = PyUnicode_InternFromString("partition");
    str_append_plain = PyUnicode_InternFromString("append_plain");
    if (str_acquire == NULL || str_release == NULL || str_snapshot == NULL
        || str_partition == NULL || str_append_plain == NULL)
        return NULL;
    return PyModule_Create(&accumulate_module);
}
