"""The task side of a run: what one Spark task does with its key-group range
(:mod:`.subtask`), the plan it gets (:mod:`.plan`), what its operator yields
(:mod:`.outputs`), its live backend kept between runs (:mod:`.live`, in the executor's store:
:mod:`.executor`) and the second input of a two-input run (:mod:`.two_inputs`)."""
