"""Flink's ``_metadata`` file, read (:mod:`.metadata_read`: operators, subtasks, state handles)
and written (:mod:`.metadata_write`), and the OperatorID of an operator uid (:mod:`.operator_id`)."""
