"""RocketMQ's own store files: CommitLog, IndexFiles and checkpoint, read and written byte-exact."""
