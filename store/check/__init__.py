"""fsck: the consistency checks of a whole store, its IndexFiles and its ConsumeQueues."""
