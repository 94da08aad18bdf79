"""The table of every flag of llama-server's ``--help`` and what ``quantdesk serve`` does
with it (data only: :mod:`backend.settings.llama_server_flags` applies it).

The table was made from the ``--help`` of the llama-server built from the llama.cpp that
llama-cpp-python vendors (:data:`LLAMA_CPP_PYTHON`), one entry per flag family with all
its spellings (a family is split where its on and off spellings differ here), and a status:

- ``supported``: the flag means here what it means there (ranges and defaults may differ;
  the text says how). Spellings that serve's settings lack (``--n-gpu-layers``) are
  registered as aliases of ours (``aliases``); a flag that only asks for what is always so
  here (``--jinja``, ``--cont-batching``) is accepted and ignored (``no_op``);
- ``mapped``: accepted, its meaning translated (the text says how);
- ``unsupported``: ``quantdesk serve`` refuses it with exit status 2 and one line saying
  what differs or what to use instead (:func:`add_llama_server_flags`).

``python -m backend.settings.llama_server_flags --markdown`` writes docs/LLAMA_SERVER_FLAGS.md
from it; tests/server/test_llama_server_flags.py keeps that page, this table, the peer's
``--help`` and serve's parser in step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

Status = Literal["supported", "mapped", "unsupported"]
STATUSES: tuple[Status, ...] = ("supported", "mapped", "unsupported")
# the llama-cpp-python release whose vendored llama-server's --help this table covers
LLAMA_CPP_PYTHON = "0.3.36"
# the sections of llama-server's --help, in its order, and the page's heading for each
SECTIONS = {
    "common": "Common",
    "sampling": "Sampling",
    "speculative": "Speculative decoding",
    "example-specific": "Server",
}


@dataclass(frozen=True)
class Alias:
    """A llama-server spelling that serve's settings lack, accepted as our flag ``ours``
    (or as its opposite, for a boolean flag)."""

    spelling: str
    ours: str
    opposite: bool = False


@dataclass(frozen=True)
class LlamaServerFlag:
    """One llama-server flag family: its spellings, what serve does with it, and why."""

    spellings: tuple[str, ...]
    status: Status
    text: str  # supported/mapped: what it does here; unsupported: what differs, or instead
    section: str = ""
    aliases: tuple[Alias, ...] = ()
    no_op: bool = False  # accepted and ignored: it asks for what is always so here


def _ok(spellings: tuple[str, ...], text: str, *aliases: Alias) -> LlamaServerFlag:
    return LlamaServerFlag(spellings, "supported", text, aliases=aliases)


def _always(spellings: tuple[str, ...], text: str) -> LlamaServerFlag:
    return LlamaServerFlag(spellings, "supported", f"always so here: {text}", no_op=True)


def _mapped(spellings: tuple[str, ...], text: str, *aliases: Alias) -> LlamaServerFlag:
    return LlamaServerFlag(spellings, "mapped", text, aliases=aliases)


def _no(spellings: tuple[str, ...], text: str) -> LlamaServerFlag:
    return LlamaServerFlag(spellings, "unsupported", text)


def _nos(text: str, *spellings: str) -> tuple[LlamaServerFlag, ...]:
    """Unsupported flags of one spelling each that share a reason, a row each."""
    return tuple(_no((spelling,), text) for spelling in spellings)


def _section(name: str, *flags: LlamaServerFlag) -> tuple[LlamaServerFlag, ...]:
    return tuple(replace(flag, section=name) for flag in flags)


# reasons shared by several flags
_AFFINITY = "CPU affinity is not set here; start quantdesk under taskset or numactl instead"
_PRIORITY = "thread priority is not set here; start quantdesk under nice or chrt instead"
_POLL = "llama.cpp's default polling level is used; it cannot be set here"
_ROPE = "RoPE and YaRN scaling come from the GGUF's metadata; they cannot be overridden here"
_MOE = "weights cannot be kept on the CPU by kind here; offload fewer layers with -ngl instead"
_OVERRIDE_TENSOR = "tensor buffer types cannot be overridden here"
LORA_REASON = (
    "LoRA adapters are not supported; merge the adapter into the model before converting it"
)
_CONTROL_VECTOR = "control vectors are not supported"
_DOWNLOAD = (
    "serve downloads nothing: `quantdesk models pull REPO FILE` puts a GGUF in the library, "
    "then serve it with -m NAME"
)
_LOGGING = (
    "logging is QuantDesk's own: plain-text lines with time and level on stderr; "
    "`quantdesk -v serve` adds debug lines"
)
_DRAFT_THREADS = "the draft model runs with the served model's threads (-t, -tb)"
_PER_REQUEST = "there are no server-wide sampling defaults: send {} in each request"
_NO_SAMPLER = "{} sampling is not implemented here"
_NGRAM_MOD = (
    "this n-gram drafting is not implemented; --spec-type ngram-simple and its "
    "`--spec-ngram-simple-*` flags are"
)
_UI = "serve has no web UI; `quantdesk` (no command) opens the desktop app"
_AGENT = (
    "built-in agent tools and MCP servers are not served; `quantdesk chat` runs MCP tools "
    "in the terminal"
)
_CHECKPOINTS = "context checkpoints are not implemented here"
_VIDEO = "video input is not supported"
_REASONING = "not settable server-wide here; the chat template's default applies"
_GPU_LAYERS = (
    "layers offloaded to the GPU; -1 offloads all of them here (llama-server: -1 is auto, "
    "-2 all) and 'auto' or 'all' are refused; default -1, all"
)

LLAMA_SERVER_FLAGS: tuple[LlamaServerFlag, ...] = (
    *_section(
        "common",
        _ok(("-h", "--help", "--usage"), "print the usage and exit", Alias("--usage", "--help")),
        _no(
            ("--version",),
            "serve has no version flag; `quantdesk doctor` names the llama.cpp build",
        ),
        _no(
            ("-cl", "--cache-list"),
            "there is no download cache; `quantdesk models list` lists the library",
        ),
        _no(("--completion-bash",), "no shell completion script is generated here"),
        _ok(
            ("-t", "--threads"),
            "CPU threads for generation, 1 or more (llama-server's -1, every core, is refused); "
            "default: the cores, at most 8",
        ),
        _ok(
            ("-tb", "--threads-batch"),
            "CPU threads for prompt processing, 1 or more; default: --threads",
        ),
        _no(("-C", "--cpu-mask"), _AFFINITY),
        _no(("-Cr", "--cpu-range"), _AFFINITY),
        _no(("--cpu-strict",), _AFFINITY),
        _no(("--prio",), _PRIORITY),
        _no(("--poll",), _POLL),
        _no(("-Cb", "--cpu-mask-batch"), _AFFINITY),
        _no(("-Crb", "--cpu-range-batch"), _AFFINITY),
        _no(("--cpu-strict-batch",), _AFFINITY),
        _no(("--prio-batch",), _PRIORITY),
        _no(("--poll-batch",), _POLL),
        _ok(
            ("-c", "--ctx-size"),
            "KV-cache cells in all, ctx-size/parallel for each slot with a stream per slot, as "
            "in llama-server; 256 to 1048576 (0, the model's training context, is refused); "
            "default 16384",
        ),
        _no(
            ("-n", "--predict", "--n-predict"),
            "no server-wide length: a request's max_tokens (n_predict on /completion) sets it, "
            "capped by --max-tokens-limit",
        ),
        _ok(
            ("-b", "--batch-size"),
            "logical batch, the most tokens in one llama_decode; default 512 (llama-server: 2048)",
        ),
        _ok(("-ub", "--ubatch-size"), "physical micro-batch; default 512"),
        _no(
            ("--keep",),
            "no server-wide default: send n_keep in each request (with --context-shift, the "
            "tokens a shift keeps; 0 unless sent)",
        ),
        _always(
            ("--swa-full",),
            "a sliding-window (SWA) model's cache is full size (llama-server's default is not)",
        ),
        _ok(("-fa", "--flash-attn"), "flash attention on, off or auto; default auto"),
        _always(
            ("--no-perf",),
            "libllama's internal timings are off (/v1/stats and /metrics time the requests)",
        ),
        _no(
            ("--perf",),
            "libllama's internal timings are always off here; /v1/stats and /metrics time the "
            "requests",
        ),
        _no(
            ("-e", "--escape", "--no-escape"),
            "serve takes no prompt on its command line, so there is nothing to unescape",
        ),
        *_nos(
            _ROPE,
            "--rope-scaling",
            "--rope-scale",
            "--rope-freq-base",
            "--rope-freq-scale",
            "--yarn-orig-ctx",
            "--yarn-ext-factor",
            "--yarn-attn-factor",
            "--yarn-beta-slow",
            "--yarn-beta-fast",
        ),
        _always(("-kvo", "--kv-offload"), "the KV cache of the layers on the GPU is on the GPU"),
        _no(
            ("-nkvo", "--no-kv-offload"),
            "the KV cache always follows its layers to the GPU; keep more of it in RAM with a "
            "lower -ngl",
        ),
        _ok(
            ("--repack", "-nr", "--no-repack"),
            "weight repacking into extra CPU buffer types on (--repack) or off (-nr); default on, "
            "unless the CPU probe finds the repacked kernels fault on this machine",
        ),
        _no(("--no-host",), "host buffers are llama.cpp's default and cannot be bypassed here"),
        _ok(("-ctk", "--cache-type-k"), "KV-cache type for K, the same types; default f16"),
        _ok(
            ("-ctv", "--cache-type-v"),
            "KV-cache type for V, the same types (a quantised V needs flash attention); default "
            "f16",
        ),
        _no(
            ("-dt", "--defrag-thold"),
            "deprecated in llama-server, and without effect there; leave it out",
        ),
        _ok(
            ("--rpc",), "comma-separated RPC workers, host:port; start each with `quantdesk worker`"
        ),
        _no(
            ("-lm", "--load-mode"),
            "the model loads with llama.cpp's default mode (memory-mapped); mlock and direct I/O "
            "cannot be chosen here",
        ),
        _no(
            ("-lzm", "--lazy-mode"), "not settable here; tensors load as llama.cpp does by default"
        ),
        _no(("--numa",), "no NUMA strategy is set here; start quantdesk under numactl instead"),
        _no(
            ("-dev", "--device"),
            "devices are not picked by name here: the local GPUs and the --rpc workers are used, "
            "split by -ts; hide a GPU with CUDA_VISIBLE_DEVICES",
        ),
        _no(
            ("--list-devices",),
            "`quantdesk doctor` says whether there is a local GPU and an RPC backend",
        ),
        _no(("-ot", "--override-tensor"), _OVERRIDE_TENSOR),
        _no(("-cmoe", "--cpu-moe"), _MOE),
        _no(("-ncmoe", "--n-cpu-moe"), _MOE),
        _no(("-ncffn", "--n-cpu-ffn"), _MOE),
        _mapped(
            ("-ngl", "--gpu-layers", "--n-gpu-layers"),
            _GPU_LAYERS,
            Alias("--n-gpu-layers", "--gpu-layers"),
        ),
        _ok(
            ("-sm", "--split-mode"),
            "none, layer or row across devices (tensor is refused); default layer",
        ),
        _ok(
            ("-ts", "--tensor-split"),
            "proportions per device, comma-separated, the --rpc workers' devices first; default: "
            "in proportion to each device's free memory",
        ),
        _no(
            ("-mg", "--main-gpu"),
            "the main GPU cannot be chosen here; order the GPUs with CUDA_VISIBLE_DEVICES",
        ),
        _no(
            ("-fit", "--fit"),
            "nothing is adjusted to fit at load: `quantdesk models fit` estimates beforehand, and "
            "router mode keeps within --memory-budget",
        ),
        _no(
            ("-fitt", "--fit-target"),
            "nothing is adjusted to fit at load; router mode leaves --memory-reserve free on each "
            "device",
        ),
        _no(
            ("-fitc", "--fit-ctx"),
            "nothing is adjusted to fit at load: the context is -c as given (`quantdesk models "
            "fit` says whether it fits)",
        ),
        _no(("--check-tensors",), "tensor data is not validated at load here"),
        _no(("--override-kv",), "GGUF metadata cannot be overridden here"),
        _always(
            ("--op-offload",),
            "host tensor operations are offloaded to the device (llama.cpp's default)",
        ),
        _no(
            ("--no-op-offload",),
            "host tensor operations are always offloaded to the device here (llama.cpp's default)",
        ),
        *_nos(LORA_REASON, "--lora", "--lora-scaled"),
        *_nos(
            _CONTROL_VECTOR,
            "--control-vector",
            "--control-vector-scaled",
            "--control-vector-layer-range",
        ),
        _mapped(
            ("-m", "--model"),
            "a GGUF file, a library name or 'default' (the embedded SmolLM2); given more than "
            "once it serves each of them, and left out the whole library (router mode)",
        ),
        _no(("-mu", "--model-url"), _DOWNLOAD),
        _no(("-dr", "--docker-repo"), _DOWNLOAD),
        _no(("-hf", "-hfr", "--hf-repo"), _DOWNLOAD),
        _no(("-hff", "--hf-file"), _DOWNLOAD),
        _no(
            ("-hft", "--hf-token"),
            "serve downloads nothing; `quantdesk models pull` reads HF_TOKEN",
        ),
        _no(("--log-disable",), _LOGGING),
        _no(("--log-file",), f"{_LOGGING}; redirect stderr to a file"),
        _no(("--log-jsonl", "--no-log-jsonl"), _LOGGING),
        _no(("--log-colors",), _LOGGING),
        _no(
            ("-v", "--verbose", "--log-verbose"),
            "give -v before the command for debug logging: `quantdesk -v serve`",
        ),
        _no(
            ("--offline",),
            "serve downloads nothing, so there is nothing to keep offline; leave it out",
        ),
        _no(("-lv", "--verbosity", "--log-verbosity"), _LOGGING),
        _no(("--log-prefix", "--no-log-prefix"), _LOGGING),
        _no(("--log-timestamps", "--no-log-timestamps"), _LOGGING),
        _no(
            ("--spec-draft-type-k", "-ctkd", "--cache-type-k-draft"),
            "the draft model's KV cache is always f16 here",
        ),
        _no(
            ("--spec-draft-type-v", "-ctvd", "--cache-type-v-draft"),
            "the draft model's KV cache is always f16 here",
        ),
    ),
    *_section(
        "sampling",
        _no(("--samplers",), "the order of the samplers is fixed here"),
        _ok(("-s", "--seed"), "the seed of requests that give none; -1, the default, a random one"),
        _no(("--sampler-seq", "--sampling-seq"), "the order of the samplers is fixed here"),
        _no(("--ignore-eos",), _PER_REQUEST.format("ignore_eos")),
        _no(("--temp", "--temperature"), _PER_REQUEST.format("temperature")),
        _no(("--top-k",), _PER_REQUEST.format("top_k")),
        _no(("--top-p",), _PER_REQUEST.format("top_p")),
        _no(("--min-p",), _PER_REQUEST.format("min_p")),
        _no(("--top-nsigma", "--top-n-sigma"), _NO_SAMPLER.format("top-n-sigma")),
        *_nos(_NO_SAMPLER.format("XTC"), "--xtc-probability", "--xtc-threshold"),
        _no(("--typical", "--typical-p"), _NO_SAMPLER.format("locally typical")),
        _no(("--repeat-last-n",), _PER_REQUEST.format("repeat_last_n (on /completion)")),
        _no(("--repeat-penalty",), _PER_REQUEST.format("repeat_penalty")),
        _no(("--presence-penalty",), _PER_REQUEST.format("presence_penalty")),
        _no(("--frequency-penalty",), _PER_REQUEST.format("frequency_penalty")),
        *_nos(
            _NO_SAMPLER.format("DRY"),
            "--dry-multiplier",
            "--dry-base",
            "--dry-allowed-length",
            "--dry-penalty-last-n",
            "--dry-sequence-breaker",
        ),
        *_nos(_NO_SAMPLER.format("adaptive-p"), "--adaptive-target", "--adaptive-decay"),
        *_nos(_NO_SAMPLER.format("dynamic-temperature"), "--dynatemp-range", "--dynatemp-exp"),
        *_nos(_NO_SAMPLER.format("Mirostat"), "--mirostat", "--mirostat-lr", "--mirostat-ent"),
        _no(("-l", "--logit-bias"), _PER_REQUEST.format("logit_bias")),
        *_nos(_PER_REQUEST.format("grammar"), "--grammar", "--grammar-file"),
        _no(
            ("-j", "--json-schema"),
            _PER_REQUEST.format("response_format (json_schema on /completion)"),
        ),
        _no(
            ("-jf", "--json-schema-file"),
            _PER_REQUEST.format("response_format (json_schema on /completion)"),
        ),
        _no(("-bs", "--backend-sampling"), "backend sampling is not used here"),
    ),
    *_section(
        "speculative",
        _no(
            ("--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft"),
            f"{_DOWNLOAD} (-md NAME for a draft model)",
        ),
        _no(("--spec-draft-threads", "-td", "--threads-draft"), _DRAFT_THREADS),
        _no(("--spec-draft-threads-batch", "-tbd", "--threads-batch-draft"), _DRAFT_THREADS),
        _no(("--spec-draft-cpu-mask", "-Cd", "--cpu-mask-draft"), _AFFINITY),
        _no(("--spec-draft-cpu-range", "-Crd", "--cpu-range-draft"), _AFFINITY),
        _no(("--spec-draft-cpu-strict", "--cpu-strict-draft"), _AFFINITY),
        _no(("--spec-draft-prio", "--prio-draft"), _PRIORITY),
        _no(("--spec-draft-poll", "--poll-draft"), _POLL),
        _no(("--spec-draft-cpu-mask-batch", "-Cbd", "--cpu-mask-batch-draft"), _AFFINITY),
        _no(("--spec-draft-cpu-strict-batch", "--cpu-strict-batch-draft"), _AFFINITY),
        _no(("--spec-draft-prio-batch", "--prio-batch-draft"), _PRIORITY),
        _no(("--spec-draft-poll-batch", "--poll-batch-draft"), _POLL),
        _no(("--spec-draft-override-tensor", "-otd", "--override-tensor-draft"), _OVERRIDE_TENSOR),
        _no(("--spec-draft-cpu-moe", "-cmoed", "--cpu-moe-draft"), _MOE.replace("-ngl", "-ngld")),
        _no(
            ("--spec-draft-n-cpu-moe", "--spec-draft-ncmoe", "-ncmoed", "--n-cpu-moe-draft"),
            _MOE.replace("-ngl", "-ngld"),
        ),
        _ok(
            ("--spec-draft-n-max",),
            "most tokens the draft model drafts per step (0: none); default 16 (llama-server: 3)",
        ),
        _ok(("--spec-draft-n-min",), "fewest draft tokens worth verifying; default 0"),
        _no(
            ("--spec-synth-len",),
            "synthetic acceptance, llama-server's benchmarking aid, is not implemented",
        ),
        _no(
            ("--spec-synth-rates",),
            "synthetic acceptance, llama-server's benchmarking aid, is not implemented",
        ),
        _no(
            ("--spec-draft-p-split", "--draft-p-split"),
            "split (tree) drafting is not implemented: one draft per sequence and step",
        ),
        _ok(
            ("--spec-draft-p-min", "--draft-p-min"),
            "the draft model stops at a token it gives less than this probability; default 0.75 "
            "(llama-server: 0)",
        ),
        _no(
            ("--spec-draft-backend-sampling", "--no-spec-draft-backend-sampling"),
            "backend sampling is not used for drafts here",
        ),
        _no(
            ("--spec-draft-device", "-devd", "--device-draft"),
            "devices are not picked by name here; -ngld offloads the draft model's layers",
        ),
        _mapped(
            ("--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"),
            f"draft model {_GPU_LAYERS}",
        ),
        _ok(
            ("--spec-draft-model", "-md", "--model-draft"),
            "draft model, a GGUF file or a library name, whose vocabulary matches the served "
            "model's; -md alone turns on draft-simple",
        ),
        _mapped(
            ("--spec-type",),
            "none, ngram-simple and draft-simple (other types are refused); default ngram-simple "
            "(llama-server: none), whose drafts also fall back to shorter n-grams "
            "(--spec-ngram-simple-size-n-min) and are verified only as far as it pays "
            "(--spec-draft-policy); the output is the same either way. Given twice, the last one "
            "counts (llama-server adds them up)",
        ),
        *_nos(
            _NGRAM_MOD,
            "--spec-ngram-mod-n-min",
            "--spec-ngram-mod-n-max",
            "--spec-ngram-mod-n-match",
        ),
        _ok(
            ("--spec-ngram-simple-size-n",), "ngram-simple: length of the lookup n-gram; default 12"
        ),
        _ok(
            ("--spec-ngram-simple-size-m",),
            "ngram-simple: most tokens drafted after a match; default 48",
        ),
        _ok(
            ("--spec-ngram-simple-min-hits",),
            "ngram-simple: earlier occurrences the n-gram needs before it drafts; default 1",
        ),
        *_nos(
            _NGRAM_MOD,
            "--spec-ngram-map-k-size-n",
            "--spec-ngram-map-k-size-m",
            "--spec-ngram-map-k-min-hits",
            "--spec-ngram-map-k4v-size-n",
            "--spec-ngram-map-k4v-size-m",
            "--spec-ngram-map-k4v-min-hits",
        ),
        _mapped(
            ("--draft", "--draft-n", "--draft-max"),
            "removed from llama-server; accepted here as --spec-draft-n-max",
        ),
        _mapped(
            ("--draft-min", "--draft-n-min"),
            "removed from llama-server; accepted here as --spec-draft-n-min",
        ),
        _no(("--spec-ngram-size-n",), "removed from llama-server; use --spec-ngram-simple-size-n"),
        _no(("--spec-ngram-size-m",), "removed from llama-server; use --spec-ngram-simple-size-m"),
        _no(
            ("--spec-ngram-min-hits",),
            "removed from llama-server; use --spec-ngram-simple-min-hits",
        ),
    ),
    *_section(
        "example-specific",
        _no(
            ("-lcs", "--lookup-cache-static"),
            "lookup caches are not implemented; --spec-type ngram-simple drafts from the prompt "
            "and the output",
        ),
        _no(
            ("-lcd", "--lookup-cache-dynamic"),
            "lookup caches are not implemented; --spec-type ngram-simple drafts from the prompt "
            "and the output",
        ),
        _no(
            ("--kv-unified-per-slot",),
            "not implemented; with a KV stream per slot (the default, -no-kvu) each slot gets "
            "ctx-size/parallel cells",
        ),
        _no(("-ctxcp", "--ctx-checkpoints", "--swa-checkpoints"), _CHECKPOINTS),
        _no(("-cms", "--checkpoint-min-step"), _CHECKPOINTS),
        _ok(
            ("-cram", "--cache-ram"),
            "MiB of host RAM for the KV of sessions whose slot served another request, restored "
            "when a prompt shares their prefix; 0 turns it off (-1, no limit, is refused); "
            "default: 8192 or a tenth of the available RAM, the smaller",
            Alias("-cram", "--cache-ram"),
        ),
        _ok(
            ("-kvu", "--kv-unified", "-no-kvu", "--no-kv-unified"),
            "one KV cache shared by all slots (-kvu), or a stream per slot (-no-kvu: the default "
            "here, and llama-server's with -np N)",
        ),
        _no(
            ("--cache-idle-slots", "--no-cache-idle-slots"),
            "not settable here: an idle slot keeps its prompt, and its session moves to "
            "--cache-ram when the slot serves another request",
        ),
        _ok(
            ("--context-shift",),
            "a generation that fills its slot drops half of what follows n_keep and goes on "
            "(truncated: true); with a KV stream per slot (not --kv-unified) and text only",
        ),
        _ok(
            ("--no-context-shift",),
            "generation stops at the context length with finish_reason length and truncated: "
            "true (llama-server's default)",
        ),
        _no(
            ("-r", "--reverse-prompt"),
            "interactive mode only; send stop strings in the request instead",
        ),
        _no(("-sp", "--special"), "special-token output cannot be turned on here"),
        _always(("--warmup",), "the model runs a short warm-up before /health answers 200"),
        _no(("--no-warmup",), "the model is always warmed up before /health answers 200"),
        _no(
            ("--spm-infill",),
            "the order of /infill's prefix, suffix and middle cannot be chosen here",
        ),
        _ok(
            ("--pooling",),
            "pooling type for embeddings: none gives a vector per token on /embeddings and "
            "/v1/embeddings refuses it, as llama-server does; rank leaves the model reranking "
            "only; default: the type the GGUF declares, mean when it declares none "
            "(llama-server: none)",
        ),
        _ok(
            ("-np", "--parallel"),
            "slots, the sequences generated at once, 1 to 128 (llama-server's -1, auto, is "
            "refused); default 4",
        ),
        _always(("-cb", "--cont-batching"), "batching is continuous"),
        _no(("-nocb", "--no-cont-batching"), "batching is always continuous here"),
        _ok(
            ("-mm", "--mmproj"),
            "multimodal projector GGUF for image and audio input; default here: a lone "
            "`mmproj*.gguf` beside the model",
        ),
        _no(
            ("-mmu", "--mmproj-url"),
            "serve downloads nothing: `quantdesk models pull REPO FILE` fetches a projector, then "
            "give it with -mm",
        ),
        _mapped(
            ("--mmproj-auto", "--no-mmproj", "--no-mmproj-auto"),
            "--no-mmproj loads no projector, not even a lone `mmproj*.gguf` beside the model "
            "(llama-server: none downloaded with -hf); --mmproj-auto is the default",
            Alias("--no-mmproj-auto", "--no-mmproj"),
            Alias("--mmproj-auto", "--no-mmproj", opposite=True),
        ),
        _no(
            ("--mmproj-offload", "--no-mmproj-offload"),
            "the projector runs on the GPU exactly when the model has layers there (-ngl)",
        ),
        _no(
            ("-mmdev", "--mmproj-device"),
            "devices are not picked by name here; the projector runs on the GPU when the model "
            "has layers there (-ngl)",
        ),
        _no(
            ("--image-min-tokens",),
            "an image takes the number of tokens its projector gives it; that cannot be bounded "
            "here",
        ),
        _no(
            ("--image-max-tokens",),
            "an image takes the number of tokens its projector gives it; that cannot be bounded "
            "here",
        ),
        _no(
            ("--mtmd-batch-max-tokens",),
            "an image is encoded in one call here, so its tokens must fit --batch-size",
        ),
        *_nos(_VIDEO, "--video-fps", "--video-timestamp-interval", "--video-ffmpeg-dir"),
        _mapped(
            ("-a", "--alias"),
            "the one model id /v1/models shows (default: the file name without .gguf); "
            "llama-server's comma-separated list of several aliases is refused",
        ),
        _no(("--tags",), "model tags are not implemented"),
        _no(
            ("--embd-normalize",),
            "embeddings are L2-normalised (llama-server's default, 2); a request's "
            "embd_normalize chooses another norm for its vectors",
        ),
        _mapped(
            ("--host",),
            "one address to bind, IPv4 or IPv6 (comma-separated lists and .sock paths are not "
            "supported); an address other than loopback needs --api-key or --insecure",
        ),
        _ok(("--port",), "TCP port, 0 picking a free one (see --port-file); default 8080"),
        _no(("--reuse-port",), "the port is bound for this server alone"),
        _no(("--path",), "no static files are served"),
        _mapped(
            ("--cors-origins",),
            "comma-separated list and the localhost keyword as llama-server; loopback origins are "
            "always allowed here, and the default is loopback only, not `*`",
        ),
        _no(
            ("--cors-methods",),
            "the allowed CORS methods are GET, POST, DELETE and OPTIONS; they cannot be set here",
        ),
        _no(
            ("--cors-headers",),
            "every request header is allowed by CORS (llama-server's default, `*`); it cannot be "
            "set here",
        ),
        _no(
            ("--cors-credentials", "--no-cors-credentials"),
            "CORS never allows credentials here (llama-server allows them by default); send the "
            "API key in the Authorization header",
        ),
        _no(
            ("--api-prefix",),
            "the API is served from the root only; put a reverse proxy in front to serve it under "
            "a prefix",
        ),
        _no(("--ui-config", "--webui-config"), _UI),
        _no(("--ui-config-file", "--webui-config-file"), _UI),
        _no(
            ("--ui-mcp-proxy", "--webui-mcp-proxy", "--no-ui-mcp-proxy", "--no-webui-mcp-proxy"),
            _AGENT,
        ),
        *_nos(_AGENT, "--tools", "--tools-runtime", "--mcp-servers-config", "--mcp-servers-json"),
        _no(("-ag", "--agent", "-no-ag", "--no-agent"), _AGENT),
        _no(("--ui", "--webui"), _UI),
        _always(
            ("--no-ui", "--no-webui"),
            "serve has no web UI (`quantdesk`, no command, opens the desktop app)",
        ),
        _no(
            ("--embedding", "--embeddings"),
            "there is no embedding-only mode: /v1/embeddings is always served, beside generation",
        ),
        _no(
            ("--rerank", "--reranking"),
            "/v1/rerank is always served for a reranker GGUF; leave the flag out",
        ),
        _mapped(
            ("--api-key",),
            "one key, required as 'Authorization: Bearer KEY' (or x-api-key) on every API call; "
            "llama-server's comma-separated list of several keys is refused",
        ),
        _no(("--api-key-file",), "give the key with --api-key or QUANTDESK_API_KEY"),
        _no(("--ssl-key-file",), "no TLS here; put a TLS-terminating reverse proxy in front"),
        _no(("--ssl-cert-file",), "no TLS here; put a TLS-terminating reverse proxy in front"),
        _no(("--chat-template-kwargs",), "extra chat template arguments cannot be given here"),
        _no(("-to", "--timeout"), "HTTP timeouts are uvicorn's defaults; they cannot be set here"),
        _no(("--sse-ping-interval",), "the SSE ping interval cannot be set here"),
        _no(
            ("--threads-http",),
            "HTTP requests are served by one asyncio event loop; there is no HTTP thread pool to "
            "size",
        ),
        _always(("--cache-prompt",), "prompt prefixes are reused from the cache"),
        _no(
            ("--no-cache-prompt",),
            "prompt caching is always on here (the output does not depend on it)",
        ),
        _no(
            ("--cache-reuse",),
            "reusing chunks by KV shifting is not implemented; a shared prefix is reused",
        ),
        _always(("--metrics",), "/metrics (Prometheus) is served, behind --api-key"),
        _no(("--props",), "POST /props is not implemented; GET /props is always served"),
        _always(("--slots",), "GET /slots is served (behind --api-key)"),
        _no(("--no-slots",), "GET /slots is always served here (behind --api-key)"),
        _ok(
            ("--slot-save-path",),
            "folder for POST /slots/{id}?action=save|restore; files are QuantDesk's session "
            "format (keyed by model, build and KV settings), not llama-server's; refused with "
            "--kv-unified, for a slot that is processing (llama-server waits) and for "
            "sliding-window, recurrent and hybrid models",
        ),
        _ok(
            ("--media-path",),
            "folder whose files requests may name as file://NAME; default: no local files are read",
        ),
        _mapped(
            ("--models-dir",),
            "the library folder: every model under it (sub-folders too) is served by its library "
            "name, beside the embedded default; default QUANTDESK_HOME/models, served whenever -m "
            "is left out",
        ),
        _no(
            ("--models-preset",),
            "per-model presets are not read; the engine flags given to serve are every model's "
            "defaults",
        ),
        _ok(
            ("--models-max",),
            "most models resident at once (router mode), 1 to 64 (0, unlimited, is refused); "
            "default 4",
        ),
        _ok(
            ("--models-autoload", "--no-models-autoload"),
            "load a model a request names when it is not resident (router mode); default on",
        ),
        _always(("--jinja",), "chat templates are rendered with Jinja"),
        _no(("--no-jinja",), "chat templates are always rendered with Jinja here"),
        _ok(
            ("--reasoning-format",),
            "auto, deepseek or none (deepseek-legacy is refused); default auto",
        ),
        _no(("-rea", "--reasoning"), _REASONING),
        _no(("--reasoning-effort",), _REASONING),
        _no(("--reasoning-budget",), "thinking budgets are not implemented"),
        _no(("--reasoning-budget-message",), "thinking budgets are not implemented"),
        _no(
            ("--reasoning-preserve", "--no-reasoning-preserve"),
            "not settable here; the chat template gets the history as the client sends it",
        ),
        _no(
            ("--chat-template",),
            "built-in template names and inline templates are not accepted; save the template to "
            "a file and give --chat-template-file",
        ),
        _ok(("--chat-template-file",), "a Jinja chat template file used instead of the GGUF's"),
        _no(
            ("--skip-chat-parsing", "--no-skip-chat-parsing"),
            "not settable here; --reasoning-format none leaves the thinking in the text",
        ),
        _no(
            ("--prefill-assistant", "--no-prefill-assistant"),
            "not settable server-wide; a chat request's continue_final_message decides whether a "
            "final assistant message is continued",
        ),
        _no(
            ("-sps", "--slot-prompt-similarity"),
            "how a request's slot is chosen cannot be tuned here",
        ),
        _no(("--lora-init-without-apply",), LORA_REASON),
        _no(
            ("--sleep-idle-seconds",),
            "one model is never unloaded while served; in router mode --idle-ttl unloads an idle "
            "model",
        ),
        _no(("--log-prompts-dir",), "prompts are not logged to files"),
        *_nos(
            _DOWNLOAD,
            "--embd-gemma-default",
            "--fim-qwen-1.5b-default",
            "--fim-qwen-3b-default",
            "--fim-qwen-7b-default",
            "--fim-qwen-7b-spec",
            "--fim-qwen-14b-spec",
            "--fim-qwen-30b-default",
            "--gpt-oss-20b-default",
            "--gpt-oss-120b-default",
            "--vision-gemma-4b-default",
            "--vision-gemma-12b-default",
        ),
        _no(
            ("--spec-default",),
            "speculative decoding is on by default here (--spec-type ngram-simple); -md adds a "
            "draft model",
        ),
    ),
)
