"""The bottom layer: the root exception type and the one size and duration formatter."""
