"""The schedules pipesat makes, by name, and the titles people read for them.

One table that the heuristics (which make the schedules) and the reports (which name them) both read.
Any other name (`cp-sat`, a loaded file's) is its own title.
"""

from __future__ import annotations

SPLIT_OUT = " with W split out"
"""What a fused-backward schedule's name gains when its W ops are split out after each B (another schedule)."""

SCHEDULE_TITLES: dict[str, str] = {
    "gpipe": "GPipe",
    "interleaved": "Interleaved 1F1B",
    "1f1b": "1F1B",
    "interleaved-overlap": "Interleaved 1F1B, overlapped pairs",
    "dualpipe-v": "DualPipeV",
    "dualpipe": "DualPipe",
    "v-min": "V-Min",
    "v-half": "V-Half",
    "v-zb": "V-ZB",
    "v-auto": "V-auto",
    "block-optimal": "Block-optimal",
    "zb-auto": "ZB-auto",
    "zb-1p": "ZB-1p (ZB-auto at 1x)",
    "zb-2p": "ZB-2p (ZB-auto at 2x)",
    "zb-v": "ZB-V",
    "zb-h1": "ZB-H1",
    "zb-h2": "ZB-H2",
    "pipeoffload-full-v": "PipeOffload full (V)",
    "pipeoffload-selective-v": "PipeOffload selective (V)",
    "pipeoffload-full-1f1b": "PipeOffload full (1F1B)",
    "pipeoffload-selective-1f1b": "PipeOffload selective (1F1B)",
    "offload-device0-1f1b": "1F1B, device 0 offloaded",
    "offload-device0-v": "V-Half, device 0 offloaded",
    "one-at-a-time": "one-at-a-time",
    "periodic": "periodic start (pipesat's, not handwritten)",
    "memory-gated": "memory-gated start (pipesat's, not handwritten)",
}
