"""The change feed (``readChangeFeed=true``): :mod:`.reader` reads it; :mod:`.diff` plans a
checkpoint's changes (its deltas, or a difference from the checkpoint before), :mod:`.native`
does so for native RocksDB checkpoints and :mod:`.scope` rewrites delta rows that do not read
as deletes then updates."""
