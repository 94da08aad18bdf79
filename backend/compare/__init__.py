"""Side-by-side quality evaluation of quantised GGUFs against a reference.

Perplexity and KL divergence use the definitions of llama.cpp's ``llama-perplexity``
(``--kl-divergence-base`` / ``--kl-divergence``). Entry point:
:func:`backend.compare.compare.run_compare`; on-disk reference distributions:
:mod:`backend.compare.base_logits`.

This package ``__init__`` imports nothing, so that the results, report and plot modules
(which don't need llama.cpp) can be used without loading it.
"""
