"""Results beyond one job: each run on the main branch recorded by commit, and its trend."""
