"""The CommitLog writer: records and batches appended as the broker appends them."""
