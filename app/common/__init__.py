"""Qt building blocks the tabs share: throttle, task pool, ring buffer, stream channel, UI budget."""
