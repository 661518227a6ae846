"""Flink's types in savepoints, read and written: serializer snapshots (:mod:`.snapshots_read`,
:mod:`.snapshots_write`; the class names in :mod:`.classes`), the values of Kryo
(:mod:`.kryo_read`, :mod:`.kryo_write`), SQL RowData (:mod:`.rowdata_read`) and PyFlink
(:mod:`.pyflink_read`, :mod:`.pyflink_write`), the types users declare (:mod:`.declared_read`,
:mod:`.declared_write`) and the Java hash codes of keys (:mod:`.key_hash`)."""
