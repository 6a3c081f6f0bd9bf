"""The verbs of pipesat: heuristics, the CP-SAT solve, bounds, simulation, validation, metrics, export."""
