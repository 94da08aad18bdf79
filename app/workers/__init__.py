"""Background workers (QThread) that talk HTTP to the server and report through signals."""
