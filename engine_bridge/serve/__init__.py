"""A local OpenAI-compatible HTTP server for a loaded pair (``dflash-studio serve``).
binding (addresses and the API key rule), protocol (requests in, responses and errors out),
stops (stop strings over a token stream), worker (the bounded queue, one request's run, the pair's facts, and
the CLI's engine thread; the desktop app runs the same queue on its own engine worker),
app (the Starlette routes), server (uvicorn on a socket, the start message).
May import: common, runtime, models; never cli, bench or training.
"""
