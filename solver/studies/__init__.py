"""Studies over many schedules: compare (every handwritten schedule against the solver) and pareto (time against memory)."""
