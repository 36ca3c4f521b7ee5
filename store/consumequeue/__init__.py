"""The ConsumeQueues: their format and reads, getMessage, the queue table, the consume queue dispatcher."""
