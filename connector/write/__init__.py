"""The writers of ``df.write`` / ``df.writeStream`` ``.format("flinkstate")``: a version of
our checkpoints (:mod:`.batch`), micro-batches upserted into keyed state (:mod:`.stream`), a
Flink savepoint (:mod:`.savepoint_writer`); :mod:`.plan` reads a DataFrame's columns and the
options as the state they write."""
