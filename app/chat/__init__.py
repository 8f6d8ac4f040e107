"""The chat tab: session, transcript, conversation list and the conversation store."""
