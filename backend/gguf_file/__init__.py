"""The GGUF file format: bounded header reader, ggml type table, split-file names. No llama.cpp."""
