"""Speculative decoding: draft a few tokens cheaply, then verify them all in one decode.

A drafter proposes the tokens that follow a generating sequence (:mod:`.ngram_draft` from
the sequence's own earlier tokens, :mod:`.draft_model` from a small model that shares the
vocabulary); :mod:`.speculator` picks which sequences draft and how much; the scheduler
decodes the last token and the draft together with logits on every row, and
:mod:`.verify` samples row by row with the sequence's own sampler, keeping the draft up to
the first token the target model would not have produced.
"""
