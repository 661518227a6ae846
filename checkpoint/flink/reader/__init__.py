"""Flink's savepoints and retained checkpoints read: the savepoint object (:mod:`.savepoint`),
its states as tables (:mod:`.tables`, :mod:`.operator_states`, :mod:`.nested`), entries as bytes
(:mod:`.raw_entries`), declared Kryo types (:mod:`.kryo_declared`), restores into our backends
(:mod:`.restore`) and the conversion into one of our savepoints (:mod:`.importing`)."""
