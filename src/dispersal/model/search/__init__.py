"""Search layer: candidate spaces, integer bisections, the planner and the solver, built on the kernel."""
