"""Java's wire formats, read and written: ``DataInput``/``DataOutput`` primitives
(:mod:`.data_read`, :mod:`.data_write`), object serialization streams (:mod:`.objects_read`)
and snappy framing (:mod:`.snappy_read`)."""
