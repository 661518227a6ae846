"""Canonical Flink savepoints written: the one writing path (:mod:`.savepoint`) over operator
sources (:mod:`.sources`: ours; :mod:`.flink_source`: a Flink savepoint's, states carried as
bytes by :mod:`.passthrough`; :mod:`.pyflink`; :mod:`.arrow`: Arrow columns) and the offline
edits (:mod:`.edit`)."""
