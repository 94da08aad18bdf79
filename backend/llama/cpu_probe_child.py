"""The CPU probe's child: ``python -m backend.llama.cpu_probe_child MODEL``.

Loads MODEL with llama.cpp's extra buffer types on (weight repacking: AMX, CPU_REPACK) and
decodes a short prompt plus a few greedy tokens with two threads, so that the repacked matmul
kernels run in the main thread and a worker thread. A build or CPU that faults there kills
this process on a signal, never the server that asked (:mod:`backend.llama.cpu_probe`).
"""

from __future__ import annotations

import sys

import llama_cpp

PROMPT = b"The quick brown fox jumps over the lazy dog. The capital of France is"
NEW_TOKENS = 4


def main(model_path: str) -> int:
    # llama.cpp logs to stderr, which the parent captures (its last line says why on failure)
    llama_cpp.llama_backend_init()
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = 0
    params.use_extra_bufts = True
    model = llama_cpp.llama_model_load_from_file(model_path.encode(), params)
    if not model:
        return 3
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = 128
    cparams.n_batch = 64
    cparams.n_threads = cparams.n_threads_batch = 2
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    vocab = llama_cpp.llama_model_get_vocab(model)
    tokens = (llama_cpp.llama_token * 64)()
    n = llama_cpp.llama_tokenize(vocab, PROMPT, len(PROMPT), tokens, 64, True, False)
    batch = llama_cpp.llama_batch_get_one(tokens, n)
    for _ in range(NEW_TOKENS):
        if llama_cpp.llama_decode(ctx, batch) != 0:
            return 4
        logits = llama_cpp.llama_get_logits_ith(ctx, -1)
        n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
        best = max(range(n_vocab), key=lambda i: logits[i])
        tokens[0] = best
        batch = llama_cpp.llama_batch_get_one(tokens, 1)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
