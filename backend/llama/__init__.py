"""The one llama.cpp binding layer: backend init, the log hook, tokenize and token_to_piece."""
