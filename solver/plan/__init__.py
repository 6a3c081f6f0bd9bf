"""`pipesat plan`: the best way to train a model on a cluster, found exactly.

`spec` reads the plan's SPEC file (model, cluster, training) and the options that override it;
`space` enumerates the configurations (tensor, pipeline and data parallelism, chunks and placement,
microbatch size); `measure` turns a schedule of one configuration into an iteration time,
tokens/s, MFU and memory per GPU; `search` is the exact pruning loop (heuristics everywhere, lower
bounds, CP-SAT where a configuration may still win), `tasks` the work on one configuration that it
hands out (bound, assess, solve) and `progress` its progress reports; `executors` run its
independent tasks in a local process pool or on a Ray cluster. `schedules` is what
`training.schedules` allows, and `predict` one configuration as it runs (`plan`'s predict option).
docs/plan.md explains all of it.
"""
