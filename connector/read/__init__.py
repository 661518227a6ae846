"""The readers of ``spark.read.format("flinkstate")``: our checkpoints' views
(:mod:`.checkpoint_reader`), an operator's timers (:mod:`.timer_reader`), Flink's savepoints
(:mod:`.savepoint_reader`) and the change feed (:mod:`.changefeed`), with one filter
pushdown rule (:mod:`.pushdown`) and one key selection (:mod:`.selection`)."""
