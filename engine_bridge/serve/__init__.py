"""A local OpenAI-compatible HTTP server for a loaded pair (``dflash-studio serve``).
binding (addresses and the API key rule), protocol (requests in, responses and errors out),
stops (stop strings over a token stream), worker (the one engine thread and its bounded queue),
app (the Starlette routes), server (uvicorn on a socket, the start message).
May import: common, runtime, models; never cli, bench or training.
"""
