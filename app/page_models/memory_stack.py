"""The Server page's fit bars while a library server runs, without Qt: each resident model's
memory a segment of its own, then the chosen model about to load, against what is free; and
what the server will do to load it (load it beside them, unload idle models first, or refuse).

The resident models' sizes are the router's own (``memory_bytes`` of ``GET /v1/models``: the
estimate each was admitted with, RAM and VRAM together). ``gpu_of`` splits one between the
devices where there is a GPU (the Server page asks the same fit estimate the router asked).
The model about to load is the fit estimate of the knobs shown, plus the memory of the server
process the router starts for it (``CHILD_OVERHEAD_BYTES``). The free memory is measured now,
so it already excludes what the resident models hold; the router keeps ``reserve`` free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from app.page_models.fit_adapter import FitView, estimate
from app.page_models.router_models import ModelCard, library_path, with_model_overrides
from app.storage.app_settings import ServerKnobs
from backend.core.units import human_bytes
from backend.router.memory_check import CHILD_OVERHEAD_BYTES

Device = Literal["RAM", "VRAM"]
# resident: another model; chosen: the chosen model, already resident; new: the chosen
# model, about to load with the knobs shown
Role = Literal["resident", "chosen", "new"]
RESIDENT_STATES = ("loaded", "loading")


@dataclass(frozen=True)
class Segment:
    model_id: str
    size_bytes: int  # on this device; 0 while a model loads (the router has no size yet)
    role: Role
    state: str = "loaded"

    @property
    def label(self) -> str:
        """The model's short name (the file's stem: ids may carry the library's folders)."""
        return self.model_id.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class MemoryStack:
    """One device's bar: the segments left to right, then what is still free."""

    device: Device
    segments: tuple[Segment, ...]
    free_bytes: int  # free on the device now
    reserve_bytes: int = 0  # the router leaves this much free when it loads a model

    @property
    def resident_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments if s.role != "new")

    @property
    def new_bytes(self) -> int:
        return sum(s.size_bytes for s in self.segments if s.role == "new")

    @property
    def room_bytes(self) -> int:
        """What a model may take beside the resident ones: the free memory less the reserve."""
        return max(0, self.free_bytes - self.reserve_bytes)

    @property
    def fits(self) -> bool:
        """The model about to load fits beside the resident ones (True when none is)."""
        return self.new_bytes <= self.room_bytes

    @property
    def span_bytes(self) -> int:
        """What the whole bar stands for: resident memory and the free memory, or the new
        model where it needs more than is free."""
        return self.resident_bytes + max(self.free_bytes, self.new_bytes)

    def spans(self) -> list[tuple[float, float, Segment]]:
        """Each segment with a nonzero size as (start, end), fractions of the bar."""
        total = self.span_bytes
        out: list[tuple[float, float, Segment]] = []
        if total <= 0:
            return out
        at = 0
        for segment in self.segments:
            if segment.size_bytes <= 0:
                continue
            out.append((at / total, (at + segment.size_bytes) / total, segment))
            at += segment.size_bytes
        return out

    def reserve_span(self) -> tuple[float, float] | None:
        """Where the reserve lies (the free memory's last part), as fractions of the bar."""
        total = self.span_bytes
        if total <= 0 or self.reserve_bytes <= 0 or self.free_bytes <= 0:
            return None
        end = (self.resident_bytes + self.free_bytes) / total
        start = (self.resident_bytes + self.room_bytes) / total
        return (start, end)

    def text(self) -> str:
        """The words beside the bar: the chosen model against the free memory."""
        free = f"{human_bytes(self.free_bytes)} free"
        if self.new_bytes:
            return f"{human_bytes(self.new_bytes)} of {free}"
        return free

    def tooltip(self) -> str:
        lines = [
            f"{s.model_id}: {human_bytes(s.size_bytes) if s.size_bytes else s.state}"
            + {"resident": "", "chosen": " (chosen, loaded)", "new": " (to load)"}[s.role]
            for s in self.segments
        ]
        lines.append(f"free now: {human_bytes(self.free_bytes)}")
        if self.reserve_bytes:
            lines.append(f"kept free by the server: {human_bytes(self.reserve_bytes)}")
        return f"{self.device}\n" + "\n".join(lines)


def split_memory(card: ModelCard, gpu_bytes: int) -> tuple[int, int]:
    """A resident model's (RAM, VRAM) from its total and the GPU share estimated for it."""
    total = card.memory_bytes or 0
    gpu = min(total, max(0, gpu_bytes))
    return total - gpu, gpu


def estimated_gpu_bytes(model_id: str, running: ServerKnobs, stored: dict[str, Any]) -> int:
    """The GPU memory the fit estimate gives a resident model: the running server's knobs
    with the model's remembered ones on top (``stored``), as the router loaded it."""
    path = library_path(model_id)
    if path is None:
        return 0
    knobs = with_model_overrides(running, stored).model_copy(update={"model": path})
    return estimate(knobs).vram_needed


def memory_stacks(
    view: FitView,
    cards: list[ModelCard],
    chosen_id: str | None,
    reserve_bytes: int,
    gpu_of: Callable[[ModelCard], int] | None = None,
) -> tuple[MemoryStack, MemoryStack | None]:
    """The RAM bar and the VRAM bar (``None`` with no GPU) of a library server holding
    ``cards``' resident models, with ``view`` the fit of the chosen model (``chosen_id``:
    its library id, ``None`` for a file the server cannot load beside them)."""
    with_gpu = view.vram_total > 0 or gpu_of is not None
    ram: list[Segment] = []
    vram: list[Segment] = []
    chosen_resident = False
    for card in cards:
        if card.state not in RESIDENT_STATES:
            continue
        role: Role = "chosen" if card.id == chosen_id else "resident"
        chosen_resident |= role == "chosen"
        cpu, gpu = split_memory(card, gpu_of(card) if gpu_of is not None else 0)
        ram.append(Segment(card.id, cpu, role, card.state))
        vram.append(Segment(card.id, gpu, role, card.state))
    if chosen_id is not None and not chosen_resident and view.exact:
        ram.append(Segment(chosen_id, view.ram_needed + CHILD_OVERHEAD_BYTES, "new", "unloaded"))
        vram.append(Segment(chosen_id, view.vram_needed, "new", "unloaded"))
    ram_stack = MemoryStack("RAM", tuple(ram), view.ram_total, reserve_bytes)
    if not with_gpu:
        return ram_stack, None
    return ram_stack, MemoryStack("VRAM", tuple(vram), view.vram_total, reserve_bytes)


def legend(ram: MemoryStack, vram: MemoryStack | None) -> list[tuple[Segment, int]]:
    """Each model of the bars once, in their order, with its memory on every device."""
    sizes = {s.model_id: s.size_bytes for s in ram.segments}
    if vram is not None:
        for s in vram.segments:
            sizes[s.model_id] = sizes.get(s.model_id, 0) + s.size_bytes
    return [(s, sizes[s.model_id]) for s in ram.segments]


PlanKind = Literal["", "loaded", "fits", "evicts", "refused"]


@dataclass(frozen=True)
class LoadPlan:
    """What loading the chosen model does: ``kind`` says it for the colours, ``text`` in
    words ('' and '' when there is nothing to say: no resident model, or no model chosen)."""

    kind: PlanKind
    text: str


def load_plan(
    ram: MemoryStack, vram: MemoryStack | None, cards: list[ModelCard], models_max: int
) -> LoadPlan:
    """What loading the chosen model does, as the router decides it (``ModelPool._make_room``):
    it loads beside the resident models if it fits both ``models_max`` and the free memory
    of each device less the reserve; else it unloads idle, unpinned models, idle longest
    first, until it does; else it refuses the load (a 503)."""
    new = next((s for s in ram.segments if s.role == "new"), None)
    resident = [s for s in ram.segments if s.role != "new"]
    if new is None:
        chosen = next((s for s in resident if s.role == "chosen"), None)
        if chosen is None:
            return LoadPlan("", "")
        others = len(resident) - 1
        beside = f" beside {others} other model{'s' if others != 1 else ''}" if others else ""
        return LoadPlan("loaded", f"{chosen.label} is {chosen.state}{beside}.")
    if not resident:
        return LoadPlan("", "")
    stacks = [s for s in (ram, vram) if s is not None]
    loaded = {c.id: c for c in cards if c.state == "loaded"}

    def fits(freed: dict[str, int], count: int) -> bool:
        if count >= models_max:
            return False
        return all(st.new_bytes <= st.room_bytes + freed.get(st.device, 0) for st in stacks)

    count = len(loaded)
    if fits({}, count):
        if len(resident) == 1:
            return LoadPlan("fits", f"Fits beside {resident[0].label}.")
        return LoadPlan("fits", f"Fits beside the {len(resident)} resident models.")
    idle = sorted(
        (c for c in loaded.values() if c.in_flight == 0 and not c.pinned),
        key=lambda c: -(c.idle_s or 0.0),  # least recently used first
    )
    freed: dict[str, int] = {}
    victims: list[str] = []
    for card in idle:
        victims.append(card.id.rsplit("/", 1)[-1])
        count -= 1
        for st in stacks:
            size = next((s.size_bytes for s in st.segments if s.model_id == card.id), 0)
            freed[st.device] = freed.get(st.device, 0) + size
        if fits(freed, count):
            return LoadPlan(
                "evicts",
                f"Loading it unloads {', '.join(victims)} first (idle, least recently used "
                "first) to make room.",
            )
    held = [c.id.rsplit("/", 1)[-1] for c in loaded.values() if c.in_flight or c.pinned]
    why = f" ({', '.join(held)}: pinned or busy)" if held else ""
    return LoadPlan(
        "refused",
        f"It does not fit even with every idle model unloaded{why}: the server would refuse "
        "to load it.",
    )
