"""Reading checkpoints back: a completed checkpoint restored into backends at any
parallelism (:mod:`.restore`), chosen key groups of a state read from its files, checked
against the manifest (:mod:`.keyed_files`, :mod:`.verified`), a key group's rows merged
from several files (:mod:`.merge`) and keys given as text (:mod:`.keys`)."""
