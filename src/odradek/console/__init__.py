"""The web console (``odradek ui``): a Starlette app with server-side Jinja2 pages over odradek's client.

Modules: :mod:`.app` (the app, sessions middleware, shared helpers), :mod:`.bridge` (the client
loop the cluster calls run on), :mod:`.auth` (sessions, sign-in, CSRF), :mod:`.metrics` (the
throughput chart's scrapes), :mod:`.render` (record bytes as text, JSON or hex), the data modules
:mod:`.cluster_data`, :mod:`.topic_data`, :mod:`.group_data`, and one ``routes_*`` module per
area. Templates and static files ship inside the package (see ``docs/console.md``).
"""
