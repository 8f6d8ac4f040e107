"""The chat tab: the conversation's flow, its transcript and the stored conversations.
chat_session, chat_view, transcript, conversation_list, conversations (SQLite).
May import: app.common, the engine worker in app.shell (workers), engine_bridge.
"""
