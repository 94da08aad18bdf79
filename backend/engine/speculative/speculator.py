"""Which sequences draft this step, how many tokens, and from which drafter.

n-gram lookup comes first, as in llama.cpp (it costs a dict lookup); a sequence it finds
nothing for drafts with the draft model, if there is one. A draft is never longer than
what the sequence may still generate minus one (the last row always gives a token of its
own), nor than its slot's context has room for, nor than the request's
``speculative.n_max``; a draft shorter than ``n_min`` is not worth verifying. Of what the
drafters offer, :mod:`~backend.engine.speculative.draft_policy` keeps the lengths that
are expected to pay for their rows, from the measured decode cost and each sequence's
acceptance so far.
"""

from __future__ import annotations

from collections.abc import Callable

import llama_cpp

from backend.core.errors import ConfigError
from backend.engine.model_runtime import ModelRuntime
from backend.engine.sequence import Sequence
from backend.engine.speculative.draft_model import DraftModel, DraftRequest
from backend.engine.speculative.draft_policy import (
    CALIBRATION_ROWS,
    EVIDENCE_DECAY,
    Acceptance,
    Candidate,
    DecodeCost,
    calibrate,
    choose_lengths,
    first_rate,
)
from backend.engine.speculative.ngram_draft import LongestMatch
from backend.settings.default_model import resolve_model_path
from backend.settings.engine_settings import EngineSettings


class Speculator:
    """The speculative settings of the engine and its drafters."""

    def __init__(
        self, settings: EngineSettings, n_ctx_seq: int, draft_model: DraftModel | None = None
    ) -> None:
        self.types = settings.spec_types
        self.ngram = "ngram-simple" in self.types
        self.ngram_n = settings.spec_ngram_simple_size_n
        self.ngram_n_min = settings.spec_ngram_simple_size_n_min
        self.ngram_m = settings.spec_ngram_simple_size_m
        self.ngram_min_hits = settings.spec_ngram_simple_min_hits
        self.draft_model = draft_model
        self.draft_max = settings.draft_max
        self.draft_min = settings.draft_min
        self.p_min = settings.draft_p_min
        self.n_ctx_seq = n_ctx_seq
        self.per_slot = not settings.kv_unified
        # set by calibrate(); without it (``--spec-draft-policy full``, tests that drive a
        # bare speculator) every draft is verified whole, as llama.cpp does
        self.cost: DecodeCost | None = None
        # with the cost policy: measures the figures on a drafting sequence's own cells
        # (seq_id, first free position, free cells), the first time a draft needs a length
        self.calibrate_later: Callable[[int, int, int], DecodeCost] | None = None
        # every sequence's record by drafter: where a new sequence's acceptance starts
        self.acceptance: dict[str, Acceptance] = {}

    @classmethod
    def create(cls, settings: EngineSettings, runtime: ModelRuntime) -> Speculator | None:
        """The speculator ``settings`` ask for (loading the draft model), or None when
        speculation is off."""
        types = settings.spec_types
        if not types:
            return None
        draft_model = None
        if "draft-simple" in types:
            if not settings.model_draft:
                raise ConfigError(
                    "--spec-type draft-simple needs a draft model (-md/--model-draft)"
                )
            path = resolve_model_path(settings.model_draft)
            draft_model = DraftModel(path, settings, runtime)
        speculator = cls(settings, runtime.n_ctx_seq, draft_model)
        if settings.spec_draft_policy == "full":
            return speculator  # no cost figures: every draft verified whole
        token = max(llama_cpp.llama_vocab_bos(runtime.vocab), 0)

        def calibrate_later(seq_id: int, pos0: int, room: int) -> DecodeCost:
            return calibrate(runtime.ctx, runtime.memory, room, token, seq_id=seq_id, pos0=pos0)

        speculator.calibrate_later = calibrate_later
        if draft_model is not None:
            rt = draft_model.rt
            draft_model.cost = calibrate(rt.ctx, rt.memory, rt.n_ctx_seq, token)
        return speculator

    @property
    def type_name(self) -> str:
        return ",".join(self.types)

    def close(self) -> None:
        if self.draft_model is not None:
            self.draft_model.close()
            self.draft_model = None

    def propose(self, running: list[Sequence], free_cells: int | None = None) -> None:
        """Set ``draft`` of every running sequence: the tokens to verify after its last
        one this step (empty for a sequence that doesn't speculate now). ``free_cells``:
        the KV cells no sequence holds (the scheduler's count), room for a calibration."""
        offers: list[tuple[Sequence, list[int], int]] = []  # (sequence, draft, n_min)
        wanted: list[tuple[Sequence, DraftRequest, int]] = []
        n_plain = 0
        for seq in running:
            seq.draft = []
            if not seq.generating:
                continue
            n_plain += 1
            sampling = seq.request.sampling
            room = min(
                seq.request.max_tokens - seq.completion_tokens - 1,
                self.n_ctx_seq - len(seq.tokens) - 1,
            )
            if sampling.draft_n_max is not None:
                room = min(room, sampling.draft_n_max)
            n_min = max(1, self.draft_min if sampling.draft_n_min is None else sampling.draft_n_min)
            if room < n_min:
                continue
            if self.ngram:
                if seq.ngram is None:
                    seq.ngram = LongestMatch(self.ngram_n, self.ngram_n_min)
                draft, matched = seq.ngram.draft(
                    seq.tokens, min(room, self.ngram_m), self.ngram_min_hits
                )
                if len(draft) >= n_min:
                    seq.draft_source = f"ngram-{matched}"
                    offers.append((seq, draft, n_min))
                    continue
            n_max = min(room, self.draft_max)
            if self.draft_model is not None and n_max >= n_min:
                p_min = self.p_min if sampling.draft_p_min is None else sampling.draft_p_min
                wanted.append((seq, DraftRequest(seq.seq_id, seq.tokens, n_max, p_min), n_min))
        if (offers or wanted) and not self._calibrated((offers or wanted)[0][0], free_cells):
            return  # no room to measure what drafts cost yet: none this step
        if wanted and self.draft_model is not None:
            wanted = self._worth_drafting(wanted, n_plain - len(offers))
            if wanted:
                self.draft_model.draft([request for _, request, _ in wanted])
            for seq, request, n_min in wanted:
                if len(request.draft) >= n_min:
                    seq.draft_source = "model"
                    offers.append((seq, request.draft, n_min))
        if not offers:
            return
        if self.cost is None:
            for seq, draft, _ in offers:
                seq.draft = draft
            return
        candidates = [
            Candidate(len(draft), self.acceptance_rate(seq), n_min) for seq, draft, n_min in offers
        ]
        lengths = choose_lengths(
            candidates, n_plain - len(offers), self.cost, per_slot=self.per_slot
        )
        for (seq, draft, _), n in zip(offers, lengths, strict=True):
            seq.draft = draft[:n]
            if n == 0:
                seq.acceptance.fade(EVIDENCE_DECAY)

    def _calibrated(self, seq: Sequence, free_cells: int | None) -> bool:
        """Whether the cost figures exist, measuring them now on ``seq``'s cells after its
        last decoded token if they are still to be made (once per engine: about 0.5 s of
        decodes on a CPU, a stall of that one step)."""
        if self.calibrate_later is None:
            return True
        room = self.n_ctx_seq - seq.n_past
        if free_cells is not None:
            room = min(room, free_cells)
        if room <= CALIBRATION_ROWS[1]:
            return False
        self.cost = self.calibrate_later(seq.seq_id, seq.n_past, room)
        self.calibrate_later = None
        return True

    def _worth_drafting(
        self, wanted: list[tuple[Sequence, DraftRequest, int]], n_plain: int
    ) -> list[tuple[Sequence, DraftRequest, int]]:
        """Cut each draft model request's ``n_max`` to what is expected to pay for both its
        draft decodes and its verification rows; drop those worth nothing."""
        draft_model = self.draft_model
        if self.cost is None or draft_model is None or draft_model.cost is None:
            return wanted
        for seq, _, _ in wanted:
            seq.draft_source = "model"
        candidates = [
            Candidate(request.n_max, self.acceptance_rate(seq), n_min)
            for seq, request, n_min in wanted
        ]
        lengths = choose_lengths(
            candidates,
            n_plain - len(wanted),
            self.cost,
            per_slot=self.per_slot,
            draft_cost=draft_model.cost,
        )
        kept = []
        for (seq, request, n_min), n in zip(wanted, lengths, strict=True):
            if n:
                request.n_max = n
                kept.append((seq, request, n_min))
            else:
                seq.acceptance.fade(EVIDENCE_DECAY)
        return kept

    def acceptance_rate(self, seq: Sequence) -> float:
        """The chance that ``seq``'s next drafted token is accepted: its own record, starting
        from what every sequence's drafts from the same drafter have had."""
        source = seq.draft_source
        overall = self.acceptance.setdefault(source, Acceptance()).rate(first_rate(source))
        return seq.acceptance.rate(overall)

    def record(self, seq: Sequence, drafted: int, accepted: int) -> None:
        """``seq`` verified a draft of ``drafted`` tokens and kept ``accepted``."""
        seq.acceptance.record(drafted, accepted, EVIDENCE_DECAY)
        self.acceptance.setdefault(seq.draft_source, Acceptance()).record(drafted, accepted, 0.99)

    def observe_decode(self, rows: list[int], seconds: float) -> None:
        """A call of generating sequences only, ``rows[s]`` rows each, took ``seconds``: a
        single pass (unified cache, or equal rows per slot) keeps the cost figures current."""
        if self.cost is not None and (not self.per_slot or min(rows) == max(rows)):
            self.cost.observe(sum(rows), seconds)

    @property
    def uses_draft_model(self) -> bool:
        return self.draft_model is not None
