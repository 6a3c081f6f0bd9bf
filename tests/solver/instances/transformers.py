"""The transformers and hardware the cost model's tests describe: the ZB paper's 1.5B layer, Llama 3 8B,
a small mixture of experts and an A100 timed at a flat rate."""

from __future__ import annotations

from pipesat.solver.instances.description import Hardware, Transformer

# The 1.5B setting of the ZB paper's Table 5 (docs/reference.md; h 2304, a 24, s 1024).
GPT_1_5B = Transformer(layers=24, hidden=2304, heads=24, seq_len=1024, microbatch_size=1, vocab=50257)
# Llama 3 8B's published configuration.
LLAMA_8B = Transformer(32, 4096, 32, 4096, vocab=128256, kv_heads=8, ffn_hidden=14336)
A100 = Hardware(tflops=312, efficiency=0.5, bandwidth=50, latency=10)
S, B, H, A = 1024, 1, 2304, 24
# A small mixture of experts: 16 routed experts of width 512, each token to 2 of them and to 1 shared
# expert; its dense layer (`MOE.dense()`) a SwiGLU MLP of width 2816.
MOE = Transformer(4, 1024, 8, 2048, ffn_hidden=2816, experts=16, top_k=2, shared_experts=1, expert_ffn_hidden=512)
