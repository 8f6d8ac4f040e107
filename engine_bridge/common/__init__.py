"""What every part of engine_bridge and the app shares: typed errors and small helpers with no policy.
errors (typed engine errors), paths (the user's data folders), resources (files shipped in resources/), sqlite_wal (opening stores).
May import: the standard library only; nothing else from engine_bridge (everything may import common).
"""
