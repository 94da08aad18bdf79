"""Log-probabilities of sampled and prompt tokens, read from the context's logits rows."""

from __future__ import annotations

import numpy as np

from backend.engine.model_runtime import ModelRuntime, logits_row
from backend.engine.request_types import TokenLogprob, piece_text
from backend.engine.sequence import Sequence


class LogprobReader:
    """Turns rows of the last ``llama_decode``'s logits into :class:`TokenLogprob` entries."""

    def __init__(self, runtime: ModelRuntime) -> None:
        self.rt = runtime

    def logits(self, index: int) -> np.ndarray:
        """Batch row ``index``'s logits (the row must have requested them)."""
        return logits_row(self.rt.ctx, index, self.rt.n_vocab).astype(np.float64)

    def record(self, seq: Sequence, logits: np.ndarray, token: int, top_k: int) -> None:
        """Keep the sampled ``token``'s entry until its text is emitted."""
        entry = self.entry(logits, token, top_k)
        seq.cum_logprob += entry.logprob
        seq.pending_logprobs.append(entry)

    def score_prompt(self, seq: Sequence, row: int, rows: int) -> None:
        """Log-probabilities of the prompt tokens that batch rows ``row..row+rows`` predict
        (row k at prompt position p predicts token p + 1)."""
        top_k = seq.request.prompt_logprobs or 0
        for k in range(rows):
            token = seq.tokens[seq.n_past + k + 1]
            seq.prompt_logprobs.append(self.entry(self.logits(row + k), token, top_k))

    def entry(self, logits: np.ndarray, token: int, top_k: int) -> TokenLogprob:
        """``token``'s log-probability under ``logits`` and the ``top_k`` most likely."""
        shifted = logits - logits.max()
        logprobs = shifted - np.log(np.exp(shifted).sum())
        top: list[tuple[int, str, float]] = []
        if top_k > 0:
            idx = np.argpartition(-logprobs, top_k)[:top_k]
            idx = idx[np.argsort(-logprobs[idx])]
            top = [(int(i), self._piece_text(int(i)), float(logprobs[i])) for i in idx]
        return TokenLogprob(token, self._piece_text(token), float(logprobs[token]), top)

    def _piece_text(self, token: int) -> str:
        return piece_text(self.rt.token_piece(token))
