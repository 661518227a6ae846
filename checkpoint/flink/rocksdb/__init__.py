"""RocksDB's own files in native savepoints and checkpoints, read without RocksDB: SST files
(:mod:`.sst_read`), the MANIFEST of live files (:mod:`.manifest_read`; RocksDB's, not our
checkpoint manifest), block checksums (:mod:`.checksums`) and the keyed state they hold
(:mod:`.native_read`)."""
