"""A Llama-style decoder with random weights and a static KV cache, for lesson 10 (decoding).

Nothing is downloaded: the weights are seeded random numbers, which time exactly as trained ones do
(the same shapes, the same bytes). `LLAMA_1B` has the shape of Llama 3.2 1B (its config.json:
hidden 2048, 16 layers, 32 query and 8 KV heads of 64, MLP 8192, vocabulary 128256, embedding
tied to the output head): 1.24 B parameters, 2.47 GB in bf16. `TINY` runs on a CPU.

    model = Decoder(TINY, batch=2, max_seq=64)            # weights and an empty cache
    logits = model.prefill(prompt)                        # [B, T] tokens -> [B, vocab], cache filled
    logits = model.decode(tokens, seq_lens)               # one new token per sequence
    step = model.graphed_step()                           # the same step as one CUDA graph (GPU)

The cache is allocated once for `max_seq` positions ("static": shapes never change, so a step can be
captured as a CUDA graph). A decode step writes the new token's K and V at position seq_lens[b] and
attends over positions [0, seq_lens[b]] with the split-KV kernel (`attention="triton"`, which reads
only the live positions) or with SDPA over the whole cache and a mask (`attention="sdpa"`, which
reads all `max_seq` positions every step, as a plain static-cache implementation does).

Linear layers run in the model's dtype, or with 8-bit weights (`quantize("int8")`, or
"float8_e4m3fn" on a GPU): the weight-only kernel of `kernels/weight_only_matmul.py`.

`fused=True` runs the decode step on the kernels of `kernels/decode_step.py`: each matmul a matrix-vector
kernel with the RMSNorm before it, the SwiGLU and the residual add folded in, and the rotary embedding with the
cache write as one launch: 7 launches per layer instead of ~46 (5 with `decode_step.one_launch_attention()`, where
`kernels/rope_attention.py` also does the attention; the prefill is unchanged). Its kernels are
written for small batches (one multiply-add per weight loaded, no tensor cores).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..kernels import decode_step
from ..kernels.decode_attention import decode_attention
from ..kernels.decode_step import embed_and_lengths, fused_linear, greedy_next, rope_and_cache
from ..kernels.rope_attention import rope_attention
from ..kernels.weight_only_matmul import quantize as quantize_weight
from ..kernels.weight_only_matmul import weight_only_matmul


@dataclass(frozen=True)
class DecoderConfig:
    vocab: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    ffn: int
    rope_theta: float = 500_000.0
    norm_eps: float = 1e-5

    def layer_shapes(self) -> dict[str, tuple[int, int]]:
        """The matmul weights of one layer, [out, in]: fused q/k/v, output, fused gate/up, down."""
        qkv = (self.n_heads + 2 * self.n_kv_heads) * self.head_dim
        return {"wqkv": (qkv, self.d_model), "wo": (self.d_model, self.n_heads * self.head_dim),
                "w13": (2 * self.ffn, self.d_model), "w2": (self.d_model, self.ffn)}

    def n_params(self) -> int:
        per_layer = sum(a * b for a, b in self.layer_shapes().values()) + 2 * self.d_model  # + two norms
        return self.vocab * self.d_model + self.n_layers * per_layer + self.d_model  # tied head, final norm

    def matmul_params(self) -> int:
        """Parameters a decode step multiplies by: every layer's matmuls and the output head (the
        embedding is only looked up, one row per token; here it is the head too, so it is read whole)."""
        return self.n_layers * sum(a * b for a, b in self.layer_shapes().values()) + self.vocab * self.d_model


LLAMA_1B = DecoderConfig(vocab=128_256, d_model=2048, n_layers=16, n_heads=32, n_kv_heads=8, head_dim=64, ffn=8192)
# Llama 3.1 8B's shapes (hidden 4096, 32 layers, 32 query and 8 KV heads of 128, MLP 14336), here with the head
# tied to the embedding as LLAMA_1B's is (7.5 B parameters, 15 GB in bf16): a decode step reads the same bytes
# either way. The size gpt-fast's bandwidth figures are reported at, for `gpuprinciples bench`.
LLAMA_8B = DecoderConfig(vocab=128_256, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, ffn=14336)
TINY = DecoderConfig(vocab=512, d_model=128, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, ffn=256)


def kv_cache_bytes(config: DecoderConfig, batch: int, seq_len: int, dtype: torch.dtype) -> int:
    """K and V, for every layer, sequence, position and KV head: the package's solution of the exercise."""
    return 2 * config.n_layers * batch * seq_len * config.n_kv_heads * config.head_dim * dtype.itemsize


def decode_step_bytes(config: DecoderConfig, batch: int, context: int, weight_bytes: float = 2,
                      kv_dtype: torch.dtype = torch.bfloat16) -> float:
    """The bytes one decode step must read at least: every matmul weight once (`weight_bytes` per
    parameter), and each sequence's cache up to `context` positions."""
    return config.matmul_params() * weight_bytes + kv_cache_bytes(config, batch, context, kv_dtype)


def decode_step_flops(config: DecoderConfig, batch: int, context: int) -> float:
    """2 FLOPs per matmul weight per sequence, plus attention's two products over the cache."""
    attention = 4 * config.n_layers * config.n_heads * config.head_dim * context
    return batch * (2 * config.matmul_params() + attention)


# -------------------------------------------------------------------------------------------------
# The model
# -------------------------------------------------------------------------------------------------


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (i, i + d/2) of the last dim; cos and sin broadcast over the heads (dim -2)."""
    x1, x2 = x.float().chunk(2, dim=-1)
    c, s = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).to(x.dtype)


class Decoder:
    """Weights, a static KV cache for `batch` sequences of up to `max_seq` positions, and the two passes."""

    def __init__(self, config: DecoderConfig, batch: int, max_seq: int, *, device=None, dtype=None, seed: int = 0,
                 attention: str = "triton", fused: bool = False):
        device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
        assert attention in ("triton", "sdpa")
        self.config, self.batch, self.max_seq, self.device, self.dtype = config, batch, max_seq, device, dtype
        self.attention = attention
        self.fused = fused  # decode with kernels/decode_step.py's fused kernels (attention: the split-KV kernel)
        self.weight_format = dtype  # or torch.int8 / torch.float8_e4m3fn after quantize()
        gen = torch.Generator(device=device).manual_seed(seed)

        def normal(*shape, std=0.02):
            return (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * std).to(dtype)

        c = config
        self.embed = normal(c.vocab, c.d_model)
        self.layers = []
        for _ in range(c.n_layers):
            layer = {name: normal(*shape) for name, shape in c.layer_shapes().items()}
            layer["norm1"] = torch.ones(c.d_model, device=device, dtype=dtype)
            layer["norm2"] = torch.ones(c.d_model, device=device, dtype=dtype)
            self.layers.append(layer)
        self.norm = torch.ones(c.d_model, device=device, dtype=dtype)
        self.head = self.embed  # tied
        self.quantized: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # id(weight) -> (w8, scale)
        # the cache: [layer, batch, KV head, position, head dim], allocated once
        shape = (c.n_layers, batch, c.n_kv_heads, max_seq, c.head_dim)
        self.k_cache = torch.zeros(shape, device=device, dtype=dtype)
        self.v_cache = torch.zeros(shape, device=device, dtype=dtype)
        inv = 1.0 / c.rope_theta ** (torch.arange(0, c.head_dim, 2, device=device, dtype=torch.float32) / c.head_dim)
        angles = torch.arange(max_seq, device=device, dtype=torch.float32)[:, None] * inv[None, :]
        self.cos, self.sin = angles.cos(), angles.sin()  # [max_seq, head_dim / 2]
        self.rows = torch.arange(batch, device=device)
        # per layer, where rope_attention's programs count themselves in (kept at zero between steps)
        self.split_counts = torch.zeros((c.n_layers, batch * c.n_kv_heads), device=device, dtype=torch.int32)

    # --- weights ---------------------------------------------------------------------------------

    def quantize(self, fmt: torch.dtype = torch.int8) -> "Decoder":
        """Store every matmul weight (and the head) in 8 bits, one scale per output channel."""
        for weight in [self.head] + [layer[name] for layer in self.layers for name in self.config.layer_shapes()]:
            self.quantized[id(weight)] = quantize_weight(weight, fmt)
        self.weight_format = fmt
        return self

    def weight_bytes(self) -> int:
        """Bytes of the weights a decode step reads (matmul weights and head, with their scales)."""
        if self.quantized:
            return sum(w.numel() * w.element_size() + s.numel() * 4 for w, s in self.quantized.values())
        return self.config.matmul_params() * self.embed.element_size()

    def _packed(self, weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(the weight as stored, its scales or None)."""
        return self.quantized.get(id(weight), (weight, None))

    def _linear(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        packed = self.quantized.get(id(weight))
        if packed is None:
            return F.linear(x, weight)
        flat = x.reshape(-1, x.shape[-1])
        return weight_only_matmul(flat, *packed).view(*x.shape[:-1], -1)

    # --- the two passes --------------------------------------------------------------------------

    def _split_heads(self, qkv: torch.Tensor):
        c = self.config
        q, k, v = qkv.split([c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim, c.n_kv_heads * c.head_dim], dim=-1)
        shape = qkv.shape[:-1]
        return (q.reshape(*shape, c.n_heads, c.head_dim), k.reshape(*shape, c.n_kv_heads, c.head_dim),
                v.reshape(*shape, c.n_kv_heads, c.head_dim))

    def _mlp(self, x: torch.Tensor, layer: dict) -> torch.Tensor:
        gate, up = self._linear(_rms_norm(x, layer["norm2"], self.config.norm_eps), layer["w13"]).chunk(2, dim=-1)
        return x + self._linear(F.silu(gate) * up, layer["w2"])

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self._linear(_rms_norm(x, self.norm, self.config.norm_eps), self.head)

    @torch.no_grad()
    def prefill(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, T] (every sequence starts at position 0): fill the cache's first T positions and
        return the logits of the last token [B, vocab]. Causal attention with SDPA: compute-bound."""
        B, T = tokens.shape
        c = self.config
        x = self.embed[tokens]
        cos, sin = self.cos[:T], self.sin[:T]
        for i, layer in enumerate(self.layers):
            q, k, v = self._split_heads(self._linear(_rms_norm(x, layer["norm1"], c.norm_eps), layer["wqkv"]))
            q, k = _rope(q, cos[None], sin[None]), _rope(k, cos[None], sin[None])
            self.k_cache[i, :B, :, :T] = k.transpose(1, 2)
            self.v_cache[i, :B, :, :T] = v.transpose(1, 2)
            attn = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=True, enable_gqa=True)
            x = x + self._linear(attn.transpose(1, 2).reshape(B, T, -1), layer["wo"])
            x = self._mlp(x, layer)
        return self._logits(x[:, -1])

    @torch.no_grad()
    def decode(self, tokens: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
        """One new token per sequence: tokens [B] at positions seq_lens [B] (int32, on the device; the
        number of tokens already cached). Writes their K and V there and returns the logits [B, vocab].
        Nothing here reads a tensor back to the host: the step can be captured as a CUDA graph."""
        if self.fused:
            return self._decode_fused(tokens, seq_lens)
        c = self.config
        B = tokens.shape[0]
        rows = self.rows[:B]
        positions = seq_lens.long()
        lengths = seq_lens + 1  # with the new token
        x = self.embed[tokens]
        cos, sin = self.cos[positions], self.sin[positions]
        if self.attention == "sdpa":
            mask = (torch.arange(self.max_seq, device=self.device)[None, :] < lengths[:, None])[:, None, None, :]
        for i, layer in enumerate(self.layers):
            q, k, v = self._split_heads(self._linear(_rms_norm(x, layer["norm1"], c.norm_eps), layer["wqkv"]))
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            k_cache, v_cache = self.k_cache[i, :B], self.v_cache[i, :B]
            k_cache[rows, :, positions] = k
            v_cache[rows, :, positions] = v
            if self.attention == "triton":
                attn = decode_attention(q, k_cache, v_cache, lengths)
            else:  # the G query heads of a KV head as G query rows: each KV head read once, by any backend
                attn = F.scaled_dot_product_attention(q.view(B, c.n_kv_heads, -1, c.head_dim), k_cache, v_cache,
                                                      attn_mask=mask)
            x = x + self._linear(attn.reshape(B, -1), layer["wo"])
            x = self._mlp(x, layer)
        return self._logits(x)

    def _decode_fused(self, tokens: torch.Tensor, seq_lens: torch.Tensor) -> torch.Tensor:
        """`decode` on the fused kernels: per layer, RMSNorm + q/k/v matmul, rotary embedding + cache write +
        attention (three launches; one with `decode_step.one_launch_attention()`), output matmul + residual,
        RMSNorm + gate/up matmul, SwiGLU + down matmul + residual; then RMSNorm + the output head."""
        assert self.attention == "triton", "the fused step attends with the split-KV kernel"
        c = self.config
        B = tokens.shape[0]
        one_launch = decode_step.ONE_LAUNCH_ATTENTION
        if decode_step.FUSED_ENDS:
            x, lengths = embed_and_lengths(self.embed, tokens, seq_lens)  # lengths: with the new token
        else:
            x, lengths = self.embed[tokens], (None if one_launch else seq_lens + 1)  # rope_attention takes seq_lens
        for i, layer in enumerate(self.layers):
            k_cache, v_cache = self.k_cache[i, :B], self.v_cache[i, :B]
            qkv = fused_linear(x, *self._packed(layer["wqkv"]), norm=layer["norm1"], eps=c.norm_eps)
            if one_launch:
                attn = rope_attention(qkv, self.cos, self.sin, seq_lens, k_cache, v_cache, c.n_heads,
                                      self.split_counts[i], pdl=decode_step.PDL)
            else:
                q = rope_and_cache(qkv, self.cos, self.sin, seq_lens, k_cache, v_cache, c.n_heads)
                attn = decode_attention(q, k_cache, v_cache, lengths, pdl=decode_step.PDL)
            x = fused_linear(attn.view(B, -1), *self._packed(layer["wo"]), residual=x)
            gate_up = fused_linear(x, *self._packed(layer["w13"]), norm=layer["norm2"], eps=c.norm_eps)
            x = fused_linear(gate_up, *self._packed(layer["w2"]), swiglu=True, residual=x)
        return fused_linear(x, *self._packed(self.head), norm=self.norm, eps=c.norm_eps)

    # --- generation -----------------------------------------------------------------------------

    def step(self, tokens: torch.Tensor, seq_lens: torch.Tensor) -> None:
        """Greedy decoding in place: the next token of each sequence replaces `tokens`, `seq_lens` += 1."""
        logits = self.decode(tokens, seq_lens)
        if self.fused and decode_step.FUSED_ENDS:
            greedy_next(logits, tokens, seq_lens)
            return
        tokens.copy_(logits.argmax(dim=-1))
        seq_lens.add_(1)

    def graphed_step(self, tokens: torch.Tensor, seq_lens: torch.Tensor):
        """`step` captured once as a CUDA graph over these two (static) buffers; returns replay(). A replay
        launches the whole step at once: the host's cost per kernel launch is paid at capture only."""
        saved = (tokens.clone(), seq_lens.clone())
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up (Triton compiles here, not during capture)
            for _ in range(2):
                self.step(tokens, seq_lens)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.step(tokens, seq_lens)
        # warm-up and capture ran the step 3 times: undo it. What they wrote in the cache lies past
        # seq_lens again, where nothing is read (needs seq_lens + 3 <= max_seq).
        tokens.copy_(saved[0])
        seq_lens.copy_(saved[1])
        return graph.replay



KERNEL_GROUPS = (  # the first group whose words a kernel's name holds
    ("attention: split-KV + merge", ("split_kv_kernel", "merge_splits_kernel", "rope_attention_kernel")),
    ("attention: SDPA", ("flash", "fmha", "sdpa", "attention")),
    ("rotary embedding + cache write", ("rope_cache_kernel",)),
    ("matmuls: fused_linear", ("fused_linear_kernel",)),
    ("matmuls: weight_only_matmul", ("weight_only_matmul_kernel",)),
    ("matmuls: cuBLAS", ("gemv", "gemm", "nvjet", "cutlass", "xmma", "splitkreduce")),
)
OTHER_KERNELS = "PyTorch's other kernels (norms, rotary, adds, copies, argmax)"


def kernel_group(name: str) -> str:
    low = name.lower()
    return next((group for group, words in KERNEL_GROUPS if any(w in low for w in words)), OTHER_KERNELS)


def profile_kernels(run, calls: int = 10) -> list[dict]:
    """The GPU kernels of `calls` calls of run() (a graph's replay, or an eager step), from torch.profiler: one
    row per kernel name, {"name", "group", "launches", "us"} per call, longest first (CUDA)."""
    from torch.profiler import ProfilerActivity, profile

    from ...measure import profiling
    run()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        torch.cuda.synchronize()
    rows = [{"name": r["name"], "group": kernel_group(r["name"]), "launches": r["calls"] / calls,
             "us": r["self_device_us"] / calls} for r in profiling.rows(prof) if r["kind"] == "kernel"]
    return sorted(rows, key=lambda r: -r["us"])


def by_group(rows: list[dict]) -> dict[str, dict]:
    """profile_kernels' rows summed by group: {group: {"launches", "us"}}, longest first."""
    groups: dict[str, dict] = {}
    for r in rows:
        g = groups.setdefault(r["group"], {"launches": 0.0, "us": 0.0})
        g["launches"] += r["launches"]
        g["us"] += r["us"]
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["us"]))


def time_step(model: Decoder, batch: int, context: int, graph: bool = True, max_rounds: int = 60) -> float:
    """Median seconds of one greedy decode step of `batch` sequences, each from `context` cached positions
    (reset before every timed call, outside its window), captured as a CUDA graph or eager. The GPU is idle at
    each call (flush=False): the host's launching is part of a step's cost. Needs context + ~1000 ≤ max_seq
    (the warm-up steps append positions)."""
    from ...measure import timing
    tokens = torch.zeros(batch, dtype=torch.long, device=model.device)
    lens = torch.full((batch,), context, dtype=torch.int32, device=model.device)
    run = model.graphed_step(tokens, lens) if graph else (lambda: model.step(tokens, lens))
    return timing.time_fn(lambda _: run(), make_args=lambda: (lens.fill_(context),), device=model.device.type,
                          flush=False, budget_s=1.0, max_rounds=max_rounds).median
