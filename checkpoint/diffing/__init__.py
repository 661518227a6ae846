"""Differences between snapshots: :mod:`.scopes` compares one key group's rows (the change
feed's rule), :mod:`.sides` reads one snapshot (ours or Flink's) as the plain reader does, and
:mod:`.plan` streams a whole state's differences, comparison unit by comparison unit."""
