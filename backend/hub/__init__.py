"""Model hub: Hugging Face search, resumable verified downloads, the local library.

No Qt and no llama_cpp here (the GUI imports this package). Where things are:

- ``hub_search``: ``search_models``, ``list_repo_files``, ``remote_gguf_header`` (HfApi)
- ``download_manager``: ``DownloadManager`` / ``pull`` (progress callback, cancel event, resume,
  SHA-256 check, disk-space check, atomic move into the library), over ``pull_choice``,
  ``download_transfer``, ``download_checks``, ``download_progress``, ``library_paths`` and
  ``leftover_files``
- ``library``: ``ModelLibrary`` (entries described from file headers, safe delete)
- ``hub_settings``: ``HubSettings`` (``QUANTDESK_MODELS_DIR``, endpoint, token)
- ``errors``: ``HubError`` and its subclasses
"""
