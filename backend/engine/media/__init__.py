"""Images (and audio) in: decoding client media, the projector (libmtmd), media spans."""
