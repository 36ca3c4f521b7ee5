"""What the store needs from the operating system: the SIGBUS guard, resident memory, the broker lock."""
