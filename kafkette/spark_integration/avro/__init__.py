"""Registry-framed Avro values as Spark columns: ``valueFormat=avro`` (docs/schemas.md).

:mod:`.types` maps Avro schemas to Spark types as Spark's ``from_avro`` does;
:mod:`.options` reads the data source's Avro options and looks the schemas up on
the driver; :mod:`.values` decodes and encodes the ``value`` column on the
executors. Needs the ``avro`` extra (fastavro) besides ``spark``.
"""
