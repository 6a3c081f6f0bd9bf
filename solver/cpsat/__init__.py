"""The CP-SAT formulation of an instance and the search run over it."""
