"""The scoped test inbox: SMTP sink, /_inbox HTTP API and its pages (never in production).

One process serves all of it (`authsvc inbox`): the sink (smtp.py) and, with
`--http-port`, the HTTP server (server.py) on the same event loop.
"""
