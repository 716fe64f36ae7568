"""Deciding the work before it runs: bins and the plan, the memory model, the automatic layout,
the schedule and budgets, hits estimates, the query list's jobs, and the inputs read with their
default plan."""
