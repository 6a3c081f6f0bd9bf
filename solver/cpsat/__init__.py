"""The CP-SAT formulation of an instance and the search run over it.

`scale` (times and memory in whole ticks), `data` (what the model is built from), `variables`,
`constraints` and `objective` (the three building steps), `model` (`build_model`, which runs them),
`warm_start` (a complete hint and the objective's known range), `search_parameters` (what CP-SAT
runs with: workers, time, portfolios), `record` (the search as the parent sees it, and its progress)
and `search` (the run in a child process, its probes and the read-back); `processes`, the cores CP-SAT may
use and the seconds a stopped child has before it is killed.
"""
