"""The CommitLog: its mapped files, the record check every walk uses, gaps, the VIEW read."""
