"""Work off the GUI thread: the one ``ThreadWorker``, ``CliJob`` (child ``quantdesk`` jobs),
the server supervisor, and the plain functions they run (download, chat stream, stats poll)."""
