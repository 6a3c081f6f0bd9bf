"""The CP-SAT formulation of an instance and the search run over it.

`scale` (times and memory in whole ticks), `data` (what the model is built from), `variables`,
`constraints` and `objective` (the three building steps), `model` (`build_model`, which runs them),
`warm_start` (a complete hint and the objective's known range) and `search` (parameters, the
solution callback, the watchdog and the read-back).
"""
