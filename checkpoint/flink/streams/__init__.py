"""Flink's state streams, read and written: the state meta infos of their headers
(:mod:`.header_read`, :mod:`.header_write`), keyed state's key-group blocks (:mod:`.keyed_read`,
:mod:`.keyed_write`; whole key groups of simple states as columns: :mod:`.keyed_columns_read`),
operator state (:mod:`.operator_read`, :mod:`.operator_write`) and the namespaces and timers
the writer writes (:mod:`.namespaces_write`)."""
