"""The keyed base every backend shares: registration and caching (:mod:`.backend`), the
current key (:mod:`.current_key`), backend-neutral snapshots (:mod:`.snapshot`), change
recording for increments (:mod:`.changes`) and schema migration (:mod:`.migration`)."""
