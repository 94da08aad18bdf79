"""For each llama-server flag that ``quantdesk serve`` accepts with a meaning (status
``supported`` or ``mapped`` in backend/settings/llama_server_flag_table.py, not ``no_op``),
the tests that show a value of it changing what the server does, through the settings field
the flag sets. Keyed by the family's first spelling in the table; the values are pytest node
ids (``path::test_function``, parameters left out).

The ``no_op`` flags (accepted, ignored) are shown changing nothing by
tests/server/test_llama_server_flags.py::test_aliases_and_no_ops_give_the_settings_of_our_flags.
tests/server/test_flag_behaviour.py checks that this map covers the table and that every
test it names exists.

Where a value's effect cannot be seen on the machines the tests run on (a 2-core box without
a GPU), the test named shows the value reaching llama.cpp's own context or model parameters
instead; the comment beside the entry says so.
"""

from __future__ import annotations

NEW = "tests/server/test_flag_behaviour.py"

FLAG_BEHAVIOUR_TESTS: dict[str, tuple[str, ...]] = {
    # --- common -------------------------------------------------------------------------
    "-h": ("tests/hub/test_cli_help.py::test_serve_help_shows_defaults",),
    # reaching llama.cpp only: on a 2-core box the thread count's effect (speed) cannot be
    # measured reliably; llama_n_threads of the context is read back
    "-t": (f"{NEW}::test_engine_flags_reach_llama_cpps_context_and_model",),
    # reaching llama.cpp only, as -t (llama_n_threads_batch)
    "-tb": (f"{NEW}::test_engine_flags_reach_llama_cpps_context_and_model",),
    "-c": (
        "tests/server/test_errors.py::test_context_overflow_is_400_and_names_the_numbers",
        "tests/server/test_kv_per_slot.py::test_the_engine_reports_per_slot_streams",
    ),
    # an image longer than a batch is decoded in pieces of -b / -ub; llama_n_batch too
    "-b": (
        "tests/media/test_llama_server_parity.py::"
        "test_m_rope_images_longer_than_a_batch_match_llama_server",
        f"{NEW}::test_engine_flags_reach_llama_cpps_context_and_model",
    ),
    "-ub": (
        "tests/media/test_llama_server_parity.py::"
        "test_m_rope_images_longer_than_a_batch_match_llama_server",
        "tests/hub/test_fit_estimate.py::test_smollm2_estimate_matches_llama_cpp",
        f"{NEW}::test_engine_flags_reach_llama_cpps_context_and_model",
    ),
    "-fa": (
        "tests/hub/test_fit_estimate.py::test_quantised_v_without_flash_attention_is_refused",
        "tests/server/test_serve_cli.py::test_serve_child_process_answers",
    ),
    "--repack": (
        "tests/server/test_serve_cli.py::test_serve_child_process_answers",
        "tests/llama/test_cpu_probe.py::test_no_repack_wins_over_a_passing_verdict",
    ),
    "-ctk": (
        "tests/server/test_serve_cli.py::test_serve_child_process_answers",
        "tests/hub/test_fit_estimate.py::test_verdict_wont_fit_suggests_context_and_cache_type",
    ),
    "-ctv": (
        "tests/server/test_serve_cli.py::test_serve_child_process_answers",
        "tests/hub/test_fit_estimate.py::test_quantised_v_without_flash_attention_is_refused",
    ),
    "--rpc": (
        "tests/rpc/test_serve_rpc.py::"
        "test_two_workers_give_the_local_greedy_output_and_hold_the_layers",
    ),
    # no GPU here: the estimate places the layers -ngl asks for, and the value reaches
    # llama.cpp's model parameters (n_gpu_layers)
    "-ngl": (
        "tests/hub/test_fit_estimate.py::test_verdict_fits_on_gpu_and_splits_layers",
        f"{NEW}::test_engine_flags_reach_llama_cpps_context_and_model",
    ),
    # reaching llama.cpp only: a split mode needs more than one device (GPUs), which the
    # test machines lack; llama.cpp's model parameters get it (split_mode)
    "-sm": (f"{NEW}::test_engine_flags_reach_llama_cpps_context_and_model",),
    "-ts": ("tests/rpc/test_placement.py::test_llama_cpp_places_the_layers_where_we_say",),
    "-m": (
        "tests/router/test_router_api.py::test_serve_with_two_models_preloads_and_pins_them",
        "tests/server/test_serve_cli.py::test_not_a_gguf_fails_cleanly",
    ),
    # --- sampling -----------------------------------------------------------------------
    "-s": (f"{NEW}::test_the_seed_is_the_one_of_requests_that_give_none",),
    # --- speculative --------------------------------------------------------------------
    "--spec-draft-n-max": (f"{NEW}::test_draft_n_max_caps_the_draft_models_drafts",),
    "--spec-draft-n-min": (f"{NEW}::test_draft_n_min_leaves_shorter_drafts_unverified",),
    "--spec-draft-p-min": (
        "tests/engine/test_speculative.py::test_draft_p_min_stops_drafting_at_an_unsure_token",
    ),
    "--spec-draft-ngl": (
        "tests/hub/test_fit_estimate.py::test_a_draft_model_is_counted_with_its_own_offload",
    ),
    "--spec-draft-model": (
        "tests/engine/test_speculative.py::test_draft_model_drafts_are_verified_exactly",
    ),
    "--spec-type": (
        f"{NEW}::test_spec_type_turns_the_ngram_drafts_on_and_off",
        "tests/server/test_speculative_api.py::"
        "test_chat_reports_draft_tokens_and_the_stats_count_them",
    ),
    "--spec-ngram-simple-size-n": (f"{NEW}::test_ngram_size_n_is_the_longest_ngram_looked_up",),
    "--spec-ngram-simple-size-m": (f"{NEW}::test_ngram_size_m_caps_the_ngram_drafts",),
    "--spec-ngram-simple-min-hits": (f"{NEW}::test_ngram_min_hits_wants_that_many_occurrences",),
    "--draft": (f"{NEW}::test_draft_n_max_caps_the_draft_models_drafts",),
    "--draft-min": (f"{NEW}::test_draft_n_min_leaves_shorter_drafts_unverified",),
    # --- server -------------------------------------------------------------------------
    "-cram": (
        "tests/server/test_session_cache_api.py::"
        "test_a_session_restored_from_ram_reports_its_cached_tokens",
        "tests/hub/test_fit_estimate.py::test_the_session_cache_budget_is_counted_in_ram",
    ),
    "-kvu": (
        "tests/hub/test_fit_estimate.py::test_context_beyond_training_is_warned",
        "tests/hub/test_fit_estimate.py::test_serve_settings_are_estimated_as_serve_runs_them",
        "tests/engine/test_kv_cache.py::"
        "test_the_count_follows_llama_cpp_through_copies_trims_and_evictions",
    ),
    "--context-shift": (
        "tests/server/test_context_shift.py::"
        "test_a_generation_longer_than_the_slot_keeps_going_when_shifting",
        "tests/server/test_context_shift.py::test_the_shifted_answer_is_llama_servers",
    ),
    "--no-context-shift": (
        "tests/server/test_context_shift.py::test_without_the_flag_it_stops_at_the_context_length",
        "tests/server/test_llama_server_flags.py::"
        "test_aliases_and_no_ops_give_the_settings_of_our_flags",
    ),
    "--pooling": (
        "tests/server/test_embedding_shapes.py::"
        "test_pooling_none_gives_a_vector_per_token_unnormalised",
        "tests/server/test_embedding_shapes.py::test_pooling_none_is_refused_on_v1_embeddings",
    ),
    "-np": (
        "tests/server/test_kv_per_slot.py::"
        "test_a_request_longer_than_a_slot_is_refused_with_the_numbers",
        "tests/server/test_errors.py::test_api_key_and_busy_queue",
    ),
    "-mm": (
        "tests/media/test_image_chat.py::test_the_answer_depends_on_the_image_and_only_on_it",
        "tests/media/test_image_chat.py::test_the_model_says_it_takes_images",
    ),
    "--mmproj-auto": (f"{NEW}::test_no_mmproj_loads_no_projector_beside_the_model",),
    "-a": (f"{NEW}::test_the_alias_is_the_model_id_clients_see",),
    "--host": (
        f"{NEW}::test_serve_listens_on_the_host_and_port_asked",
        "tests/server/test_host_check.py::test_no_host_check_off_loopback",
        "tests/server/test_bind_security.py::test_insecure_bind_logs_a_warning",
    ),
    "--port": (f"{NEW}::test_serve_listens_on_the_host_and_port_asked",),
    "--cors-origins": (
        "tests/server/test_browser_clients.py::"
        "test_llama_servers_cors_origins_list_and_localhost_keyword",
    ),
    "--api-key": ("tests/server/test_errors.py::test_api_key_and_busy_queue",),
    "--slot-save-path": (
        "tests/server/test_slot_actions.py::test_save_erase_restore_continues_token_for_token",
        "tests/server/test_slot_actions.py::test_without_slot_save_path_actions_are_refused",
    ),
    "--media-path": (
        "tests/media/test_media_sources.py::test_local_files_only_under_the_media_path",
    ),
    "--models-dir": (
        "tests/router/test_router_api.py::test_serve_with_two_models_preloads_and_pins_them",
    ),
    "--models-max": (
        "tests/router/test_model_pool.py::test_models_max_evicts_the_least_recently_used",
    ),
    "--models-autoload": (
        "tests/router/test_router_api.py::test_model_management_routes",
        "tests/router/test_model_pool.py::test_models_max_evicts_the_least_recently_used",
    ),
    "--reasoning-format": (
        f"{NEW}::test_the_servers_reasoning_format_is_the_default_of_requests",
        "tests/server/test_reasoning.py::test_a_template_that_opens_think_end_to_end",
    ),
    "--chat-template-file": (
        "tests/server/test_real_clients.py::test_chat_template_file_replaces_the_gguf_template",
    ),
}
