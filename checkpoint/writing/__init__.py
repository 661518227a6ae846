"""Writing checkpoints: checkpoint storage and pending checkpoints (:mod:`.checkpoints`), one
subtask's files (:mod:`.writer`, :mod:`.target`: snapshot -> write -> release), increments
over a base (:mod:`.increments`), the manifest made and published (:mod:`.committer`), a
version appended on the latest (:mod:`.append`), versions, retention and ``gc``
(:mod:`.versions`, :mod:`.inflight`) and the offline rewrite to another max parallelism
(:mod:`.rewrite`)."""
