"""The composition root: the ``quantdesk`` command and its sub-commands (one ``*_cmd.py`` each).

The top layer: it wires the server, engine, hub, quantiser, comparison and benchmarks
together, turns exceptions into exit codes, and draws terminal progress. Nothing imports it
except the console script and the packaged app's entry.
"""
