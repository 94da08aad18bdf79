"""Model hub: Hugging Face search, resumable verified downloads, the local library, fit estimates.

No Qt and no llama_cpp here (the GUI imports this package). Where things are:

- ``hub_search``: ``search_models``, ``list_repo_files``, ``remote_gguf_header`` (HfApi)
- ``download_manager``: ``DownloadManager`` / ``pull`` (progress callback, cancel event, resume,
  SHA-256 check, disk-space check, atomic move into the library)
- ``library``: ``ModelLibrary`` (entries described from file headers, safe delete)
- ``gguf_header``: ``read_gguf_header`` (metadata and tensor infos, never tensor data)
- ``fit_estimate``: ``estimate_fit`` (weights, KV, compute, verdict)
- ``memory_probe``: free RAM (psutil) and VRAM per GPU (nvidia-ml-py)
- ``hub_settings``: ``HubSettings`` (``QUANTDESK_MODELS_DIR``, endpoint, token)
- ``errors``: ``HubError`` and its subclasses
"""
