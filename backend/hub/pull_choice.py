"""Which files of a repo a pull downloads: the ones named, or the repo's one GGUF model (or
its safetensors source), with every part of a split GGUF and the projector beside it."""

from __future__ import annotations

from backend.gguf_file.split_gguf import split_part_names
from backend.hub.errors import DownloadError, HubNotFoundError
from backend.hub.hub_search import HubFile, RepoListing


def choose_files(listing: RepoListing, filenames: list[str] | None) -> list[HubFile]:
    """The files to download for ``filenames`` of ``listing`` (None: the model it holds)."""
    if filenames:
        chosen: list[HubFile] = []
        for name in filenames:
            hub_file = listing.file(name)
            if hub_file is None:
                raise HubNotFoundError(f"file not found on the Hub: {listing.repo_id}/{name} (404)")
            for part in split_siblings(listing, hub_file):  # every part of a split GGUF
                if part not in chosen:
                    chosen.append(part)
        return _with_projectors(listing, chosen)
    ggufs = listing.gguf_files
    models = {tuple(f.path for f in split_siblings(listing, g)) for g in ggufs}
    if len(models) == 1:
        return _with_projectors(listing, [f for f in ggufs if f.path in next(iter(models))])
    if len(ggufs) > 1:
        names = ", ".join(f.path for f in ggufs)
        raise DownloadError(
            f"{listing.repo_id} has several GGUF files; name the ones to pull: {names}"
        )
    if listing.is_safetensors_source:
        return listing.source_files()
    raise DownloadError(f"{listing.repo_id} has no GGUF or safetensors model files to pull")


def _with_projectors(listing: RepoListing, chosen: list[HubFile]) -> list[HubFile]:
    """``chosen`` and, for each model GGUF in it, the projector beside it in the repo (a
    vision model's ``mmproj*.gguf``): the two are downloaded together."""
    out = list(chosen)
    for hub_file in chosen:
        projector = listing.projector_for(hub_file) if hub_file.kind == "gguf" else None
        if projector is not None and projector not in out:
            out.append(projector)
    return out


def split_siblings(listing: RepoListing, hub_file: HubFile) -> list[HubFile]:
    """All parts of the split GGUF ``hub_file`` belongs to (just ``hub_file`` otherwise);
    a model split into ``-0000i-of-0000n.gguf`` files loads only with every part."""
    names = split_part_names(hub_file.path)
    if names == [hub_file.path]:
        return [hub_file]
    parts = [listing.file(n) for n in names]
    missing = [n for n, p in zip(names, parts, strict=True) if p is None]
    if missing:
        raise DownloadError(
            f"{listing.repo_id}: split model {hub_file.path} lacks parts on the Hub: "
            + ", ".join(missing)
        )
    return [p for p in parts if p is not None]
